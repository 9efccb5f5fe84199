"""The run model: ``Run`` (one analysed run) and ``Runs`` (several); what each was read
from is a ``sources.inputs.RunSource``.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servetrace.analysis.result import Analysis
from servetrace.sources.inputs import RunSource

if TYPE_CHECKING:
    import polars as pl

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

    def notes(self) -> list[tuple[str, str, list[str]]]:
        """``(run label, message, files)`` of every run's notes (label "": about the files
        read) and of its analysis warnings not already among them."""
        out: list[tuple[str, str, list[str]]] = []
        for run in self.runs:
            files = [str(path) for path in run.source.paths]
            out += [("", message, files) for message in run.notes]
            if run.analysis is not None:
                warnings = run.analysis.warnings
                out += [(run.label, m, files) for m in warnings if m not in run.notes]
        return out

    def frame(self, of: Callable[[Analysis], pl.DataFrame]) -> pl.DataFrame | None:
        """``of`` each analysed run's analysis, with a ``run`` column; None when every run
        is a summary only."""
        import polars as pl

        frames = [
            of(run.analysis).with_columns(pl.lit(run.label).alias("run"))
            for run in self.runs
            if run.analysis is not None
        ]
        return pl.concat(frames, how="diagonal_relaxed") if frames else None

    def by_label(self, label: str) -> Run:
        for run in self.runs:
            if run.label == label:
                return run
        raise KeyError(label)
