"""The report's headline: the answer first, read from the one JSON report of the run.

A row of tiles (requests, req/s, output tok/s, goodput and attainment when targets were
given, peak concurrency, TTFT and ITL p50/p99) and the facts the run's source declares
(tool, model, rate, concurrency, duration), as a benchmark tool's own report opens.
Every value comes from the dict ``servetrace analyze --format json`` prints (nothing is
recomputed), and every value that dict marks unavailable is shown as *unavailable* with
its reason, never as a zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tile:
    """One headline figure: its label, its text, and where the JSON holds it."""

    label: str
    text: str  # "16.56" or "unavailable"
    unit: str = ""
    path: str | None = None  # the JSON path of the value shown (None when unavailable)
    reason: str | None = None  # why it is unavailable
    detail: str | None = None  # a few words under the value


@dataclass(frozen=True)
class Headline:
    id: str
    title: str
    tiles: list[Tile]
    facts: list[tuple[str, str]]  # (name, value) the source declares
    source: str = ""  # the input, when the title is a shorter run label
    no_facts: str = "The source declares no run facts (tool, model, rate, concurrency, duration)."


def value_at(doc: dict[str, Any], path: str) -> Any:
    """The value at a dotted JSON path (``metrics.ttft.p99``), None where it is missing."""
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _number(value: float, digits: int) -> str:
    """``400``, ``1,884``, ``16.56``, ``0.318``: whole above 1,000, three digits below 1."""
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:,.{digits}f}"


def _ms(value: float) -> str:
    """Three significant digits below 100 ms, whole ms above: ``45.4``, ``548``."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _tile(
    doc: dict[str, Any],
    label: str,
    path: str,
    unit: str,
    reason: str | None,
    shown: Any = None,
    detail: str | None = None,
) -> Tile:
    value = value_at(doc, path)
    if reason is not None or value is None:
        return Tile(label, "unavailable", unit, None, reason or _missing(doc, path), detail)
    text = shown(value) if shown else _number(value, 2)
    return Tile(label, text, unit, path, None, detail)


def _missing(doc: dict[str, Any], path: str) -> str:
    """Why a value the JSON leaves null is null, when no reason is recorded for it."""
    if path.startswith("metrics.") and not value_at(doc, path.rsplit(".", 1)[0] + ".count"):
        return "no completed request"
    return "not measured in this trace"


def tiles(doc: dict[str, Any]) -> list[Tile]:
    gone: dict[str, str] = doc.get("unavailable") or {}
    rate_gone = gone.get("throughput")
    outcomes = doc.get("outcomes") or {}
    requests = Tile(
        "requests",
        f"{doc['accounting']['requests']:,}",
        path="accounting.requests",
        detail=f"{outcomes.get('completed', 0):,} completed",
    )
    out = [
        requests,
        _tile(doc, "requests/s", "throughput.requests_per_s", "req/s", rate_gone),
        _tile(
            doc,
            "output tokens/s",
            "throughput.output_tokens_per_s",
            "tok/s",
            rate_gone or gone.get("output_tokens_per_s"),
            shown=lambda v: _number(v, 1),
        ),
    ]
    goodput = doc.get("goodput")
    if goodput:  # only when targets were given
        targets = " and ".join(goodput.get("targets") or [])
        out.append(
            _tile(
                doc,
                "goodput",
                "throughput.goodput_requests_per_s",
                "req/s",
                rate_gone,
                detail=targets,
            )
        )
        out.append(
            _tile(
                doc,
                "SLO attainment",
                "goodput.fraction",
                "",
                None,
                shown=lambda v: f"{v:.1%}",
                detail=f"{goodput.get('requests_met', 0):,} of "
                f"{goodput.get('requests_completed', 0):,} completed",
            )
        )
    queue_gone = gone.get("queue_wait") or gone.get("concurrency")
    for label, key, why, detail in (
        ("peak concurrency", "in_system_peak", gone.get("concurrency"), "in the system at once"),
        ("peak queue", "queued_peak", queue_gone, "waiting for admission"),
    ):
        out.append(_tile(doc, label, f"concurrency.{key}", "requests", why, detail=detail))
    for metric in ("ttft", "itl"):
        for stat in ("p50", "p99"):
            label, path = f"{metric.upper()} {stat}", f"metrics.{metric}.{stat}"
            out.append(_tile(doc, label, path, "ms", gone.get(metric), shown=_ms))
    return out


DECLARED = (
    ("tool", "tool", ""),
    ("model", "model", ""),
    ("request rate", "request_rate_per_s", "req/s"),
    ("max concurrency", "max_concurrency", ""),
    ("duration", "duration_s", "s"),
    ("prompts", "num_prompts", ""),
    ("dataset", "dataset", ""),
    ("GPUs", "gpus", ""),
)


def facts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """What the run's source declares about it, in words (nothing when it declares none)."""
    declared = doc.get("declared") or {}
    out = []
    for name, key, unit in DECLARED:
        value = declared.get(key)
        if value is None:
            continue
        if value == "inf":
            text = "unlimited (all requests at once)"
        elif isinstance(value, float):
            text = f"{value:,.1f}" if key == "duration_s" else f"{value:g}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = str(value)
        out.append((name, f"{text} {unit}".strip()))
    return out


def headline(doc: dict[str, Any], id_: str, title: str, source: str = "") -> Headline:
    return Headline(id_, title, tiles(doc), facts(doc), source if source != title else "")


def sweep_headline(doc: dict[str, Any]) -> Headline:
    """A sweep's answer, from ``servetrace capacity --format json``: how many runs, the
    most any run achieved, and the capacity (per sweep) when SLO targets were given."""
    runs = doc.get("runs") or []
    out = [Tile("runs", f"{len(runs):,}", path="runs")]
    for label, key, unit, digits in (
        ("highest requests/s", "requests_per_s", "req/s", 2),
        ("highest output tokens/s", "output_tokens_per_s", "tok/s", 1),
    ):
        known = [(i, r[key]) for i, r in enumerate(runs) if r.get(key) is not None]
        if not known:
            out.append(Tile(label, "unavailable", unit, reason="no run measured it"))
            continue
        best, value = max(known, key=lambda pair: pair[1])
        out.append(
            Tile(
                label,
                _number(value, digits),
                unit,
                f"runs.{best}.{key}",
                detail=runs[best]["label"],
            )
        )
    if doc.get("targets"):
        found = doc.get("capacity_by_sweep") or ([doc["capacity"]] if doc.get("capacity") else [])
        for i, cap in enumerate(found):
            name = f"capacity: {cap['sweep']}" if cap.get("sweep") else "capacity"
            path = f"capacity_by_sweep.{i}.requests_per_s" if cap.get("sweep") else None
            if cap.get("requests_per_s") is None:
                out.append(Tile(name, "unavailable", "req/s", reason=cap.get("unavailable")))
                continue
            out.append(
                Tile(
                    name,
                    _number(cap["requests_per_s"], 2),
                    "req/s",
                    path or "capacity.requests_per_s",
                    detail=f"at {cap['required']:.0%} attainment ({cap.get('bound') or ''})",
                )
            )
    targets = " and ".join(doc.get("targets") or [])
    facts = [("SLO targets", targets)] if targets else []
    return Headline("sweep-headline", "the sweep", out, facts, no_facts="")
