"""Is it a controlled comparison? Match the requests of two traces (DESIGN §7).

``match_workloads`` pairs the requests of the two traces by a key (``request_id``, or
``pair_on``), the k-th occurrence of a key with the k-th occurrence in arrival order, and
checks arrival offsets (relative to each trace's first arrival, within
``arrival_tolerance_ns``) and lengths (prompt tokens where both traces know them; output
tokens of requests completed in both):

- ``identical``: the same keys, every offset within tolerance, every known length equal;
- ``same_requests``: the same keys, but some timing or length differs (if the prompt
  lengths of most pairs differ, the ids only coincide and the verdict is ``different``);
- ``partial``: some keys shared; compared unpaired;
- ``different``: no key shared; "differences may come from the load, not the policy".

When no key is shared and ``pair_on`` was not given, requests are paired **by position**
(k-th arrival with k-th arrival) if both traces have the same number of requests and the
pairs line up: at least 99% of the known prompt and output lengths agree, or, when no
length is known, every arrival offset is within tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from servetrace.comparison.catalog import COMPLETED
from servetrace.errors import UsageError
from servetrace.settings import DEFAULT_ARRIVAL_TOLERANCE_NS

WorkloadVerdict = Literal["identical", "same_requests", "partial", "different"]
# Position pairing needs this share of the known lengths to agree.
POSITION_AGREEMENT = 0.99


# --------------------------------------------------------------------------- workload
@dataclass(frozen=True)
class WorkloadMatch:
    """Whether two traces ran the same workload, and how their requests pair.

    ``pairs`` holds ``base_row``/``cand_row``: row positions in each ``requests`` frame
    of every pair found (used for statistics only when ``paired``). Numbers only: the
    sentence a reader sees is ``servetrace.render.workload.workload_message``.
    """

    verdict: WorkloadVerdict
    shared_requests: int
    paired: bool
    paired_by: str | None
    baseline_requests: int
    candidate_requests: int
    arrival_mismatches: int
    max_arrival_offset_diff_ns: int | None
    prompt_length_mismatches: int
    output_length_mismatches: int
    arrival_tolerance_ns: int
    pairs: pl.DataFrame = field(repr=False)


def _int_column(frame: pl.DataFrame, name: str) -> pl.Expr:
    if name in frame.columns:
        return pl.col(name).cast(pl.Int64)
    return pl.lit(None, dtype=pl.Int64).alias(name)


def _prepare(requests: pl.DataFrame, key: str) -> pl.DataFrame:
    """Row, key, occurrence, arrival offset, lengths, completion of every request."""
    return (
        requests.with_row_index("_row")
        .select(
            pl.col("_row").cast(pl.Int64),
            pl.col(key).cast(pl.String).alias("_pair"),
            (pl.col("arrival_ns") - pl.col("arrival_ns").min()).alias("_offset"),
            _int_column(requests, "prompt_tokens").alias("_prompt"),
            _int_column(requests, "output_tokens").alias("_output"),
            (pl.col("outcome") == COMPLETED).alias("_completed"),
        )
        .sort("_offset", "_row")
        .with_columns(_pos=pl.int_range(pl.len()))
    )


@dataclass(frozen=True)
class _Consistency:
    arrival: int
    worst: int | None
    prompt: int
    prompt_known: int
    output: int
    output_known: int

    @property
    def clean(self) -> bool:
        return self.arrival == 0 and self.prompt == 0 and self.output == 0


def _consistency(joined: pl.DataFrame, tolerance_ns: int) -> _Consistency:
    if joined.height == 0:
        return _Consistency(0, None, 0, 0, 0, 0)
    diff = (pl.col("_offset") - pl.col("_offset_c")).abs()
    prompt_known = pl.col("_prompt").is_not_null() & pl.col("_prompt_c").is_not_null()
    output_known = (
        pl.col("_completed")
        & pl.col("_completed_c")
        & pl.col("_output").is_not_null()
        & pl.col("_output_c").is_not_null()
    )
    row = joined.select(
        (diff > tolerance_ns).sum().alias("arrival"),
        diff.max().alias("worst"),
        (prompt_known & (pl.col("_prompt") != pl.col("_prompt_c"))).sum().alias("prompt"),
        prompt_known.sum().alias("prompt_known"),
        (output_known & (pl.col("_output") != pl.col("_output_c"))).sum().alias("output"),
        output_known.sum().alias("output_known"),
    ).row(0, named=True)
    worst = row["worst"]
    return _Consistency(
        int(row["arrival"]),
        None if worst is None else int(worst),
        int(row["prompt"]),
        int(row["prompt_known"]),
        int(row["output"]),
        int(row["output_known"]),
    )


def _lines_up(check: _Consistency, pairs: int) -> bool:
    """Whether position pairs look like the same requests (see the module docstring)."""
    if check.prompt_known == 0 and check.output_known == 0:
        return check.arrival == 0
    for wrong, known in ((check.prompt, check.prompt_known), (check.output, check.output_known)):
        if known and (known - wrong) < POSITION_AGREEMENT * known:
            return False
    return pairs > 0


def match_workloads(
    base_requests: pl.DataFrame,
    cand_requests: pl.DataFrame,
    pair_on: str | None = None,
    arrival_tolerance_ns: int = DEFAULT_ARRIVAL_TOLERANCE_NS,
) -> WorkloadMatch:
    """Match the workloads of two traces' ``requests`` frames (see the module docstring)."""
    key = pair_on or "request_id"
    missing = [
        f"{name} ({', '.join(c for c in frame.columns if not c.startswith('_'))})"
        for name, frame in (("baseline", base_requests), ("candidate", cand_requests))
        if key not in frame.columns
    ]
    if missing:
        raise UsageError(
            f"cannot pair requests on {key!r}: no such column in " + "; ".join(missing),
            hint="give --pair-on a column that both traces carry",
        )
    base = _prepare(base_requests, key)
    cand = _prepare(cand_requests, key)
    keyed_b = base.filter(pl.col("_pair").is_not_null()).with_columns(
        _occ=pl.int_range(pl.len()).over("_pair")
    )
    keyed_c = cand.filter(pl.col("_pair").is_not_null()).with_columns(
        _occ=pl.int_range(pl.len()).over("_pair")
    )
    joined = keyed_b.join(keyed_c, on=["_pair", "_occ"], how="inner", suffix="_c").sort("_row")
    nb, nc = base_requests.height, cand_requests.height
    shared = joined.height
    paired_by: str | None = key
    check = _consistency(joined, arrival_tolerance_ns)
    verdict: WorkloadVerdict
    if shared == 0:
        verdict = "different"
        paired_by = None
        if pair_on is None and nb == nc and nb > 0:
            by_position = base.join(cand, on="_pos", how="inner", suffix="_c").sort("_row")
            position_check = _consistency(by_position, arrival_tolerance_ns)
            if _lines_up(position_check, by_position.height):
                joined, check, shared, paired_by = (
                    by_position,
                    position_check,
                    by_position.height,
                    "position",
                )
                verdict = "identical" if check.clean else "same_requests"
    elif shared == nb == nc:
        ids_only = check.prompt_known > 0 and check.prompt > check.prompt_known / 2
        if ids_only:
            verdict, paired_by = "different", None
        else:
            verdict = "identical" if check.clean else "same_requests"
    else:
        verdict = "partial"
    paired = verdict in ("identical", "same_requests")
    pairs = joined.select(pl.col("_row").alias("base_row"), pl.col("_row_c").alias("cand_row"))
    return WorkloadMatch(
        verdict=verdict,
        shared_requests=shared,
        paired=paired,
        paired_by=paired_by if paired else None,
        baseline_requests=nb,
        candidate_requests=nc,
        arrival_mismatches=check.arrival,
        max_arrival_offset_diff_ns=check.worst,
        prompt_length_mismatches=check.prompt,
        output_length_mismatches=check.output,
        arrival_tolerance_ns=int(arrival_tolerance_ns),
        pairs=pairs,
    )
