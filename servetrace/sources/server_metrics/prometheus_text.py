"""The Prometheus text exposition format (version 0.0.4), parsed by ``prometheus_client``.

Two layouts:

- **one file of many scrapes**: every sample carries the format's own timestamp (an integer
  of **milliseconds** since the epoch, or on the trace clock), samples of one family grouped
  under its ``# TYPE`` line, as ``promtool tsdb create-blocks-from`` takes them. This is
  what ``servetrace simulate --metrics-out`` writes.
- **a folder of scrapes**: one exposition per file, without timestamps; the scrape time is
  the file name's stem, an integer of milliseconds (``1733238000123.prom``). A sample that
  does carry a timestamp keeps its own.

A text ending in ``# EOF`` is OpenMetrics and read with the same client's OpenMetrics
parser: its timestamps are float seconds (kept to the ns); that parser takes one point per
series, so OpenMetrics is one scrape per file (a folder), or timestamps on every sample.

A sample with no timestamp in a single file, a file name that is not a number, or text the
parser rejects is an input error naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.errors import InputError, first_line
from servetrace.sources.server_metrics.schema import KINDS, Row, frame, label_text, ms_ns
from servetrace.units import NS_PER_MS, NS_PER_S


def _parse(text: str, where: Path, default_ts_ns: int | None) -> list[Row]:
    try:
        if text.rstrip().endswith("# EOF"):
            # OpenMetrics (float-second timestamps): the same client's OpenMetrics parser
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
        else:
            from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise InputError(
            f"{where}: reading Prometheus text needs prometheus_client",
            hint="pip install 'servetrace[metrics]'",
        ) from None
    rows: list[Row] = []
    try:
        for fam in text_string_to_metric_families(text):
            kind = fam.type if fam.type in KINDS else "gauge"
            for s in fam.samples:
                if s.name.endswith("_created"):
                    continue  # prometheus_client's creation time, not a sample of the series
                if s.timestamp is not None:
                    ts = _stamp_ns(s.timestamp)
                elif default_ts_ns is not None:
                    ts = default_ts_ns
                else:
                    raise InputError(
                        f"{where}: sample {s.name} has no timestamp",
                        hint="give each sample a millisecond timestamp, or a folder of "
                        "scrape files named by their epoch milliseconds",
                    )
                labels = dict(s.labels)
                le = labels.pop("le", None) if kind == "histogram" else None
                # Buckets under the family's name, _sum/_count (and counters) as exposed.
                family = fam.name if le is not None else s.name
                bound = None if le is None else float(le)
                rows.append((ts, family, kind, label_text(labels), bound, float(s.value)))
    except InputError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise InputError(
            f"{where}: not Prometheus text exposition: {first_line(e)}",
            hint="the file must be Prometheus text format 0.0.4 (what /metrics returns)",
        ) from None
    return rows


def _stamp_ns(stamp: object) -> int:
    """A sample's timestamp in ns: OpenMetrics' exact (sec, nsec), or the text format's
    milliseconds (which the parser gives as float seconds)."""
    sec = getattr(stamp, "sec", None)
    if sec is not None:
        return int(sec) * NS_PER_S + int(getattr(stamp, "nsec", 0))
    return ms_ns(float(stamp))  # type: ignore[arg-type]


def read(path: Path) -> pl.DataFrame:
    """The canonical frame of one exposition file, or of a folder of scrape files."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise InputError(f"{path}: no scrape files in the folder")
        rows = []
        for f in files:
            try:
                stamp = int(f.stem) * NS_PER_MS
            except ValueError:
                raise InputError(
                    f"{f}: the scrape time must be the file name (epoch milliseconds)",
                    hint="name each scrape file by its time, e.g. 1733238000123.prom",
                ) from None
            rows += _parse(_text(f), f, stamp)
        return frame(rows)
    return frame(_parse(_text(path), path, None))


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read as UTF-8 text: {first_line(e)}") from None
