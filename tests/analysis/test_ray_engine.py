"""``--engine ray`` on a local 2-CPU Ray gives the local engine's report: every
per-request value exactly, the whole summary exactly while the gaps fit, pooled ITL within
the histogram's bound beyond. One Ray session for the module (start-up is the cost)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.result import AnalysisOptions
from servetrace.errors import InputError, UsageError
from servetrace.sources.canonical import IngestOptions
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_partial import assert_same
from tests.analysis.test_properties import traces
from tests.conftest import S3, events, make_request

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


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sample with a request breaking each lifecycle rule (quarantined rows)."""
    cases = [
        [{**r, "request_id": f"{rule}:{r['request_id']}"} for r in rows]
        for rule, rows in CASES.items()
    ]
    cases.append(make_request("valid", admission=1, first=2, complete=3))  # a second group
    sample = pl.read_parquet(SAMPLES / "policy_sjf.parquet")
    frame = pl.concat(
        [sample, events(*cases).with_columns(policy=pl.lit("bad"))], how="diagonal_relaxed"
    )
    path = tmp_path_factory.mktemp("broken") / "trace.parquet"
    frame.write_parquet(path)
    return path


def _cli(*args: str) -> Any:
    from servetrace.cli import app

    return runner.invoke(app, list(args))


def test_by_a_column_is_the_local_report(broken: Path) -> None:
    args = ["analyze", str(broken), "--by", "policy", "-f", "json", "--goodput", "ttft<=1s"]
    ray_run, local = _cli(*args, "--engine", "ray"), _cli(*args)
    assert ray_run.exit_code == local.exit_code == 0, ray_run.stderr
    got, expected = json.loads(ray_run.stdout), json.loads(local.stdout)
    assert len(got["by"]["groups"]) > 1 and got == expected


