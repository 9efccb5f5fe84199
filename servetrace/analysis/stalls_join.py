"""The join of inter-token gaps to the engine steps that cover them (docs/design.md §10).

A gap of one request runs from its previous output tick ``a`` to its tick ``b``; it is
*covered* by the steps of the request's replica whose end lies in ``(a, b]``. Steps are
sorted by end per replica and summed cumulatively, so the covering steps' count and
composition are two as-of look-ups per gap (the first step ending after ``a``, the last
ending at or before ``b``) and a difference of cumulative sums: no loop over gaps.
Membership (``request_ids``) is summed the same way per request, which says how many of
the covering steps ran the request at all.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

# Step columns summed over a gap's covering steps: name in the gap frame → step expression.
SUMMED: dict[str, pl.Expr] = {
    "steps": pl.col("ts_end").is_not_null().cast(pl.Int64),
    "step_ns": pl.col("ts_end") - pl.col("ts_start"),
    "prefill_requests": pl.col("prefill_requests"),
    "prefill_tokens": pl.col("prefill_tokens"),
    "decode_requests": pl.col("decode_requests"),
    "decode_tokens": pl.col("decode_tokens"),
    "steps_with_prefill": (pl.col("prefill_tokens") > 0).cast(pl.Int64),
    "overlapping_steps": pl.col("overlaps").cast(pl.Int64),
}
# Of the last covering step (the one that emitted the tick): its batch and cost.
LAST = ("last_step", "last_decode_requests", "last_kv_tokens", "last_ns")
UNJOINED_REASONS = {
    "replica_without_steps": "the request's replica has no steps",
    "outside_steps": "the gap lies before the first or after the last step of its replica",
    "zero_length": "two ticks at one instant (no step can end between them)",
    "no_step_ends_in_gap": "no step of its replica ends between its two ticks",
}


def prepare_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps sorted by replica and end, flagged where they overlap the step before, with
    the cumulative sums of `SUMMED` (``cum_*``, through the step) and null counts."""
    frame = steps.with_columns(pl.col("replica").fill_null("")).sort(
        "replica", "ts_end", "ts_start", maintain_order=True
    )
    frame = frame.with_columns(
        overlaps=(pl.col("ts_start") < pl.col("ts_end").shift(1).over("replica")).fill_null(False)
    )
    cums = []
    for name, expr in SUMMED.items():
        cums.append(expr.fill_null(0).cum_sum().over("replica").alias(f"cum_{name}"))
        cums.append(expr.is_null().cast(pl.Int64).cum_sum().over("replica").alias(f"nul_{name}"))
    return frame.with_columns(cums)


def _through(prepared: pl.DataFrame) -> pl.DataFrame:
    """Per (replica, end): the cumulative sums through the last step ending then."""
    cum = [c for c in prepared.columns if c.startswith(("cum_", "nul_"))]
    return (
        prepared.group_by("replica", "ts_end", maintain_order=True)
        .last()
        .select(
            "replica",
            "ts_end",
            *cum,
            pl.col("step").alias("last_step"),
            pl.col("decode_requests").alias("last_decode_requests"),
            pl.col("kv_tokens").alias("last_kv_tokens"),
            (pl.col("ts_end") - pl.col("ts_start")).alias("last_ns"),
            *(
                [pl.col("baseline_ns").alias("last_baseline_ns")]
                if "baseline_ns" in prepared.columns
                else []
            ),
        )
    )


def _before(prepared: pl.DataFrame) -> pl.DataFrame:
    """Per (replica, end): the first step ending then, its start, and the sums before it."""
    summed = list(SUMMED)
    first = prepared.group_by("replica", "ts_end", maintain_order=True).first()
    return first.select(
        "replica",
        pl.col("ts_end").alias("first_end"),
        pl.col("ts_start").alias("first_start"),
        pl.col("step").alias("first_step"),
        *[(pl.col(f"cum_{n}") - SUMMED[n].fill_null(0)).alias(f"cum_{n}") for n in summed],
        *[
            (pl.col(f"nul_{n}") - SUMMED[n].is_null().cast(pl.Int64)).alias(f"nul_{n}")
            for n in summed
        ],
    )


def _in_order(
    frame: pl.DataFrame, by: str, work: Callable[[pl.DataFrame], pl.DataFrame]
) -> pl.DataFrame:
    """``work`` on ``frame`` sorted by ``by`` (an as-of join needs it), its rows given back
    in the order of ``frame``: a gather by the inverse permutation, no join."""
    order = frame[by].arg_sort()
    done = work(frame[order])
    return done[order.arg_sort()]


