"""Object-store URIs with the local engine, on a local S3 (moto) found through the standard
``AWS_ENDPOINT_URL``: the report of ``s3://…`` is the report of the same bytes on disk
(every key but ``inputs``), for one object, a prefix of parts and a glob, in memory and
streamed; ``--requests-out`` uploads the local file's bytes; every failure is one line
naming the URI, with exit 3 (input) or 2 (usage)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.errors import InputError
from tests.conftest import S3

ROOT = Path(__file__).parents[2]
TRACE = ROOT / "sample_traces" / "realistic.parquet"
runner = CliRunner()


def _report(args: list[str]) -> dict[str, Any]:
    done = runner.invoke(app, ["analyze", *args, "-f", "json"])
    assert done.exit_code == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    report.pop("inputs")
    return report


def _fails(args: list[str], code: int) -> str:
    done = runner.invoke(app, args)
    assert done.exit_code == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith("error: ")
    return first


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample trace as three parts split by request (a request's rows in one part,
    a hive folder ``day=…``), with the markers a writer leaves that are not parts."""
    root = tmp_path_factory.mktemp("parts") / "parts"
    events = pl.read_parquet(TRACE)
    bucket = pl.col("request_id").cast(pl.String).hash(seed=1) % 3
    for index in range(3):
        folder = root / f"day={index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        events.filter(bucket == index).write_parquet(folder / f"part-{index}.parquet")
    (root / "_SUCCESS").write_text("")
    (root / "day=0" / ".part-0.parquet.crc").write_text("not a part")
    return root


def _upload_tree(s3: S3, local: Path, uri: str) -> None:
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        s3.put(file, f"{uri.rstrip('/')}/{file.relative_to(local).as_posix()}")


def test_one_object_gives_the_local_report(s3: S3) -> None:
    bucket = s3.bucket()
    s3.put(TRACE, f"s3://{bucket}/traces/trace.parquet")
    uri = f"s3://{bucket}/traces/trace.parquet"
    assert _report([uri]) == _report([str(TRACE)])
    analysis = servetrace.analyze(uri)
    assert isinstance(analysis, servetrace.Analysis)
    assert analysis.inputs == (uri,)
    local = servetrace.analyze(TRACE)
    assert isinstance(local, servetrace.Analysis)
    assert analysis.requests.equals(local.requests)
    assert servetrace.read_events(uri).equals(servetrace.read_events(TRACE))


def test_a_prefix_of_parts_and_a_glob_give_the_local_directory_report(s3: S3, parts: Path) -> None:
    bucket = s3.bucket()
    _upload_tree(s3, parts, f"s3://{bucket}/fleet/")
    local = _report([str(parts)])
    assert local["accounting"]["rows"] == pl.read_parquet(TRACE).height
    assert "day" in json.dumps(_report([str(parts), "--by", "day"]))  # hive values read
    for uri in (f"s3://{bucket}/fleet/", f"s3://{bucket}/fleet"):
        assert _report([uri]) == local
    assert _report([f"s3://{bucket}/fleet/*/part-*.parquet"]) == _report(
        [str(parts / "*" / "part-*.parquet")]
    )
    assert _report([f"s3://{bucket}/fleet/", "--by", "day"]) == _report([str(parts), "--by", "day"])


def test_streamed_from_the_store_equals_streamed_from_disk(s3: S3, parts: Path) -> None:
    bucket = s3.bucket()
    _upload_tree(s3, parts, f"s3://{bucket}/fleet/")
    args = ["--streaming", "--batch-rows", "100000"]
    assert _report([f"s3://{bucket}/fleet/", *args]) == _report([str(parts), *args])