def test_the_raylets_warnings_stay_off_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray's driver prints a raylet's warning to stdout whatever log_to_driver says (seen
    under load: "N PYTHON worker processes have been started"); the JSON must still parse."""
    from ray._private.worker import print_to_stdstream

    counted = ray_engine._row_count

    def warned(*args: Any) -> int:
        line = "WARNING: 8 PYTHON worker processes have been started on node"
        print_to_stdstream({"lines": [line], "pid": "raylet", "is_err": False}, False)
        return counted(*args)

    monkeypatch.setattr(ray_engine, "_row_count", warned)
    result = _cli("analyze", str(SAMPLES / "realistic.parquet"), "-f", "json", "--engine", "ray")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["inputs"]
    assert "worker processes" in result.stderr


def test_quarantine_out_is_the_local_file_byte_for_byte(broken: Path, tmp_path: Path) -> None:
    files = {}
    for engine in ("local", "ray"):
        files[engine] = tmp_path / f"{engine}.parquet"
        done = _cli(
            "analyze", str(broken), "--engine", engine, "--quarantine-out", str(files[engine])
        )
        assert done.exit_code == 0, done.stderr
    local = pl.read_parquet(files["local"])
    assert local["rule"].n_unique() == len(CASES)  # rows of every broken request
    assert pl.read_parquet(files["ray"]).equals(local)
    assert files["ray"].read_bytes() == files["local"].read_bytes()


def test_over_many_partitions_quarantine_and_groups_are_the_local_ones(broken: Path) -> None:
    from servetrace.analysis.memory import summarize_by

    local = analyze_paths([str(broken)])
    got = _ray(broken, batch_rows=40_000)  # eight partitions: rows cross workers
    assert got.quarantine.equals(local.quarantine)
    assert summarize_by(got, "policy") == summarize_by(local, "policy")


# Seeded and bounded (Ray runs a few seconds per case): generated traces, every row
# shuffled over several partitions, against the local engine.
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(frame=traces())
def test_generated_traces_over_many_partitions_are_the_local_report(
    frame: pl.DataFrame, tmp_path: Path
) -> None:
    path = tmp_path / "generated.parquet"
    frame.write_parquet(path)
    local = analyze_paths([str(path)])
    got = _ray(path, batch_rows=max(2, frame.height // 3))
    assert_same(got, local)
    assert got.quarantine.equals(local.quarantine)


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
    local = analyze_paths([trace]).requests
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


# ------------------------------------------------------------------ object stores (moto)
# Ray started above, before any test set AWS_*: its workers hold none of this
# environment, so these tests also show that the driver's filesystem reaches them.
def test_an_s3_object_through_the_library_gives_the_local_report(s3: S3) -> None:
    bucket = s3.bucket()
    trace = SAMPLES / "policy_sjf.parquet"
    uri = f"s3://{bucket}/traces/trace.parquet"
    s3.put(trace, uri)
    got = __import__("servetrace").analyze(uri, engine="ray")
    assert got.inputs == (uri,)
    assert_same(got, analyze_paths([str(trace)]))


def test_an_s3_prefix_with_requests_out_to_s3_is_the_local_analysis(s3: S3, tmp_path: Path) -> None:
    """One CLI run: a prefix of parts whose requests are split across them (the shuffle
    joins them), the JSON report equal to the local file's, the per-request dataset
    written below an S3 prefix equal to the local engine's frame."""
    import json

    import pyarrow.dataset as ds

    from servetrace.cli import app

    bucket = s3.bucket()
    trace = SAMPLES / "policy_sjf.parquet"
    events = pl.read_parquet(trace)
    for index in range(3):
        part = tmp_path / f"part-{index}.parquet"
        events.filter(pl.int_range(pl.len()) % 3 == index).write_parquet(part)
        s3.put(part, f"s3://{bucket}/parts/part-{index}.parquet")
    s3.put(SAMPLES / "README.md", f"s3://{bucket}/parts/_SUCCESS")
    out = f"s3://{bucket}/requests/"
    args = ["analyze", f"s3://{bucket}/parts/", "--engine", "ray", "--requests-out", out]
    done = runner.invoke(app, [*args, "-f", "json"])
    assert done.exit_code == 0, done.stderr
    local = runner.invoke(app, ["analyze", str(trace), "-f", "json"])
    got, expected = json.loads(done.stdout), json.loads(local.stdout)
    assert got.pop("inputs") == [f"s3://{bucket}/parts/"]
    expected.pop("inputs")
    assert got == expected
    keys = [k for k in s3.keys(bucket, "requests/") if not k.endswith("/")]
    assert keys and all(k.endswith(".parquet") for k in keys)
    written = pl.from_arrow(ds.dataset(out, format="parquet").to_table())
    assert isinstance(written, pl.DataFrame)
    requests = analyze_paths([str(trace)]).requests
    assert written.sort("arrival_ns", "request_id").equals(requests)
    again = runner.invoke(app, args)  # the prefix holds the dataset now: refused, untouched
    assert again.exit_code == 2
    assert "is not empty" in again.stderr
    assert [k for k in s3.keys(bucket, "requests/") if not k.endswith("/")] == keys


def test_missing_s3_inputs_fail_on_the_driver(s3: S3) -> None:
    from servetrace.cli import app

    bucket = s3.bucket()
    for uri, reason in (
        (f"s3://{bucket}/missing.parquet", "no such object or prefix"),
        ("s3://no-such-bucket/trace.parquet", "no such bucket 'no-such-bucket'"),
    ):
        done = runner.invoke(app, ["analyze", uri, "--engine", "ray"])
        assert done.exit_code == 3
        assert done.stderr.strip().splitlines()[0] == f"error: {uri}: {reason}"
    s3.put(SAMPLES / "worked_example.csv", f"s3://{bucket}/trace.csv")
    with pytest.raises(UsageError, match="is not Parquet"):
        _ray(f"s3://{bucket}/trace.csv")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="mix local paths and URIs"):
        ray_engine.analyze_ray(
            [str(SAMPLES / "realistic.parquet"), f"s3://{bucket}/trace.csv"],
            IngestOptions(),
            AnalysisOptions(),
        )
