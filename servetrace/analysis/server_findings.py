"""What the server-metrics checks found (``analysis.server_metrics``): the alignment of the
clocks and one ``Finding`` per check, numbers in internal units (ns, counts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl


@dataclass(frozen=True)
class Finding:
    name: str
    family: str | None
    compared: int = 0  # scrapes (gauges) or intervals (counters, histogram) compared
    max_abs: float | None = None  # None: unavailable (``unavailable`` says why)
    mean_abs: float | None = None
    mean_signed: float | None = None  # server − trace
    server_total: float | None = None
    trace_total: float | None = None
    worst_at_ns: int | None = None  # trace clock
    cause: str | None = None
    unavailable: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def differences(name: str, family: str, diff: np.ndarray, at: np.ndarray, **more: Any) -> Finding:
    """The finding of the differences server − trace, ``at[i]`` the instant of ``diff[i]``
    (trace clock); ``more`` sets the other fields (``compared``: ``diff.size`` unless
    given)."""
    if diff.size == 0:
        return Finding(name, family, unavailable="no scrape falls within the trace")
    worst = int(np.argmax(np.abs(diff)))
    fields: dict[str, Any] = {"compared": int(diff.size), **more}
    return Finding(
        name,
        family,
        max_abs=float(np.abs(diff).max()),
        mean_abs=float(np.abs(diff).mean()),
        mean_signed=float(diff.mean()),
        worst_at_ns=int(at[worst]) if diff[worst] else None,
        **fields,
    )


@dataclass(frozen=True)
class Alignment:
    offset_ns: int
    method: str  # same_clock | estimated | assumed
    statement: str
    resolution_ns: int | None = None


@dataclass(frozen=True)
class ServerComparison:
    path: str
    families: pl.DataFrame  # family, kind, series, samples, first_ns, last_ns
    scrapes: int
    interval_ns: int | None
    alignment: Alignment
    findings: dict[str, Finding]
    # The series read (the canonical metrics frame, server clock), for the views that
    # draw them; and with --slice, the per-slice server figures (``server_slices``).
    metrics: pl.DataFrame | None = field(default=None, compare=False, repr=False)
    slices: pl.DataFrame | None = field(default=None, compare=False, repr=False)
    slices_unavailable: dict[str, str] = field(default_factory=dict)  # column → why null
    engine: str = "vllm"  # whose families were read (``server_engines.ENGINES``)
