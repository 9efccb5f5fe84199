"""Partials of request-split shards merge into the analysis of the whole trace: every
per-request value exactly, the whole summary exactly while the gaps fit, pooled ITL
within the histogram's bound beyond; shards that share a request are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servetrace.analysis.histogram import LogHistogram
from servetrace.analysis.memory import analyze_events
from servetrace.analysis.partial import partial_of
from servetrace.analysis.partial_io import from_record, read_partial, to_record, write_partial
from servetrace.analysis.partial_merge import combine, finish
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.summary import GoodputTarget
from servetrace.errors import InputError
from servetrace.sources.canonical import normalise, read_events
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_properties import traces
from tests.analysis.test_streaming import _assert_distribution
from tests.conftest import MS, events, make_request

SAMPLES = Path(__file__).parents[2] / "sample_traces"


def shards(frame: pl.DataFrame, n: int, seed: int = 0) -> list[pl.DataFrame]:
    """``n`` shards split by request (every row of a request in one shard), row order kept."""
    frame = normalise(frame.lazy(), "test").collect()
    part = (pl.col("request_id").cast(pl.String).hash(seed=seed) % n).alias("_s")
    tagged = frame.with_columns(part)
    out = [tagged.filter(pl.col("_s") == i).drop("_s") for i in range(n)]
    return [s for s in out if s.height]


def merged(frame: pl.DataFrame, n: int, seed: int = 0, **kwargs: Any) -> Analysis:
    parts = [partial_of(s, (f"shard{i}",)) for i, s in enumerate(shards(frame, n, seed))]
    return finish(combine(parts), **kwargs)


def whole(frame: pl.DataFrame, **kwargs: Any) -> Analysis:
    return analyze_events(frame, **kwargs)


def _requests(analysis: Analysis) -> pl.DataFrame:
    return analysis.requests


def assert_same(got: Analysis, expected: Analysis, *, exact: bool = True) -> None:
    """The report of ``got`` is that of ``expected`` (ITL within the bound if not exact)."""
    # Same rows in the same order (arrival, then id): no sort needed to compare.
    assert _requests(got).equals(_requests(expected).select(_requests(got).columns))
    a, b = dataclasses.asdict(got.summary), dataclasses.asdict(expected.summary)
    if not exact:
        _assert_distribution(a["metrics"].pop("itl"), b["metrics"].pop("itl"), exact=False)
        for summary in (a, b):
            summary["intervals"].pop("itl")
            summary["warnings"] = tuple(w for w in summary["warnings"] if "histogram" not in w)
    assert a == b
    rows = expected.quarantine.columns
    assert (
        got.quarantine.select(rows)
        .sort(rows, nulls_last=True)
        .equals(expected.quarantine.sort(rows, nulls_last=True))
    )


@pytest.mark.parametrize(
    "name", ["realistic.parquet", "worked_example.parquet", "policy_sjf.parquet"]
)
def test_four_request_split_shards_merge_into_the_whole_report(name: str) -> None:
    frame = read_events([str(SAMPLES / name)]).events.collect()
    expected = whole(frame)
    got = merged(frame, 4)
    assert_same(got, expected)
    assert got.gaps.height == expected.gaps.height  # exact: the gaps themselves are kept


def test_merging_is_associative_and_survives_the_file_format(tmp_path: Path) -> None:
    frame = read_events([str(SAMPLES / "realistic.parquet")]).events.collect()
    parts = [partial_of(s, (f"s{i}",)) for i, s in enumerate(shards(frame, 4))]
    for i, part in enumerate(parts):
        write_partial(part, tmp_path / f"p{i}")
    read = [read_partial(tmp_path / f"p{i}") for i in range(4)]
    left = combine([combine(read[:2]), combine(read[2:])])
    write_partial(left, tmp_path / "left")
    shipped = combine([from_record(to_record(p)) for p in parts])
    expected = whole(frame)
    for got in (read_partial(tmp_path / "left"), shipped, combine(read)):
        assert_same(finish(got), expected)


def test_goodput_and_tolerances_apply_at_the_merge() -> None:
    frame = read_events([str(SAMPLES / "realistic.parquet")]).events.collect()
    options = AnalysisOptions(
        goodput=(GoodputTarget("ttft", "<=", 200 * MS),), formula_abs_tol_ns=10, formula_rel_tol=0
    )
    got = merged(frame, 4, options=options)
    assert got.summary.goodput is not None
    assert_same(got, whole(frame, options=options))


def test_a_generated_trace_beyond_the_exact_budget_is_within_the_bound() -> None:
    requests = [
        make_request(
            i,
            arrival=i,
            admission=i + 1,
            first=i + 3,
            ticks=[i + 3 + k * (0.5 + (i * 7 + k) % 13 / 3) for k in range(1, 30)],
            complete=i + 200,
        )
        for i in range(300)
    ]
    frame = events(*requests)
    expected = whole(frame)
    parts = [partial_of(s, (f"s{i}",), exact_gaps=500) for i, s in enumerate(shards(frame, 4))]
    assert all(p.histogram is not None for p in parts)
    got = finish(combine(parts, exact_gaps=500))
    assert any("log histogram" in w for w in got.summary.warnings)
    assert_same(got, expected, exact=False)
    # Exact per shard, but more than the budget together: the merge bins them.
    exact_parts = [partial_of(s, (f"s{i}",)) for i, s in enumerate(shards(frame, 4))]
    assert_same(finish(combine(exact_parts, exact_gaps=1000)), expected, exact=False)


# Seeded (derandomized) and bounded: the same 40 cases on every run.
@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(frame=traces(), n=st.integers(1, 5), seed=st.integers(0, 1000))
def test_any_request_split_of_any_trace_merges_exactly(frame: pl.DataFrame, n: int, seed: int):
    expected = whole(frame)
    assert_same(merged(frame, n, seed), expected)
    # The same through the wire format, merged as a tree.
    parts = [
        from_record(to_record(partial_of(s, (f"s{i}",))))
        for i, s in enumerate(shards(frame, n, seed))
    ]
    halves = [
        combine(parts[: len(parts) // 2 or 1]),
        *([combine(parts[len(parts) // 2 or 1 :])] if len(parts) > 1 else []),
    ]
    got = finish(combine(halves))
    assert_same(got, expected)
    assert got.quarantine.equals(expected.quarantine.select(got.quarantine.columns))


# Requests whose values depend on the rest of the trace: queued or not (no admission, no
# output), requeued until the trace end (in flight after a preemption); plus every rule.
TRICKY = [
    make_request("adm", admission=1, first=2, complete=3),
    make_request("early_cancel", arrival=4, cancel=9),
    make_request("waiting", arrival=5),
    make_request("requeued", arrival=1, admission=2, first=3, preempt=[4]),
    make_request("client", arrival=2, first=3, complete=6),
    [{"request_id": "late", "event": "arrival", "ts": 50 * MS}],
]


@pytest.mark.parametrize("n", [2, 3, 6])
@pytest.mark.parametrize("seed", range(4))
def test_requests_that_depend_on_the_whole_trace_are_deferred(n: int, seed: int) -> None:
    cases = [
        [{**r, "request_id": f"{rule}:{r['request_id']}"} for r in rows]
        for rule, rows in CASES.items()
    ]
    frame = events(*TRICKY, *cases)
    assert_same(merged(frame, n, seed), whole(frame))


def test_a_shard_without_admissions_still_queues_its_early_cancellations() -> None:
    server = events(make_request("a", admission=1, first=2, complete=3))
    cancelled = events(make_request("c", arrival=1, cancel=5))
    parts = [partial_of(normalise(f.lazy(), "t").collect(), ("t",)) for f in (server, cancelled)]
    got = finish(combine(parts))
    expected = whole(pl.concat([server, cancelled], how="diagonal_relaxed"))
    assert got.summary.cancelled_in["queued"] == 1
    assert_same(got, expected)


def test_integer_ids_in_one_shard_and_text_in_another_are_text_as_one_read_gives() -> None:
    ints = events(make_request(1, admission=1, first=2, complete=3))
    text = events(make_request("x1", admission=1, first=2, complete=4))
    parts = [partial_of(normalise(f.lazy(), "t").collect(), ("t",)) for f in (ints, text)]
    got = finish(combine(parts))
    assert got.requests.schema["request_id"] == pl.String
    assert sorted(got.requests["request_id"].to_list()) == ["1", "x1"]


def test_a_request_in_two_partials_is_refused_naming_how_many() -> None:
    frame = events(*[make_request(f"r{i}", admission=1, first=2, complete=3) for i in range(6)])
    first, second = frame.head(10), frame.tail(frame.height - 10)  # a cut in time, not by id
    first, second = (normalise(f.lazy(), "t").collect() for f in (first, second))
    with pytest.raises(InputError, match=r"request ids? occurs? in more than one partial") as err:
        combine([partial_of(first, ("early",)), partial_of(second, ("late",))])
    assert "shard the trace by request_id" in (err.value.hint or "")
    assert "early and late" in err.value.message


def test_histograms_merge_exactly_bucket_by_bucket() -> None:
    values = pl.Series([0, 1, 5, 5, 17, 4096, 10**9, 123_456_789], dtype=pl.Int64)
    one = LogHistogram()
    one.add(values)
    a, b = LogHistogram(), LogHistogram()
    a.add(values.head(3))
    b.add(values.tail(5))
    both = LogHistogram.merged([a, b])
    assert both.describe() == one.describe()
    assert both.buckets.sort("b").equals(one.buckets.sort("b"))


def test_merged_partials_keep_every_request_key_unique_across_shards() -> None:
    frame = read_events([str(SAMPLES / "realistic.parquet")]).events.collect()
    parts = [partial_of(s, (f"s{i}",)) for i, s in enumerate(shards(frame, 4))]
    assert all(p.timeline["_key"].min() == 0 for p in parts)  # every shard counts from 0
    merged = combine(parts)
    keys = merged.timeline["_key"]
    assert keys.n_unique() == keys.len() == sum(p.timeline.height for p in parts)
    assert keys.sort().to_list() == list(range(keys.len()))
    # Each request keeps its own key in every table: ids agree through the key.
    joined = merged.requests.join(merged.timeline, on="_key", suffix="_tl")
    assert joined.height == merged.requests.height
    assert (joined["request_id"] == joined["request_id_tl"]).all()
    assert merged.gaps["_key"].is_in(merged.requests["_key"].implode()).all()
