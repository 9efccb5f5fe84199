"""Which requests (and gaps) a comparison describes, on each side.

Latency statistics describe completed requests. When the workloads pair
(``WorkloadMatch.paired``), both sides keep exactly the pairs completed in both traces,
in the baseline's order, so ``base.per_request[i]`` and ``cand.per_request[i]`` are the same
request; otherwise each side keeps its own completed requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.result import Analysis
from servetrace.comparison.catalog import COMPLETED
from servetrace.comparison.workload import WorkloadMatch


@dataclass(frozen=True)
class Population:
    """The requests (and their gaps) that latency statistics describe, per side.

    Gaps carry the analysis' request key (``servetrace.analysis.lifecycle.KEY``).
    """

    paired: bool
    base: pl.DataFrame
    cand: pl.DataFrame
    base_gaps: pl.DataFrame
    cand_gaps: pl.DataFrame


def _gaps_of(analysis: Analysis, requests: pl.DataFrame) -> pl.DataFrame:
    gaps = analysis.gaps
    if gaps.height == 0 or requests.height == 0:
        return gaps.clear()
    # Gaps in the order of ``requests`` (arrival order), so a seeded bootstrap draws the
    # same resamples on every run: the analysis' own gap order follows internal keys.
    order = requests.select(pl.col(KEY).cast(gaps.schema[KEY]), pl.int_range(pl.len()).alias("_o"))
    return (
        gaps.join(order, on=KEY, how="inner", maintain_order="left")
        .sort("_o", maintain_order=True)
        .drop("_o")
    )


def _completed_rows(requests: pl.DataFrame, name: str) -> pl.DataFrame:
    return requests.with_row_index(name).select(
        pl.col(name).cast(pl.Int64), (pl.col("outcome") == COMPLETED).alias(f"{name}_done")
    )


def population(base: Analysis, cand: Analysis, match: WorkloadMatch) -> Population:
    """The requests each side's latency statistics describe (module docstring)."""
    if match.paired:
        rows = (
            match.pairs.join(_completed_rows(base.per_request, "base_row"), on="base_row")
            .join(_completed_rows(cand.per_request, "cand_row"), on="cand_row")
            .filter(pl.col("base_row_done") & pl.col("cand_row_done"))
            .sort("base_row")
        )
        b = base.per_request[rows.get_column("base_row").to_numpy()]
        c = cand.per_request[rows.get_column("cand_row").to_numpy()]
    else:
        b = base.per_request.filter(pl.col("outcome") == COMPLETED)
        c = cand.per_request.filter(pl.col("outcome") == COMPLETED)
    return Population(match.paired, b, c, _gaps_of(base, b), _gaps_of(cand, c))
