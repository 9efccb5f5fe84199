"""Which files make one BLIS TraceV2 trace: a YAML header beside a CSV of requests.

inference-sim/inference-sim at f90a1e3a6787da17c2cd463dab6fb2660b1b1760:
``sim/workload/tracev2.go`` (``ExportTraceV2`` writes the header with ``yaml.Marshal``
of ``TraceHeader``, whose first key is ``trace_version``, and the CSV whose header row
is ``traceV2Columns``, ``request_id,client_id,tenant_id,slo_class,…``); ``blis run
--trace-output NAME`` and ``blis replay --trace-output NAME`` write ``NAME.yaml`` and
``NAME.csv`` (``cmd/root.go``, ``cmd/replay.go``); ``blis observe`` writes wherever
``--trace-header`` and ``--trace-data`` say (``cmd/observe_cmd.go``).

So a data CSV's header is the ``.yaml`` (or ``.yml``) of the same stem beside it, a
header's data the ``.csv`` of the same stem; a header and a CSV given together, with
other stems, are one trace when they are the only two.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources.sniff import read_head
from servetrace.sources.yaml_doc import is_yaml_name, load_yaml

# ``traceV2Columns``: the columns every TraceV2 CSV has, in this order (optional ones,
# ``vllm_priority`` after ``slo_class`` and ``slo_target_us`` after ``deadline_us``, may sit
# between them; ``x_request_id``, ``adapter``, ``think_time_us`` trail).
COLUMNS = (
    "request_id",
    "client_id",
    "tenant_id",
    "slo_class",
    "session_id",
    "round_index",
    "prefix_group",
    "prefix_length",
    "streaming",
    "input_tokens",
    "output_tokens",
    "text_tokens",
    "image_tokens",
    "audio_tokens",
    "video_tokens",
    "reason_ratio",
    "model",
    "deadline_us",
    "server_input_tokens",
    "arrival_time_us",
    "send_time_us",
    "first_chunk_time_us",
    "last_chunk_time_us",
    "num_chunks",
    "status",
    "error_message",
    "finish_reason",
)
_LEAD = COLUMNS[:4]
_HEADER_KEY = re.compile(rb"^trace_version:", re.MULTILINE)
WHAT_HEADER = "a BLIS TraceV2 header"


def _first_line(path: Path) -> list[str]:
    try:
        head = read_head(path, 4096)
    except InputError:
        return []
    line = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace").strip()
    return [name.strip().strip('"') for name in line.split(",")]


def is_data(path: Path) -> bool:
    """A TraceV2 data CSV: its header row starts with ``traceV2Columns`` and holds all of them."""
    if not path.is_file() or not path.name.lower().removesuffix(".gz").endswith(".csv"):
        return False
    names = _first_line(path)
    return tuple(names[:4]) == _LEAD and set(COLUMNS) <= set(names)


def is_header(path: Path) -> bool:
    """A TraceV2 header: a YAML file with a top-level ``trace_version``."""
    if not path.is_file() or not is_yaml_name(path):
        return False
    try:
        return _HEADER_KEY.search(read_head(path, 4096)) is not None
    except InputError:
        return False


def is_blis(path: Path) -> bool:
    return is_data(path) or is_header(path)


def _stem(path: Path) -> str:
    name = path.name.removesuffix(".gz")
    return name.rsplit(".", 1)[0]


def header_beside(data: Path) -> Path | None:
    """The header of the same stem beside ``data``, when there is one."""
    for suffix in (".yaml", ".yml"):
        candidate = data.with_name(_stem(data) + suffix)
        if is_header(candidate):
            return candidate
    return None


def data_beside(header: Path) -> Path:
    """The CSV of the same stem beside ``header`` (``InputError`` when there is none)."""
    for suffix in (".csv", ".csv.gz"):
        candidate = header.with_name(_stem(header) + suffix)
        if is_data(candidate):
            return candidate
    raise InputError(
        f"{header}: {WHAT_HEADER} without its requests: no TraceV2 CSV "
        f"{_stem(header)}.csv beside it",
        hint=f"give the data CSV too: servetrace analyze {header} DATA.csv",
    )


def pair(paths: Sequence[Path]) -> list[tuple[Path, Path | None]]:
    """``(data, header or None)`` of each trace among ``paths`` (all TraceV2 files)."""
    headers = [p for p in paths if is_header(p)]
    datas = [p for p in paths if p not in headers]  # a CSV that is none: its reader says so
    if not datas:
        return [(data_beside(h), h) for h in headers]
    if len(datas) == 1 and len(headers) == 1:
        return [(datas[0], headers[0])]
    by_stem = {(h.parent, _stem(h)): h for h in headers}
    found = [(d, by_stem.pop((d.parent, _stem(d)), None) or header_beside(d)) for d in datas]
    if by_stem:
        header = next(iter(by_stem.values()))
        raise InputError(
            f"{header}: {WHAT_HEADER}, but none of the CSVs given has its stem: which "
            "trace it describes cannot be told",
            hint="give one trace at a time (its header and its CSV), or name them alike",
        )
    return found


def read_header(path: Path) -> Mapping[str, Any]:
    """The header's keys (``InputError`` naming the file when it is not a TraceV2 header)."""
    doc = load_yaml(path, WHAT_HEADER)
    if not isinstance(doc, Mapping) or "trace_version" not in doc:
        raise InputError(f"{path}: not {WHAT_HEADER}: no top-level 'trace_version'")
    unit = doc.get("time_unit")
    if unit not in (None, "us", "microseconds"):
        raise InputError(
            f"{path}: field 'time_unit' is {unit!r}: TraceV2 times are microseconds "
            "(columns *_us; BLIS writes 'us' or 'microseconds')",
            hint="is the header from the trace it sits beside?",
        )
    return doc


def in_folder(files: Sequence[Path]) -> list[tuple[Path, Path]]:
    """The traces in a folder: each CSV with a header of its stem beside it (a folder's CSVs
    are not opened otherwise: a folder of canonical CSV parts stays one trace)."""
    stems = {_stem(f) for f in files if is_yaml_name(f)}
    found = []
    for data in files:
        if _stem(data) in stems and is_data(data):
            header = header_beside(data)
            if header is not None:
                found.append((data, header))
    return found
