"""Each group's span and throughput window over flat arrays equal the Polars statements
they replace (``grouped_figures.spans`` of the joined timeline rows, ``window_aggregates``
in a ``group_by``), on a real analysis in many groups and on rows with every null."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

import servetrace
from servetrace.analysis.figures import window_aggregates
from servetrace.analysis.grouped_figures import EVENT_TIMES, G, rows_by_group, spans
from servetrace.analysis.grouped_gaps import codes
from servetrace.analysis.grouped_spans import spans_of, windows_of
from servetrace.analysis.lifecycle import KEY

VIDUR = Path(__file__).parent.parent / "data" / "vidur"


def _both(timeline_rows: pl.DataFrame, requests: pl.DataFrame) -> None:
    values = requests[G].unique().sort(nulls_last=True).to_list()
    requests = codes(requests, G, values)
    joined = timeline_rows.drop(G, strict=False).join(requests.select(KEY, G), on=KEY, how="inner")
    got, want = spans_of(timeline_rows, requests, values), spans(joined)
    assert list(got) == values and got.keys() == want.keys()
    for value in values:
        assert list(got[value].items()) == list(want[value].items()), value  # key order too
    got = windows_of(requests, values)
    want = rows_by_group(requests.group_by(G).agg(window_aggregates()))
    assert got.keys() == want.keys()
    for value in values:
        assert list(got[value].items()) == list(want[value].items()), value


def test_a_real_trace_in_many_groups() -> None:
    analysis = servetrace.analyze(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet")
    requests = analysis.per_request.with_columns((pl.col("request_id") % 37).alias(G))
    _both(analysis.timeline.requests, requests)


def test_edge_rows_equal_the_reference() -> None:
    """Unknown arrivals, end times, token counts and release counts, a group with no
    completed request, timeline rows of requests in no group (invalid ones), sparse and
    negative keys, and a null group."""
    rng = np.random.default_rng(5)
    n = 500
    keys = rng.choice(np.arange(-(10**6), 10**6), n + 40, replace=False)
    times = {
        c: pl.Series(c, rng.integers(0, 10**9, n + 40)).scatter(
            rng.choice(n + 40, 90, replace=False), None
        )
        for c in EVENT_TIMES
    }
    timeline_rows = pl.DataFrame(
        {
            KEY: keys,
            **times,
            "n_release": pl.Series(rng.integers(0, 2, n + 40)).scatter(np.arange(0, 500, 7), None),
            "rows": pl.Series(rng.integers(1, 50, n + 40)).scatter([3, 9], None),
        }
    )
    outcome = rng.choice(["completed", "cancelled", "in_flight", "errored"], n).tolist()
    group = rng.choice(["a", "b", "c", "only-cancelled"], n).tolist()
    pairs = zip(outcome, group, strict=True)
    outcome = [o if g != "only-cancelled" else "cancelled" for o, g in pairs]
    group[:9] = [None] * 9
    requests = pl.DataFrame(
        {
            KEY: keys[:n],  # the last 40 timeline rows belong to no request: no group
            "outcome": outcome,
            "arrival_ns": timeline_rows["arrival_ns"][:n],
            "e2e_ns": pl.Series(rng.integers(0, 10**9, n)).scatter(np.arange(0, n, 11), None),
            "output_tokens": pl.Series(rng.integers(0, 900, n)).scatter(np.arange(1, n, 13), None),
            "prompt_tokens": pl.Series(rng.integers(0, 900, n)).scatter(np.arange(2, n, 17), None),
            G: group,
        }
    )
    _both(timeline_rows, requests)
    # every arrival unknown in one group: no start, no end, as the reference says
    unknown = pl.when(pl.col(G) == "a").then(None).otherwise(pl.col("arrival_ns"))
    _both(
        timeline_rows.with_columns(
            pl.when(pl.col(KEY).is_in(requests.filter(pl.col(G) == "a")[KEY].implode()))
            .then(None)
            .otherwise(pl.col(c))
            .alias(c)
            for c in EVENT_TIMES
        ),
        requests.with_columns(unknown.alias("arrival_ns")),
    )


def test_no_request_in_any_group() -> None:
    """Every request invalid (as in a trace whose ids repeat): no group, no span, no
    window — and a --by analysis of it has no groups."""
    analysis = servetrace.analyze(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet")
    requests = analysis.per_request.with_columns(pl.lit(1).alias(G)).clear()
    _both(analysis.timeline.requests, requests)
    assert spans_of(analysis.timeline.requests, codes(requests, G, []), []) == {}
