"""Counts, tokens, examples and times of each group's requests of one outcome over flat
arrays equal the Polars queries they replace (filter, ``group_by``, ``examples``,
``describe_groups``), on rows with every outcome, unknown counts, arrivals and times."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.figures import failed
from servetrace.analysis.grouped_figures import G, describe_groups, empty_distribution, examples
from servetrace.analysis.grouped_gaps import codes
from servetrace.analysis.grouped_outcomes import Outcomes, error_flags

OUTCOMES = ["completed", "cancelled", "in_flight", "errored"]


def _frame(seed: int, ids: str) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 3000
    frame = pl.DataFrame(
        {
            "request_id": (
                [f"q{i % 900:04d}" for i in range(n)] if ids == "strings" else np.arange(n)[::-1]
            ),
            "outcome": rng.choice(OUTCOMES, n),
            "arrival_ns": rng.integers(0, 40, n) * 10**6,  # ties on arrival
            "e2e_ns": rng.integers(0, 10**10, n),
            "output_tokens": rng.integers(0, 500, n),
            "error_code": rng.choice([200, 499, 500, 429], n),
            "g": rng.choice(["a", "b", "c", "d"], n),
        }
    )
    row = pl.int_range(pl.len())
    frame = frame.with_columns(
        pl.when(row % 17 == 0).then(None).otherwise("output_tokens").alias("output_tokens"),
        pl.when(row % 23 == 0).then(None).otherwise("arrival_ns").alias("arrival_ns"),
        pl.when(row % 29 == 0).then(None).otherwise("e2e_ns").alias("e2e_ns"),
        pl.when(row % 31 == 0).then(None).otherwise("error_code").alias("error_code"),
        pl.when(row % 37 == 0).then(None).otherwise("g").alias("g"),
    )
    # group d has no errored request, and its only in-flight requests have no tokens count
    frame = frame.filter(~((pl.col("g") == "d") & (pl.col("outcome") == "errored")))
    frame = frame.with_columns(
        pl.when((pl.col("g") == "d") & (pl.col("outcome") == "in_flight"))
        .then(None)
        .otherwise("output_tokens")
        .alias("output_tokens")
    )
    return frame.with_columns(pl.col("g").alias(G))


def _reference_ended(frame: pl.DataFrame, outcome: str, values: list) -> dict:
    of = frame.filter(pl.col("outcome") == outcome)
    rows = of.group_by(G).agg(
        pl.len().alias("count"),
        pl.when(pl.col("output_tokens").null_count() == 0)
        .then(pl.col("output_tokens").sum())
        .alias("tokens"),
        pl.col("output_tokens").null_count().alias("uncounted"),
        failed(frame.columns).sum().alias("with_error"),
    )
    found = {row[G]: row for row in rows.iter_rows(named=True)}
    empty = {"count": 0, "tokens": 0, "with_error": 0, "uncounted": 0}
    return {v: {k: found.get(v, empty)[k] for k in empty} for v in values}


@pytest.mark.parametrize("ids", ["strings", "integers"])
@pytest.mark.parametrize("outcome", [*OUTCOMES, "no_request_has_it"])
def test_each_outcome_equals_the_polars_queries(ids: str, outcome: str) -> None:
    frame = _frame(len(outcome), ids)
    values = frame[G].unique().sort(nulls_last=True).to_list()
    frame = codes(frame, G, values)
    outcomes = Outcomes.of(frame, values)
    rows = outcomes.mask(outcome)
    got = outcomes.ended(rows, error_flags(frame, failed(frame.columns)))
    want = _reference_ended(frame, outcome, values)
    assert {v: {k: got[v][k] for k in want[v]} for v in values} == want
    assert outcomes.examples(rows) == examples(frame.filter(pl.col("outcome") == outcome))
    described = outcomes.describe(rows, frame["e2e_ns"])
    reference = describe_groups(frame.filter(pl.col("outcome") == outcome), ["e2e_ns"])["e2e_ns"]
    for value in values:
        assert described[value] == reference.get(value, empty_distribution()), value


def test_hand_computed_group() -> None:
    """a: cancelled r1 (arrival 5, 3 tokens, error 500) and r2 (arrival 1, 4 tokens, 499);
    b: cancelled r3 with no output count."""
    frame = pl.DataFrame(
        {
            "request_id": ["r1", "r2", "r3"],
            "outcome": ["cancelled"] * 3,
            "arrival_ns": [5, 1, 2],
            "e2e_ns": [10, 30, 7],
            "output_tokens": [3, 4, None],
            "error_code": [500, 499, None],
            G: ["a", "a", "b"],
        }
    )
    frame = codes(frame, G, ["a", "b"])
    outcomes = Outcomes.of(frame, ["a", "b"])
    rows = outcomes.mask("cancelled")
    ended = outcomes.ended(rows, error_flags(frame, failed(frame.columns)))
    assert ended["a"] == {"count": 2, "tokens": 7, "uncounted": 0, "with_error": 1}
    assert ended["b"] == {"count": 1, "tokens": None, "uncounted": 1, "with_error": 0}
    assert outcomes.examples(rows) == {"a": ["r2", "r1"], "b": ["r3"]}
    assert outcomes.describe(rows, frame["e2e_ns"])["a"]["mean"] == 20.0
    no_codes = frame.drop("error_code")
    assert not error_flags(no_codes, failed(no_codes.columns)).any()


def test_pair_counts_equal_a_group_by() -> None:
    frame = _frame(3, "strings").with_columns(
        pl.when(pl.col("outcome") == "cancelled")
        .then(
            pl.col("request_id")
            .str.slice(-1)
            .replace_strict(list("0123456789"), ["queued", "prefill", "decode", None, "queued"] * 2)
        )
        .alias("cancelled_in")
    )
    values = frame[G].unique().sort(nulls_last=True).to_list()
    frame = codes(frame, G, values)
    outcomes = Outcomes.of(frame, values)
    for column, names in (("outcome", OUTCOMES), ("cancelled_in", ["queued", "prefill", "x"])):
        want = {(g, c): n for g, c, n in frame.group_by(G, column).len().iter_rows() if c in names}
        assert outcomes.counts(column, names) == want, column