def _membership(gaps: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``member_steps`` and ``member_ns`` per gap: covering steps that ran the request
    (null where membership is not known for every step)."""
    ids = steps["request_ids"]
    if ids.null_count() == steps.height or not isinstance(ids.dtype, pl.List):
        return gaps.with_columns(
            member_steps=pl.lit(None, pl.Int64), member_ns=pl.lit(None, pl.Int64)
        )
    known_everywhere = ids.null_count() == 0
    # Requests as integer codes (one per request and replica): the as-of look-ups group
    # by one integer, not by two strings.
    codes = (
        gaps.select("request_id", "replica")
        .unique(maintain_order=True)
        .with_columns(_rk=pl.int_range(pl.len(), dtype=pl.Int64))
    )
    members = (
        steps.select(
            pl.col("replica").fill_null(""),
            "ts_end",
            (pl.col("ts_end") - pl.col("ts_start")).alias("ns"),
            pl.col("request_ids").alias("request_id"),
        )
        .explode("request_id")
        .join(codes, on=["request_id", "replica"], how="inner")
        .select("_rk", "ts_end", "ns")
        .sort("_rk", "ts_end")
        .with_columns(
            m_n=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("_rk"),
            m_ns=pl.col("ns").cum_sum().over("_rk"),
        )
        .drop("ns")
        .sort("ts_end")
    )
    keyed = gaps.select("request_id", "replica", "gap_start_ns", "gap_end_ns").join(
        codes, on=["request_id", "replica"], how="left", maintain_order="left"
    )

    def look(on: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def work(part: pl.DataFrame) -> pl.DataFrame:
            found = part.select("_rk", on).join_asof(
                members, left_on=on, right_on="ts_end", by="_rk", check_sortedness=False
            )
            return found.select(pl.col("m_n").fill_null(0), pl.col("m_ns").fill_null(0))

        return work

    hi = _in_order(keyed, "gap_end_ns", look("gap_end_ns"))
    lo = _in_order(keyed, "gap_start_ns", look("gap_start_ns"))
    unknown = not known_everywhere
    return gaps.with_columns(
        member_steps=None if unknown else hi["m_n"] - lo["m_n"],
        member_ns=None if unknown else hi["m_ns"] - lo["m_ns"],
    ).with_columns(pl.col("member_steps", "member_ns").cast(pl.Int64))


def join_gaps(gaps: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Every gap with its covering steps' count and summed composition.

    ``gaps``: ``request_id`` (String), ``replica`` (String, "" for one replica),
    ``gap_start_ns``, ``gap_end_ns``, ``tokens`` (carried by the tick at the gap's end).
    ``steps``: canonical steps (``baseline_ns`` too, if the baseline is fitted). Adds
    the `SUMMED` sums (null where a covering step does not tell), ``covered_ns`` (time of
    the gap inside its covering steps), ``between_ns`` (inside none), `LAST`,
    ``first_step``, ``member_steps``/``member_ns`` and ``unjoined`` (a reason, or null).
    Rows keep the order of ``gaps``.
    """
    prepared = prepare_steps(steps)
    through = _through(prepared).sort("ts_end")
    before = _before(prepared).sort("first_end")

    def through_b(part: pl.DataFrame) -> pl.DataFrame:
        found = part.select("replica", "gap_end_ns").join_asof(
            through, left_on="gap_end_ns", right_on="ts_end", by="replica", check_sortedness=False
        )
        return found.drop("replica", "gap_end_ns", "ts_end")

    def after_a(part: pl.DataFrame) -> pl.DataFrame:
        found = part.select("replica", "gap_start_ns").join_asof(
            before,
            left_on="gap_start_ns",
            right_on="first_end",
            by="replica",
            strategy="forward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        found = found.drop("replica", "gap_start_ns", "first_end")
        return found.rename({c: f"{c}_lo" for c in found.columns if c.startswith(("cum_", "nul_"))})

    joined = pl.concat(
        [gaps, _in_order(gaps, "gap_end_ns", through_b), _in_order(gaps, "gap_start_ns", after_a)],
        how="horizontal",
    )
    sums = []
    for name in SUMMED:
        # No step through b: nothing before it either (0); no step after a: all before.
        upto_b = pl.col(f"cum_{name}").fill_null(0)
        before_a = pl.col(f"cum_{name}_lo").fill_null(upto_b)
        nulls = pl.col(f"nul_{name}").fill_null(0) - pl.col(f"nul_{name}_lo").fill_null(
            pl.col(f"nul_{name}").fill_null(0)
        )
        sums.append(pl.when(nulls > 0).then(None).otherwise(upto_b - before_a).alias(name))
    joined = joined.with_columns(sums)
    straddle = (pl.col("gap_start_ns") - pl.col("first_start")).clip(lower_bound=0)
    covered = (pl.col("step_ns") - pl.when(pl.col("steps") > 0).then(straddle).otherwise(0)).clip(
        upper_bound=pl.col("gap_end_ns") - pl.col("gap_start_ns")
    )
    span = prepared.group_by("replica").agg(
        pl.col("ts_start").min().alias("_span_start"), pl.col("ts_end").max().alias("_span_end")
    )
    joined = joined.join(span, on="replica", how="left").with_columns(covered_ns=covered)
    reason = (
        pl.when(pl.col("steps") > 0)
        .then(None)
        .when(pl.col("_span_end").is_null())
        .then(pl.lit("replica_without_steps"))
        .when(
            (pl.col("gap_end_ns") < pl.col("_span_start"))
            | (pl.col("gap_start_ns") >= pl.col("_span_end"))
        )
        .then(pl.lit("outside_steps"))
        .when(pl.col("gap_end_ns") == pl.col("gap_start_ns"))
        .then(pl.lit("zero_length"))
        .otherwise(pl.lit("no_step_ends_in_gap"))
    )
    inside = pl.col("steps") > 0
    joined = joined.with_columns(
        *[pl.when(inside).then(pl.col(c)).alias(c) for c in ("first_step", *LAST)],
        *(
            [pl.when(inside).then(pl.col("last_baseline_ns")).alias("last_baseline_ns")]
            if "last_baseline_ns" in joined.columns
            else []
        ),
        unjoined=reason,
        between_ns=pl.col("gap_end_ns") - pl.col("gap_start_ns") - pl.col("covered_ns"),
    )
    joined = _membership(joined, steps)
    keep = list(gaps.columns)
    extra = [
        *SUMMED,
        "covered_ns",
        "between_ns",
        "first_step",
        *LAST,
        *(["last_baseline_ns"] if "last_baseline_ns" in joined.columns else []),
        "member_steps",
        "member_ns",
        "unjoined",
    ]
    return joined.select(*keep, *extra)
