"""Server metrics: an engine's Prometheus series, read into one long frame (design §12).

Every reader returns the **canonical metrics frame**, one row per sample:

- ``ts`` (Int64): when the sample was scraped, ns since the epoch (or on the trace clock);
- ``family`` (String): the series name as exposed (``vllm:num_requests_waiting``,
  ``vllm:prompt_tokens_total``); a histogram's buckets carry its base name, its
  ``_sum``/``_count`` their own names;
- ``kind`` (String): ``gauge``, ``counter``, ``histogram`` or ``summary``;
- ``labels`` (String): the labels but ``le``, as JSON with sorted keys (``{}``: none);
- ``le`` (Float64): a histogram bucket's upper bound (``inf`` for ``+Inf``), else null;
- ``value`` (Float64): the sample (a summary's quantiles keep ``quantile`` in labels).

``read(path, fmt)`` picks the reader (``schema.FORMATS``) from ``fmt`` or the file's shape;
inference-perf's per-stage summaries have no time axis and are read apart
(``inference_perf.read_stages``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.server_metrics.schema import FORMATS


def detect(path: Path) -> str:
    """The format of ``path``: a folder or text exposition is ``prometheus``; JSON with
    ``data.resultType`` is ``query_range``; JSON Lines with ``timestamp_ns`` is ``aiperf``."""
    if path.is_dir():
        if (path / "server_metrics_export.jsonl").is_file():
            return "aiperf"
        return "prometheus"
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    if head.startswith(b"{"):
        first = head.split(b"\n", 1)[0]
        if b'"timestamp_ns"' in first and b'"metrics"' in first:
            return "aiperf"
        return "query_range"
    return "prometheus"


def read(path: str | Path, fmt: str | None = None) -> pl.DataFrame:
    """The canonical metrics frame of ``path`` in format ``fmt`` (None: detected)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder", hint="give the server metrics file")
    chosen = fmt or detect(p)
    if chosen not in FORMATS:
        raise InputError(f"{p}: unknown server metrics format {chosen!r}", hint=", ".join(FORMATS))
    frame: pl.DataFrame = importlib.import_module(FORMATS[chosen]).read(p)
    return frame
