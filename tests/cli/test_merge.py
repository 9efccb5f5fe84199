"""``analyze --partial-out`` and ``merge`` end to end: the merged report is the whole
trace's, overlapping or foreign partials are exit 3 in one line, and compare/check take
a merged partial as a trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app

SAMPLES = Path(__file__).parents[2] / "sample_traces"
runner = CliRunner()


def _split(source: Path, tmp_path: Path, n: int = 4) -> list[Path]:
    frame = pl.read_parquet(source)
    files = []
    for i in range(n):
        path = tmp_path / f"shard{i}.parquet"
        frame.filter(pl.col("request_id").hash(seed=3) % n == i).write_parquet(path)
        files.append(path)
    return files


def _partials(shards: list[Path], tmp_path: Path) -> list[str]:
    out = []
    for i, shard in enumerate(shards):
        target = tmp_path / f"p{i}"
        done = runner.invoke(
            app, ["analyze", str(shard), "--partial-out", str(target), "-f", "json"]
        )
        assert done.exit_code == 0, done.stderr
        alone = runner.invoke(app, ["analyze", str(shard), "-f", "json"])
        assert json.loads(done.stdout) == json.loads(alone.stdout)  # the shard's own report
        out.append(str(target))
    return out


def _without_inputs(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "inputs"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["realistic.parquet", "policy_fcfs.parquet"])
def test_merge_of_four_shards_is_the_whole_report(name: str, tmp_path: Path) -> None:
    shards = _split(SAMPLES / name, tmp_path)
    partials = _partials(shards, tmp_path)
    merged = runner.invoke(app, ["merge", *partials, "-f", "json", "--goodput", "ttft<=500ms"])
    assert merged.exit_code == 0, merged.stderr
    whole = runner.invoke(
        app, ["analyze", str(SAMPLES / name), "-f", "json", "--goodput", "ttft<=500ms"]
    )
    got, expected = json.loads(merged.stdout), json.loads(whole.stdout)
    assert got["inputs"] == [str(s) for s in shards]  # what the partials were made of
    assert _without_inputs(got) == _without_inputs(expected)
    # per-request rows too, and a glob of partials is the same merge
    out = tmp_path / "requests.parquet"
    again = runner.invoke(app, ["merge", str(tmp_path / "p*"), "--requests-out", str(out)])
    assert again.exit_code == 0, again.stderr
    ref = tmp_path / "ref.parquet"
    runner.invoke(app, ["analyze", str(SAMPLES / name), "--requests-out", str(ref)])
    assert pl.read_parquet(out).equals(pl.read_parquet(ref))


@pytest.mark.slow
def test_merge_output_is_a_trace_for_compare_and_check(tmp_path: Path) -> None:
    fcfs, chunked = SAMPLES / "policy_fcfs.parquet", SAMPLES / "policy_chunked.parquet"
    merged = tmp_path / "fcfs.partial"
    done = runner.invoke(
        app, ["merge", *_partials(_split(fcfs, tmp_path), tmp_path), "-o", str(merged)]
    )
    assert done.exit_code == 0, done.stderr
    args = ["-f", "json", "--resamples", "200"]
    via_partial = runner.invoke(app, ["compare", str(merged), str(chunked), *args])
    direct = runner.invoke(app, ["compare", str(fcfs), str(chunked), *args])
    assert via_partial.exit_code == direct.exit_code == 0, via_partial.stderr
    a, b = json.loads(via_partial.stdout), json.loads(direct.stdout)
    assert a["rows"] == b["rows"]
    rule = ["--slo", "ttft.p99<=100s", "--max-regression", "ttft.p99:+5%", "-f", "json"]
    check = runner.invoke(app, ["check", str(merged), "--baseline", str(fcfs), *rule])
    assert check.exit_code == 0, check.stderr
    assert json.loads(check.stdout)["passed"] is True
    # merge takes a merged partial like any other; analyze reads it as the whole trace
    shown = runner.invoke(app, ["analyze", str(merged), "-f", "json"])
    whole = runner.invoke(app, ["analyze", str(fcfs), "-f", "json"])
    assert _without_inputs(json.loads(shown.stdout)) == _without_inputs(json.loads(whole.stdout))


def test_shards_cut_in_time_share_requests_and_are_refused(tmp_path: Path) -> None:
    frame = pl.read_parquet(SAMPLES / "realistic.parquet").sort("ts")
    half = frame.height // 2
    partials = []
    for i, part in enumerate((frame.head(half), frame.tail(frame.height - half))):
        shard = tmp_path / f"t{i}.parquet"
        part.write_parquet(shard)
        target = tmp_path / f"t{i}"
        assert (
            runner.invoke(app, ["analyze", str(shard), "--partial-out", str(target)]).exit_code == 0
        )
        partials.append(str(target))
    done = runner.invoke(app, ["merge", *partials])
    assert done.exit_code == 3
    first = done.stderr.splitlines()[0]
    assert "in more than one partial" in first and "were not split by request" in first
    assert "Traceback" not in done.stderr


def test_a_foreign_or_broken_partial_is_exit_3_in_one_line(tmp_path: Path) -> None:
    good = _partials(_split(SAMPLES / "worked_example.parquet", tmp_path, 1), tmp_path)[0]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text('{"format": "something-else"}')
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "manifest.json").write_text("{not json")
    newer = tmp_path / "newer"
    manifest = json.loads((Path(good) / "manifest.json").read_text())
    newer.mkdir()
    (newer / "manifest.json").write_text(json.dumps({**manifest, "version": 99}))
    truncated = tmp_path / "truncated"
    runner.invoke(app, ["merge", good, "-o", str(truncated)])
    table = truncated / "requests.parquet"
    pl.read_parquet(table).head(0).write_parquet(table)
    cases = {
        str(foreign): "not a servetrace partial",
        str(garbled): "cannot read manifest.json",
        str(newer): "partial format version 99",
        str(truncated): "the partial is incomplete",
        str(SAMPLES / "worked_example.parquet"): "not a servetrace partial",
        str(tmp_path / "missing"): "no such directory",
    }
    for path, message in cases.items():
        done = runner.invoke(app, ["merge", good, path])
        assert done.exit_code == 3, (path, done.stderr)
        assert message in done.stderr.splitlines()[0], (path, done.stderr)
        assert "Traceback" not in done.stderr


def test_partial_out_refuses_what_a_partial_cannot_hold(tmp_path: Path) -> None:
    trace = str(SAMPLES / "worked_example.parquet")
    done = runner.invoke(
        app, ["analyze", trace, "--partial-out", str(tmp_path / "p"), "--window", "0:10"]
    )
    assert done.exit_code == 2 and "--window cannot be combined with --partial-out" in done.stderr
    assert not (tmp_path / "p").exists()
    # never over an input, nor over a directory that is not a partial
    here = tmp_path / "keep"
    here.mkdir()
    (here / "notes.txt").write_text("mine")
    done = runner.invoke(app, ["analyze", trace, "--partial-out", str(here)])
    assert done.exit_code == 2 and "not a partial" in done.stderr
    assert (here / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_commands_that_need_the_events_refuse_a_partial(tmp_path: Path) -> None:
    partial = _partials(_split(SAMPLES / "worked_example.parquet", tmp_path, 1), tmp_path)[0]
    done = runner.invoke(app, ["timeline", partial, "-o", str(tmp_path / "t.json")])
    assert done.exit_code == 2, done.stderr
    assert "this analysis keeps no events (merged partials" in done.stderr
    # The report takes partials as analyze does, and says what it cannot draw without events.
    done = runner.invoke(app, ["report", partial, "-o", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.stderr
    assert "partial results keep no events" in done.stderr


def _tamper_manifest(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _as_histogram(manifest: dict[str, Any]) -> None:
    manifest["itl"].update(kind="histogram", count=0)  # an exact partial's null sums


def _retype(table: str, column: str, dtype: Any) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        file = path / f"{table}.parquet"
        pl.read_parquet(file).with_columns(pl.col(column).cast(dtype)).write_parquet(file)

    return edit


def _dangling_gap(path: Path) -> None:
    file = path / "gaps.parquet"
    gaps = pl.read_parquet(file)
    gaps.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(10**9).otherwise("_key").alias("_key")
    ).write_parquet(file)


TAMPERED: dict[str, tuple[Callable[[Path], None], str]] = {
    "histogram kind without sums": (
        lambda p: _tamper_manifest(p, _as_histogram),
        "itl.sum",
    ),
    "end far beyond Int64": (
        lambda p: _tamper_manifest(p, lambda m: m["trace"].update(end_ns=1e30)),
        "trace.end_ns",
    ),
    "version true": (
        lambda p: _tamper_manifest(p, lambda m: m.update(version=True)),
        "partial format version True",
    ),
    "ttft as text": (_retype("requests", "ttft_ns", pl.String), "requests column ttft_ns"),
    "a gap of no request": (_dangling_gap, "gaps"),
}


@pytest.mark.parametrize("case", TAMPERED)
def test_a_tampered_partial_is_exit_3_in_one_line_naming_what(case: str, tmp_path: Path) -> None:
    good = _partials(_split(SAMPLES / "worked_example.parquet", tmp_path, 1), tmp_path)[0]
    tamper, named = TAMPERED[case]
    tamper(Path(good))
    done = runner.invoke(app, ["merge", good])
    assert done.exit_code == 3, done.output
    assert "Traceback" not in done.stderr
    first = done.stderr.splitlines()[0]
    assert good in first and named in first, first


def _shard_partials(tmp_path: Path, *per_shard: list[str]) -> list[str]:
    """Two request-split shards of one sample, each made into a partial with its flags."""
    shards = _split(SAMPLES / "realistic.parquet", tmp_path, len(per_shard))
    out = []
    for i, (shard, flags) in enumerate(zip(shards, per_shard, strict=True)):
        target = tmp_path / f"s{i}"
        done = runner.invoke(app, ["analyze", str(shard), "--partial-out", str(target), *flags])
        assert done.exit_code == 0, done.stderr
        out.append(str(target))
    return out


@pytest.mark.parametrize(
    ("flag", "first", "second"),
    [
        ("--goodput", "ttft<=200ms", "ttft<=500ms"),
        ("--formula-rel-tol", "0.05", "0.01"),
        ("--formula-abs-tol-ms", "2", "1"),
        ("--event-map", "begin=arrival", "start=arrival"),
    ],
)
def test_shards_made_with_different_settings_are_refused_naming_both(
    flag: str, first: str, second: str, tmp_path: Path
) -> None:
    a, b = _shard_partials(tmp_path, [flag, first], [flag, second])
    done = runner.invoke(app, ["merge", a, b])
    assert done.exit_code == 3, done.output
    assert "Traceback" not in done.stderr
    line = done.stderr.splitlines()[0]
    assert flag in line and "shard0" in line and "shard1" in line, line


@pytest.mark.slow
def test_a_merge_reports_with_the_settings_the_shards_were_made_with(tmp_path: Path) -> None:
    flags = ["--goodput", "ttft<=200ms", "--formula-rel-tol", "0.05"]
    partials = _shard_partials(tmp_path, flags, flags)
    merged = runner.invoke(app, ["merge", *partials, "-f", "json", "--by", "policy"])
    assert merged.exit_code == 0, merged.stderr
    whole = runner.invoke(
        app, ["analyze", str(SAMPLES / "realistic.parquet"), "-f", "json", "--by", "policy", *flags]
    )
    got, expected = json.loads(merged.stdout), json.loads(whole.stdout)
    assert got["goodput"] is not None
    assert _without_inputs(got) == _without_inputs(expected)
    # A merged partial keeps them, and flags given to the merge replace them.
    runner.invoke(app, ["merge", *partials, "-o", str(tmp_path / "day")])
    again = runner.invoke(app, ["merge", str(tmp_path / "day"), "-f", "json"])
    assert _without_inputs(json.loads(again.stdout)) == _without_inputs(
        json.loads(runner.invoke(app, ["merge", *partials, "-f", "json"]).stdout)
    )
    other = runner.invoke(app, ["merge", *partials, "-f", "json", "--goodput", "ttft<=1s"])
    plain = runner.invoke(
        app,
        [
            "analyze",
            str(SAMPLES / "realistic.parquet"),
            "-f",
            "json",
            "--goodput",
            "ttft<=1s",
            "--formula-rel-tol",
            "0.05",
        ],
    )
    assert _without_inputs(json.loads(other.stdout)) == _without_inputs(json.loads(plain.stdout))


def test_a_tolerance_given_to_merge_wins_even_when_it_is_the_default(tmp_path: Path) -> None:
    flags = ["--formula-rel-tol", "0.05", "--formula-abs-tol-ms", "5"]
    partials = _shard_partials(tmp_path, flags, flags)

    def tolerance(args: list[str]) -> dict[str, float]:
        done = runner.invoke(app, ["merge", *partials, "-f", "json", *args])
        assert done.exit_code == 0, done.stderr
        return dict(json.loads(done.stdout)["formula"]["tolerance"])

    assert tolerance([]) == {"abs_ms": 5.0, "rel": 0.05}  # the shards' own
    # 0.01 and 1 ms are the defaults: given on purpose, they still replace the shards'.
    assert tolerance(["--formula-rel-tol", "0.01"]) == {"abs_ms": 5.0, "rel": 0.01}
    assert tolerance(["--formula-abs-tol-ms", "1"]) == {"abs_ms": 1.0, "rel": 0.05}
