"""The run model: ``RunSource`` (what to read), ``Run`` (one analysed run), ``Runs``.

``declared`` is what the run says about itself, never measured: every key of
``DECLARED_KEYS`` is present, None when the export does not say it.

| key | meaning |
|---|---|
| ``tool`` | the client or engine that wrote the export (``vllm-bench``, ``aiperf``, …) |
| ``model`` | the served model's name |
| ``request_rate_per_s`` | the offered request rate; ``math.inf`` for "as fast as possible" |
| ``max_concurrency`` | the client's concurrency limit (requests in flight) |
| ``num_prompts`` | requests the run was asked to send |
| ``duration_s`` | the run's own benchmark duration (seconds) |
| ``completed`` | requests the tool counted as completed |
| ``dataset`` | the dataset name (``sharegpt``, ``synthetic``, …) |
| ``tensor_parallel`` / ``pipeline_parallel`` | parallelism, when the export names it |
| ``gpus`` | GPUs serving the run: tp × pp when both are known |
| ``sources`` | where each fact came from (key → file or ``file name``) |

A ``Run`` with ``analysis`` None is a *reported* run: only the tool's summary was given,
``reported`` holds the tool's own numbers in servetrace's metric names (ms, req/s, tok/s)
and there are no per-request statistics.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servetrace.api._analyze import Analysis

DECLARED_KEYS = (
    "tool",
    "model",
    "request_rate_per_s",
    "max_concurrency",
    "num_prompts",
    "duration_s",
    "completed",
    "dataset",
    "tensor_parallel",
    "pipeline_parallel",
    "gpus",
)


def empty_declared() -> dict[str, Any]:
    """Every declared key, unknown; ``sources`` empty."""
    return {**dict.fromkeys(DECLARED_KEYS), "sources": {}}


@dataclass(frozen=True)
class RunSource:
    """What one run is read from, as ``sources.runs.discover`` found it.

    ``fmt`` is the importer (``--from`` name), or None for a canonical event log read
    from ``texts`` (files, globs, directories of parts, as the canonical reader takes
    them). ``benchmark`` picks one benchmark of a GuideLLM file holding several.
    ``summary`` is the tool's summary file when one was found beside the export (or
    is all there is: ``summary_only``). ``notes`` say what discovery decided.
    """

    paths: tuple[Path, ...]
    fmt: str | None
    texts: tuple[str, ...] = ()
    benchmark: int | None = None
    summary: Path | None = None
    summary_only: bool = False
    notes: tuple[str, ...] = ()
    # A summary file may hold several runs (vLLM's benchmark_results.json): which one.
    summary_row: int | None = None

    @property
    def where(self) -> Path:
        """The path that names this run (for labels)."""
        if self.paths:
            return self.paths[0]
        assert self.summary is not None
        return self.summary


@dataclass(frozen=True)
class Run:
    """One run: its label, where it came from, what it declares, and its analysis.

    ``analysis`` is None for a summary-only run, whose tool numbers are in ``reported``.
    """

    label: str
    source: RunSource
    declared: dict[str, Any]
    analysis: Analysis | None
    reported: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def load_key(self) -> tuple[int, float, int, float, str]:
        """Sort key: declared rate (finite, then inf, then unknown), then concurrency."""

        def rank(value: Any) -> tuple[int, float]:
            if value is None:
                return (2, 0.0)
            return (1, 0.0) if value == math.inf else (0, float(value))

        rate = rank(self.declared.get("request_rate_per_s"))
        conc = rank(self.declared.get("max_concurrency"))
        return (*rate, *conc, self.label)

    def to_dict(self, naming: str = "servetrace") -> dict[str, Any]:
        """The run's report (``analyze --format json`` keys) plus label and declared."""
        from servetrace.runs.declared import declared_dict

        report: dict[str, Any] = (
            self.analysis.to_dict(naming) if self.analysis is not None else {"reported": None}
        )
        report["label"] = self.label
        report["declared"] = declared_dict(self.declared)
        report["reported"] = self.reported
        return report


@dataclass(frozen=True)
class Runs(Sequence["Run"]):
    """Several runs, sorted by declared load (what ``servetrace.analyze`` returns for
    several runs). Indexable and iterable like a list of ``Run``."""

    runs: tuple[Run, ...]
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __getitem__(self, index: int) -> Run:  # type: ignore[override]
        return self.runs[index]

    def by_label(self, label: str) -> Run:
        for run in self.runs:
            if run.label == label:
                return run
        raise KeyError(label)

    def to_dict(self, naming: str = "servetrace") -> dict[str, Any]:
        """``{"servetrace_version", "schema_version", "runs": [REPORT + label, declared]}``."""
        from servetrace import SCHEMA_VERSION, __version__

        return {
            "servetrace_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "runs": [run.to_dict(naming) for run in self.runs],
            "warnings": list(self.warnings),
        }
