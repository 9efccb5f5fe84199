"""Every latency histogram the server exposes against the trace's own values, through the
one bucket check: the simulator's pair agrees exactly for each family; an injected
disagreement is found with its size and cause; a client trace has no queue wait or
prefill to check (unavailable, with the reason); a hand-made e2e histogram's percentile
error is worked out below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_buckets import NO_EVENTS
from servetrace.analysis.server_findings import Finding
from servetrace.analysis.server_histograms import BY_NAME, HISTOGRAM_CHECKS
from servetrace.analysis.server_metrics import compare
from servetrace.api import with_server_metrics
from tests.analysis.server_fixtures import S, simulated_pair
from tests.analysis.test_server_views import hand_trace

NAMES = [check.name for check in HISTOGRAM_CHECKS]
NEW = [name for name in NAMES if name != "ttft_histogram"]
MS = 1_000_000


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, pl.DataFrame]:
    return simulated_pair(tmp_path_factory.mktemp("sim"))


def _finding(analysis: Analysis, metrics: pl.DataFrame, name: str) -> Finding:
    return compare(metrics, analysis, analysis.events("test"), "m.prom").findings[name]


def _trace_values_s(analysis: Analysis, name: str) -> np.ndarray:
    """The trace's own values the check rebins, straight from its metrics."""
    check = BY_NAME[name]
    if check.metric == "itl":
        return analysis.gaps["itl_ns"].to_numpy() / 1e9  # every request completed
    requests = analysis.per_request
    if check.observed_at == "completion":
        requests = requests.filter(pl.col("outcome") == "completed")
    return requests[f"{check.metric}_ns"].drop_nulls().to_numpy() / 1e9


@pytest.mark.parametrize("name", NAMES)
def test_each_histogram_agrees_exactly_with_the_trace(
    pair: tuple[Analysis, pl.DataFrame], name: str
) -> None:
    analysis, metrics = pair
    f = _finding(analysis, metrics, name)
    assert f.unavailable is None and f.family == BY_NAME[name].families[0]
    assert f.max_abs == 0 and f.cause is None and f.compared > 10
    observed = _trace_values_s(analysis, name).size
    assert f.server_total == f.trace_total == observed
    assert observed == (analysis.gaps.height if name == "itl_histogram" else 150)
    assert f.extra["definition"] == BY_NAME[name].definition


@pytest.mark.parametrize("name", NAMES)
def test_the_percentile_error_is_what_the_bucket_allows(
    pair: tuple[Analysis, pl.DataFrame], name: str
) -> None:
    analysis, metrics = pair
    f = _finding(analysis, metrics, name)
    values = _trace_values_s(analysis, name)
    for q, v in f.extra["quantiles"].items():
        assert v["trace_ns"] == round(np.quantile(values, int(q[1:]) / 100) * 1e9)
        lo, hi = v["bucket_ns"]
        assert hi is not None  # the simulator's values all fall below the highest bound
        assert lo <= v["histogram_ns"] <= hi and lo <= v["trace_ns"] <= hi
        assert v["error_ns"] == v["histogram_ns"] - v["trace_ns"]
        assert abs(v["error_ns"]) <= hi - lo


def _shifted(metrics: pl.DataFrame, family: str, change: pl.Expr, at: int) -> pl.DataFrame:
    """``metrics`` with ``change`` added to the rows it selects of ``family``'s buckets
    and count at every scrape from ``at`` on."""
    rows = pl.col("family").is_in([family, f"{family}_count"]) & (pl.col("ts") >= at)
    return metrics.with_columns(
        pl.when(rows & change).then(pl.col("value") + 1).otherwise(pl.col("value")).alias("value")
    )


