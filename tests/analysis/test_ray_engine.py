"""``--engine ray`` on a local 2-CPU Ray gives the local engine's report: every
per-request value exactly, the whole summary exactly while the gaps fit, pooled ITL within
the histogram's bound beyond. One Ray session for the module (start-up is the cost)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.memory import AnalysisOptions
from servetrace.errors import InputError, UsageError
from servetrace.sources.canonical import IngestOptions
from tests.analysis.test_partial import assert_same

ray = pytest.importorskip("ray")
ray_engine = pytest.importorskip("servetrace.analysis.ray_engine")

ROOT = Path(__file__).parents[2]
SAMPLES = ROOT / "sample_traces"
runner = CliRunner()
# Ray warns about its own deprecated settings from inside its own modules.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~2e5 events of benchmarks/generate.py: queueing, preemption, cancellations, in flight."""
    path = tmp_path_factory.mktemp("gen") / "trace.parquet"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "generate.py"),
            "--events",
            "2e5",
            "-o",
            str(path),
            "--string-ids",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return path


def _ray(path: Path, **kwargs: object) -> object:
    return ray_engine.analyze_ray([str(path)], IngestOptions(), AnalysisOptions(), **kwargs)


@pytest.mark.parametrize("name", ["realistic.parquet", "policy_fcfs.parquet"])
def test_sample_traces_give_the_local_report(name: str) -> None:
    path = SAMPLES / name
    assert_same(_ray(path), analyze_paths([str(path)]))


def test_a_generated_trace_shuffled_over_many_partitions(generated: Path) -> None:
    local = analyze_paths([str(generated)])
    assert local.summary.outcomes["in_flight"] > 0 and local.summary.cancelled["count"] > 0
    # batch_rows 20k: ten partitions, so requests really are shuffled between workers
    assert_same(_ray(generated, batch_rows=20_000), local)
    binned = _ray(generated, batch_rows=20_000, exact_gaps=0)
    assert any("log histogram" in w for w in binned.summary.warnings)
    assert_same(binned, local, exact=False)


def test_requests_out_is_a_parquet_dataset(tmp_path: Path) -> None:
    trace = str(SAMPLES / "policy_sjf.parquet")
    out = tmp_path / "requests"
    done = runner.invoke(
        __import__("servetrace.cli", fromlist=["app"]).app,
        ["analyze", trace, "--engine", "ray", "--requests-out", str(out), "-f", "json"],
    )
    assert done.exit_code == 0, done.stderr
    parts = sorted(out.glob("*.parquet"))
    assert parts
    local = analyze_paths([trace]).requests_out()
    got = pl.read_parquet(parts).sort("arrival_ns", "request_id")
    assert got.equals(local)


def test_not_parquet_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not Parquet"):
        _ray(SAMPLES / "worked_example.csv")
    from servetrace.cli import app

    done = runner.invoke(app, ["analyze", str(SAMPLES / "worked_example.csv"), "--engine", "ray"])
    assert done.exit_code == 2
    assert "--engine ray reads Parquet" in done.stderr


def test_a_bad_row_on_a_worker_is_one_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pl.DataFrame(
        {"request_id": [1, 1], "event": ["arrival", "teleport"], "ts": [1, 2]}
    ).write_parquet(path)
    with pytest.raises(InputError, match="unknown event name 'teleport'") as err:
        _ray(path)
    assert "--event-map" in (err.value.hint or "")


def test_an_address_where_nothing_listens_fails_fast() -> None:
    import socket

    with socket.socket() as free:  # a port nothing listens on once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(UsageError, match="nothing answers there"):
        ray_engine._reachable(f"127.0.0.1:{port}")
    ray_engine._reachable("auto")  # Ray's own lookup: not checked here
