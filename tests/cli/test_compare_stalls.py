"""``compare A B --steps SA --steps SB``: each run's ITL stall shares by cause, overall and
in its tail, and their change, in the table, Markdown and JSON; a prefill-first scheduler
(fcfs: a decoding request waits through the prefill steps) against chunked prefill (the
prompt work shares the decoders' steps); absent without --steps; a side without a
decode-step baseline said unavailable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.analysis.stall_causes import CAUSES
from servetrace.cli import app
from tests.analysis.stall_fixtures import write_hand

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("policies")
    out = {}
    for policy in ("fcfs", "chunked"):
        trace, steps = folder / f"{policy}.parquet", folder / f"{policy}_steps.parquet"
        made = runner.invoke(
            app,
            ["simulate", "--requests", "60", "--rate", "20", "--policy", policy,
             "--max-batch-tokens", "1024", "-o", str(trace), "--steps-out", str(steps)],
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        out[policy] = (trace, steps)
    return out


def _compare(runs: dict[str, tuple[Path, Path]], *extra: str) -> str:
    (a, sa), (b, sb) = runs["fcfs"], runs["chunked"]
    done = runner.invoke(
        app, ["compare", str(a), str(b), "--steps", str(sa), "--steps", str(sb), *extra]
    )
    assert done.exit_code == 0, done.output
    return done.stdout


def test_json_holds_each_sides_shares_and_the_change(runs: dict[str, tuple[Path, Path]]) -> None:
    got = json.loads(_compare(runs, "-f", "json"))["stalls"][str(runs["chunked"][0])]
    for side, policy in (("baseline", "fcfs"), ("candidate", "chunked")):
        trace, steps = runs[policy]
        stalls = servetrace.analyze(trace, steps=steps).stalls
        assert stalls is not None
        assert got[side]["steps_file"] == str(steps) and got[side]["unavailable"] is None
        overall, tail = stalls.shares(), stalls.tail_shares()
        assert got[side]["overall"]["gaps"] == overall["gaps"]
        assert got[side]["tail"]["tail_gaps"] == tail["tail_gaps"]
        for cause in CAUSES:
            key = f"{cause}_share"
            assert got[side]["overall"][key] == pytest.approx(overall[key])
            assert got[side]["tail"][key] == pytest.approx(tail[key])
    for group in ("overall", "tail"):
        for cause in CAUSES:
            key = f"{cause}_share"
            assert got["change"][group][key] == pytest.approx(
                got["candidate"][group][key] - got["baseline"][group][key]
            )
    # fcfs prefills first: its tail stalls wait through other requests' prefill steps
    # (paused for prefill); chunked prefill puts the prompt work in the decoders' own steps.
    assert got["baseline"]["tail"]["paused_for_prefill_share"] > 0.9
    assert got["candidate"]["tail"]["paused_for_prefill_share"] < 0.05
    assert got["baseline"]["tail"]["prefill_share"] == 0
    assert got["candidate"]["tail"]["prefill_share"] > 0.5
    assert got["candidate"]["tail"]["skipped_share"] < 0.05


def test_table_and_markdown(runs: dict[str, tuple[Path, Path]]) -> None:
    table = _compare(runs)
    assert "Where ITL stalls come from (share of the excess over the usual decode step):" in table
    lines = [line for line in table.splitlines() if line.startswith("gaps ≥ each run's ITL p99")]
    assert len(lines) == len(CAUSES)
    paused = next(line for line in lines if " paused for prefill " in line).split()
    # baseline, candidate, change: the change is the difference of the two shown shares
    base, cand, change = float(paused[-4][:-1]), float(paused[-3][:-1]), float(paused[-2])
    assert paused[-1] == "pp" and change == pytest.approx(cand - base, abs=0.11) and base > 90
    skipped = next(line for line in lines if " skipped " in line).split()
    assert skipped[-4:] == ["0.0%", "0.0%", "±0.0", "pp"]  # no change is said as such
    markdown = _compare(runs, "-f", "markdown")
    assert "| gaps | cause | baseline | candidate | change |" in markdown
    assert markdown.count("| all stalled gaps |") == len(CAUSES)
    assert "- baseline: " in markdown and "- candidate: " in markdown
    plain = runner.invoke(
        app, ["compare", str(runs["fcfs"][0]), str(runs["chunked"][0]), "-f", "json"]
    )
    assert plain.exit_code == 0 and "stalls" not in json.loads(plain.stdout)


def test_a_side_without_baseline_is_unavailable(tmp_path: Path) -> None:
    trace, steps = write_hand(tmp_path)
    done = runner.invoke(
        app,
        ["compare", str(trace), str(trace), "--steps", str(steps), "--steps", str(steps),
         "-f", "json"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    got = json.loads(done.stdout)["stalls"][str(trace)]
    assert got["baseline"]["unavailable"] == (
        "no decode-step baseline: only 3 decode-only steps (need 10)"
    )
    assert got["baseline"]["overall"] is None and got["candidate"]["tail"] is None
    assert got["change"]["overall"]["prefill_share"] is None
    text = runner.invoke(
        app, ["compare", str(trace), str(trace), "--steps", str(steps), "--steps", str(steps)]
    ).stdout
    assert "baseline: unavailable (no decode-step baseline: only 3 decode-only steps" in text


def test_steps_options_are_checked_before_reading(runs: dict[str, tuple[Path, Path]]) -> None:
    (a, sa), (b, _) = runs["fcfs"], runs["chunked"]
    one = runner.invoke(app, ["compare", str(a), str(b), "--steps", str(sa)])
    assert one.exit_code == 2 and "1 --steps for 2 traces" in one.stderr
    lone = runner.invoke(app, ["compare", str(a), str(b), "--steps-from", "vidur"])
    assert lone.exit_code == 2 and "--steps-from needs --steps" in lone.stderr