@pytest.mark.parametrize("name", NEW)
def test_an_observation_the_trace_does_not_have_is_found(
    pair: tuple[Analysis, pl.DataFrame], name: str
) -> None:
    analysis, metrics = pair
    family = BY_NAME[name].families[0]
    # One observation more in (6 s, 7 s], above every bound: +Inf and the count only.
    extra = _shifted(metrics, family, pl.col("le").is_null() | pl.col("le").is_infinite(), 7 * S)
    f = _finding(analysis, extra, name)
    assert f.max_abs == 1 and f.worst_at_ns == 7 * S and f.extra["worst_le_s"] == np.inf
    assert f.server_total == (f.trace_total or 0) + 1
    assert f.cause == f"the server counts {BY_NAME[name].counts} the trace does not have"


@pytest.mark.parametrize("name", NEW)
def test_a_value_in_another_bucket_names_the_definition(
    pair: tuple[Analysis, pl.DataFrame], name: str
) -> None:
    analysis, metrics = pair
    family = BY_NAME[name].families[0]
    # The first observation's bucket and interval, and one observation moved from that
    # bucket to the next one up: the totals stay equal, one bucket's count differs.
    rows = metrics.filter(pl.col("family") == family).sort("le", "ts")
    rows = rows.with_columns(pl.col("value").diff().over("le").alias("d")).filter(pl.col("d") > 0)
    first = rows.sort("ts", "le").row(0, named=True)
    le, at = first["le"], first["ts"]
    moved = metrics.with_columns(
        pl.when((pl.col("family") == family) & (pl.col("le") == le) & (pl.col("ts") >= at))
        .then(pl.col("value") - 1)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    f = _finding(analysis, moved, name)
    assert f.max_abs == 1 and f.worst_at_ns == at and f.extra["worst_le_s"] == le
    assert f.server_total == f.trace_total
    assert f.cause == BY_NAME[name].definition


def test_the_older_itl_name_is_checked_when_the_newer_is_absent(
    pair: tuple[Analysis, pl.DataFrame],
) -> None:
    analysis, metrics = pair
    new, old = BY_NAME["itl_histogram"].families
    renamed = metrics.with_columns(pl.col("family").str.replace(new, old, literal=True))
    f = _finding(analysis, renamed, "itl_histogram")
    assert f.family == old and f.max_abs == 0 and f.compared > 10
    # vLLM 0.11 exposes both with the same observations: the current name is the one read.
    both = pl.concat([metrics, renamed.filter(pl.col("family").str.starts_with(old))])
    assert _finding(analysis, both, "itl_histogram").family == new


def test_a_client_trace_has_no_queue_wait_or_prefill_to_check(
    pair: tuple[Analysis, pl.DataFrame], tmp_path: Path
) -> None:
    analysis, metrics = pair
    client = tmp_path / "client.parquet"
    events = analysis.events("test").collect()
    # What a client records: no admissions, no preemptions, its rows marked as its own.
    seen_by_client = events.filter(~pl.col("event").is_in(["admission", "preemption"]))
    seen_by_client.with_columns(pl.lit("client").alias("source")).write_parquet(client)
    seen = servetrace.analyze(client)
    found = compare(metrics, seen, seen.events("test"), "m.prom").findings
    for name, words in (("queue_histogram", "queue wait"), ("prefill_histogram", "prefill")):
        f = found[name]
        assert f.max_abs is None and f.compared == 0  # never a zero
        assert f.unavailable == f"the trace has no {words} (client trace)"
    # What a client does see agrees as before: the same first tokens, ends and gaps.
    for name in ("ttft_histogram", "e2e_histogram", "decode_histogram", "itl_histogram"):
        assert found[name].max_abs == 0, name


def test_without_events_there_are_no_gaps(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    found = compare(metrics, analysis, None, "m.prom").findings
    assert found["itl_histogram"].unavailable == NO_EVENTS
    assert found["e2e_histogram"].max_abs == 0


def test_a_family_the_server_does_not_expose_is_unavailable(
    pair: tuple[Analysis, pl.DataFrame],
) -> None:
    analysis, metrics = pair
    family = BY_NAME["decode_histogram"].families[0]
    gone = metrics.filter(~pl.col("family").str.starts_with(family))
    f = _finding(analysis, gone, "decode_histogram")
    assert f.unavailable == f"no {family} histogram"


# The hand trace (test_server_views): r1 arrives at 0 and completes at 1.8 s (e2e 1.8 s),
# r2 arrives at 0.6 s and completes at 2.7 s (e2e 2.1 s). Bounds 1 s, 2 s, +Inf:
#   cumulative at 0, 1, 2, 3 s:  le=1: 0 0 0 0   le=2: 0 0 1 1   +Inf: 0 0 1 2
# p50: rank 1 of 2 falls in (1, 2] holding 1: 1 + 1·(1/1) = 2 s; exact 1.95 s: +50 ms.
# p90: rank 1.8 falls in +Inf: the highest finite bound, 2 s; exact 2.07 s: −70 ms.
E2E = "vllm:e2e_request_latency_seconds"
HAND_E2E = f"# TYPE {E2E} histogram\n" + "".join(
    f'{E2E}_bucket{{engine="0",le="1.0"}} 0 {t}\n'
    f'{E2E}_bucket{{engine="0",le="2.0"}} {b2} {t}\n'
    f'{E2E}_bucket{{engine="0",le="+Inf"}} {n} {t}\n'
    f'{E2E}_count{{engine="0"}} {n} {t}\n'
    f'{E2E}_sum{{engine="0"}} {total} {t}\n'
    for t, b2, n, total in ((0, 0, 0, 0), (1000, 0, 0, 0), (2000, 1, 1, 1.8), (3000, 1, 2, 3.9))
)


def test_the_e2e_percentile_error_by_hand(tmp_path: Path) -> None:
    trace, prom = tmp_path / "t.parquet", tmp_path / "m.prom"
    hand_trace().write_parquet(trace)
    prom.write_text(HAND_E2E)
    found = with_server_metrics(servetrace.analyze(trace), prom, None, 0).server_metrics
    assert found is not None
    f = found.findings["e2e_histogram"]
    assert (f.compared, f.max_abs, f.server_total, f.trace_total) == (3, 0, 2, 2)
    p = f.extra["quantiles"]
    assert p["p50"] == {
        "trace_ns": 1950 * MS,
        "histogram_ns": 2000 * MS,
        "error_ns": 50 * MS,
        "bucket_ns": [1000 * MS, 2000 * MS],
    }
    assert p["p90"]["trace_ns"] == 2070 * MS and p["p90"]["histogram_ns"] == 2000 * MS
    assert p["p90"]["error_ns"] == -70 * MS and p["p90"]["bucket_ns"] == [2000 * MS, None]
    # The hand series has no queue, prefill, decode or ITL histogram: said, never zero.
    for name in ("queue_histogram", "prefill_histogram", "decode_histogram", "itl_histogram"):
        assert (found.findings[name].unavailable or "").startswith("no vllm:"), name


def test_server_first_tokens_the_trace_never_saw_are_a_finding(tmp_path: Path) -> None:
    """A trace without a single token has TTFT as a count of zero, not as an unknown: the
    server's first tokens are then all disagreement, and a gate must see its size. Some
    requests are cancelled, so requests without a token stay valid and are analysed."""
    analysis, metrics = simulated_pair(tmp_path, cancel_fraction=0.2)
    events = analysis.events("test").collect()
    no_tokens = events.filter(~pl.col("event").is_in(["first_token", "token"]))
    trace = tmp_path / "no_tokens.parquet"
    no_tokens.write_parquet(trace)
    silent = servetrace.analyze(trace)
    f = _finding(silent, metrics, "ttft_histogram")
    assert f.unavailable is None
    assert silent.per_request.height > 0 and silent.per_request["ttft_ns"].null_count() == (
        silent.per_request.height
    )
    assert f.trace_total == 0 and f.server_total and f.server_total > 100
    assert f.max_abs is not None and f.max_abs > 0
    assert f.cause is not None and "does not have" in f.cause