def test_the_endpoint_may_be_named_in_the_uri_instead(
    s3: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.bucket()
    s3.put(TRACE, f"s3://{bucket}/trace.parquet")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    host = s3.endpoint.removeprefix("http://")
    uri = f"s3://{bucket}/?endpoint_override={host}&scheme=http"
    assert _report([uri]) == _report([str(TRACE)])


def test_requests_out_uploads_the_local_file(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    s3.put(TRACE, f"s3://{bucket}/trace.parquet")
    local = tmp_path / "requests.parquet"
    assert _report([str(TRACE), "--requests-out", str(local)])
    for name in ("requests.parquet", "requests.csv"):
        out = f"s3://{bucket}/out/{name}"
        assert _report([f"s3://{bucket}/trace.parquet", "--requests-out", out])
        back = tmp_path / f"back-{name}"
        s3.get(out, back)
        if name.endswith(".parquet"):
            assert pl.read_parquet(back).equals(pl.read_parquet(local))
        else:
            runner.invoke(app, ["analyze", str(TRACE), "--requests-out", str(tmp_path / name)])
            assert back.read_bytes() == (tmp_path / name).read_bytes()


def test_bad_requests_out_uris_are_refused_before_reading(s3: S3) -> None:
    bucket = s3.bucket()
    s3.put(TRACE, f"s3://{bucket}/trace.parquet")
    trace = f"s3://{bucket}/trace.parquet"
    line = _fails(["analyze", trace, "--requests-out", f"s3://{bucket}/out/requests"], 2)
    assert "cannot tell the output format" in line
    line = _fails(["analyze", trace, "--requests-out", "s3://no-bucket/requests.parquet"], 2)
    assert "no such bucket 'no-bucket'" in line
    assert "would overwrite the input" in _fails(["analyze", trace, "--requests-out", trace], 2)
    s3.put(TRACE, f"s3://{bucket}/taken.parquet/part-0.parquet")
    line = _fails(["analyze", trace, "--requests-out", f"s3://{bucket}/taken.parquet"], 2)
    assert line.endswith("is a prefix of objects, not an object")
    assert s3.keys(bucket) == ["taken.parquet/part-0.parquet", "trace.parquet"]


def test_a_missing_object_or_bucket_is_one_input_error(s3: S3) -> None:
    bucket = s3.bucket()
    line = _fails(["analyze", f"s3://{bucket}/missing.parquet"], 3)
    assert line == f"error: s3://{bucket}/missing.parquet: no such object or prefix"
    line = _fails(["analyze", "s3://no-such-bucket/trace.parquet"], 3)
    assert line == "error: s3://no-such-bucket/trace.parquet: no such bucket 'no-such-bucket'"
    assert "no such bucket" in _fails(["analyze", "s3://no-such-bucket"], 3)
    line = _fails(["analyze", f"s3://{bucket}/logs/*.parquet"], 3)
    assert f"s3://{bucket}/logs/*.parquet" in line
    s3.put(TRACE, f"s3://{bucket}/other/trace.parquet")
    assert "matches no trace object" in _fails(["analyze", f"s3://{bucket}/other/*.csv"], 3)
    with pytest.raises(InputError, match="no such object"):
        servetrace.analyze(f"s3://{bucket}/missing.parquet")


def test_an_unreachable_endpoint_fails_in_a_moment(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as free:  # a loopback port nothing listens on once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    started = time.monotonic()
    line = _fails(["analyze", "s3://bucket/trace.parquet"], 3)
    assert time.monotonic() - started < 5
    expected = "error: s3://bucket/trace.parquet: cannot read: cannot reach the endpoint"
    assert line.startswith(expected)


def test_what_the_store_cannot_be_asked_is_a_clear_error(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    text = tmp_path / "trace.csv"
    text.write_text("request_id,event,ts\n1,arrival,0\n")
    s3.put(text, f"s3://{bucket}/trace.csv")
    line = _fails(["analyze", f"s3://{bucket}/trace.csv"], 2)
    assert "read as Parquet or Arrow IPC" in line
    assert "pyarrow cannot open" in _fails(["analyze", "nosuchscheme://bucket/t.parquet"], 3)
    line = _fails(["analyze", f"s3://{bucket}/t.json", "--from", "aiperf"], 2)
    assert "--from aiperf imports files on this machine" in line
    s3.put(TRACE, f"s3://{bucket}/trace.parquet")
    trace = f"s3://{bucket}/trace.parquet"
    line = _fails(["analyze", trace, "--partial-out", f"s3://{bucket}/partial"], 2)
    assert line.startswith(f"error: --partial-out s3://{bucket}/partial: partials are")
    assert "merge reads partials on this machine" in _fails(["merge", f"s3://{bucket}/p"], 2)


def test_a_local_path_beside_a_uri_is_one_trace(s3: S3, parts: Path) -> None:
    bucket = s3.bucket()
    _upload_tree(s3, parts / "day=1", f"s3://{bucket}/day=1/")
    assert _report([str(parts / "day=0"), f"s3://{bucket}/day=1/"]) == _report(
        [str(parts / "day=0"), str(parts / "day=1")]
    )


def test_quarantine_out_uploads_the_quarantined_rows(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    bad = pl.DataFrame(  # a request that completes before it arrives: quarantined
        {"request_id": ["bad", "bad"], "event": ["arrival", "completion"], "ts": [10, 5]}
    )
    trace = tmp_path / "trace.parquet"
    events = pl.read_parquet(TRACE)
    bad = bad.cast(events.select(bad.columns).schema)
    pl.concat([events, bad], how="diagonal").write_parquet(trace)
    s3.put(trace, f"s3://{bucket}/trace.parquet")
    local = tmp_path / "quarantine.parquet"
    _report([str(trace), "--quarantine-out", str(local)])
    out = f"s3://{bucket}/quarantine.parquet"
    _report([f"s3://{bucket}/trace.parquet", "--quarantine-out", out])
    s3.get(out, tmp_path / "back.parquet")
    back = pl.read_parquet(tmp_path / "back.parquet")
    assert back.height > 0 and back.equals(pl.read_parquet(local))
    line = _fails(
        ["analyze", f"s3://{bucket}/trace.parquet", "--quarantine-out", out, "--requests-out", out],
        2,
    )
    assert "name the same object" in line
    line = _fails(["analyze", str(trace), "--engine", "ray", "--requests-out", out], 2)
    assert "is a prefix for a Parquet dataset (no suffix)" in line


def test_compare_and_check_read_uris_as_they_read_files(s3: S3) -> None:
    bucket = s3.bucket()
    samples = ROOT / "sample_traces"
    for name in ("policy_fcfs", "policy_sjf"):
        s3.put(samples / f"{name}.parquet", f"s3://{bucket}/{name}.parquet")

    def run(*args: str) -> tuple[int, list[str]]:
        done = runner.invoke(app, list(args))
        assert done.exit_code in (0, 1), done.stderr
        # Everything but the line naming the inputs (its width wraps the next one alike).
        return done.exit_code, [line for line in done.stdout.splitlines() if "policy_" not in line]

    remote = [f"s3://{bucket}/policy_fcfs.parquet", f"s3://{bucket}/policy_sjf.parquet"]
    local = [str(samples / "policy_fcfs.parquet"), str(samples / "policy_sjf.parquet")]
    compared = run("compare", *remote, "--seed", "1")
    assert any(line.startswith("queue_wait  mean") for line in compared[1])
    assert compared == run("compare", *local, "--seed", "1")
    rule = ["--slo", "ttft.p99<=1s"]
    checked = run("check", remote[0], *rule)
    assert checked[0] == 1 and any("ttft" in line for line in checked[1])
    assert checked == run("check", local[0], *rule)


def test_a_bad_retry_budget_is_a_usage_error(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "many")
    line = _fails(["analyze", "s3://bucket/trace.parquet"], 2)
    assert line == "error: AWS_MAX_ATTEMPTS=many: not a whole number ≥ 1"


def test_validate_writes_its_quarantine_to_the_store(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    trace = tmp_path / "trace.parquet"
    pl.DataFrame(
        {
            "request_id": ["ok", "ok", "bad"],
            "event": ["arrival", "completion"] * 1 + ["completion"],
            "ts": [0, 10, 5],
        }
    ).write_parquet(trace)
    s3.put(trace, f"s3://{bucket}/trace.parquet")
    out = f"s3://{bucket}/quarantine.jsonl"
    done = runner.invoke(app, ["validate", f"s3://{bucket}/trace.parquet", "--quarantine-out", out])
    assert done.exit_code == 1, done.stderr  # a request is invalid
    local = tmp_path / "quarantine.jsonl"
    runner.invoke(app, ["validate", str(trace), "--quarantine-out", str(local)])
    s3.get(out, tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == local.read_bytes() != b""


@pytest.mark.parametrize(
    ("pattern", "key", "matched"),
    [
        ("*.parquet", "a.parquet", True),
        ("*.parquet", "day=1/a.parquet", False),  # a wildcard stays in its segment
        ("*/*.parquet", "day=1/a.parquet", True),
        ("**/*.parquet", "a.parquet", True),  # ** is zero segments too
        ("**/*.parquet", "x/y/z/a.parquet", True),
        ("**", "x/y/a.parquet", True),
        ("**", "x/.hidden/a.parquet", False),  # as a local ** skips hidden folders
        ("*.parquet", ".a.parquet", False),  # nor does a wildcard match a leading dot
        ("part-[0-9].parquet", "part-7.parquet", True),
        ("part-?.parquet", "part-10.parquet", False),
    ],
)
def test_globs_match_keys_as_local_globs_match_paths(pattern: str, key: str, matched: bool) -> None:
    from servetrace.sources.objectstore import _matched

    assert _matched(pattern.split("/"), key.split("/")) is matched
