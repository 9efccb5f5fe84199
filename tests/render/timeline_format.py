"""A validator of the Chrome Trace Event Format subset servetrace writes.

Spec: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
(the JSON Object Format: ``traceEvents`` plus optional ``displayTimeUnit``/``otherData``).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

# Required keys per event phase (``ph``) that servetrace emits.
REQUIRED = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},  # complete event
    "i": {"name", "ph", "ts", "pid", "tid", "s"},  # instant event, thread scope
    "C": {"name", "ph", "ts", "pid", "args"},  # counter event
    "M": {"name", "ph", "pid", "args"},  # metadata
}
METADATA_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def ns(us: float) -> int:
    """µs with three decimals back to integer ns (exact when the writer was exact)."""
    value = round(us * 1000)
    assert abs(us * 1000 - value) < 1e-3, f"{us} µs is not a whole number of ns"
    return value


def validate(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert the document is a valid trace; return its events."""
    assert set(doc) <= {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc.get("displayTimeUnit", "ms") in {"ms", "ns"}
    events = doc["traceEvents"]
    assert isinstance(events, list)
    for event in events:
        ph = event["ph"]
        assert ph in REQUIRED, f"unexpected ph {ph!r}"
        missing = REQUIRED[ph] - set(event)
        assert not missing, f"{event} lacks {missing}"
        assert isinstance(event["name"], str)
        assert isinstance(event["pid"], int)
        if ph != "M":
            assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
            ns(event["ts"])
        if ph == "X":
            assert event["dur"] >= 0
            ns(event["dur"])
        if ph == "i":
            assert event["s"] in {"g", "p", "t"}
        if ph == "C":
            assert all(isinstance(v, (int, float)) for v in event["args"].values())
        if ph == "M":
            assert event["name"] in METADATA_NAMES
    return events


def requests_by_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per request: its slice, its phases, requeued slices, marker, ticks (times in ns)."""
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"phases": [], "requeued": [], "markers": [], "ticks": []}
    )
    for e in events:
        args = e.get("args", {})
        rid = args.get("request_id")
        if rid is None:
            continue
        if e["ph"] == "X":
            span = (e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["tid"])
            if e.get("cat") == "request":
                out[rid]["slice"] = span
                out[rid]["args"] = args
            elif e["name"] == "requeued":
                out[rid]["requeued"].append(span)
            else:
                out[rid]["phases"].append(span)
        elif e["ph"] == "i":
            key = "ticks" if e.get("cat") == "tick" else "markers"
            out[rid][key].append((e["name"], ns(e["ts"]), e["tid"]))
    return dict(out)


def assert_consistent(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Phases partition each request; requeued slices nest in one phase; lanes never overlap."""
    requests = requests_by_id(events)
    lanes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for rid, r in requests.items():
        _, start, end, tid = r["slice"]
        lanes[tid].append((start, end))
        phases = sorted(r["phases"], key=lambda p: p[1])
        assert all(p[3] == tid for p in phases + r["requeued"]), rid
        # Contiguous from arrival to the terminal event: they sum to e2e.
        edges = [start] + [p[2] for p in phases]
        assert [p[1] for p in phases] == edges[:-1], (rid, phases)
        assert edges[-1] == end, rid
        assert sum(p[2] - p[1] for p in phases) == end - start
        for _, lo, hi, _ in r["requeued"]:
            assert any(p[1] <= lo and hi <= p[2] for p in phases), (rid, lo, hi)
        assert len(r["markers"]) == 1 and r["markers"][0][1] == end
    for spans in lanes.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, "two requests overlap on one lane"
    return requests
