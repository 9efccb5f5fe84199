"""The report's stalls sections without a browser: after the latency-over-time charts,
sentences read from the numbers, unjoined gaps and a missing baseline said in words, the
cause table's cells the JSON's, the scatter capped; and ``report --steps``."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.render.report import report_sections
from servetrace.render.report_sections import Section, TraceView
from servetrace.render.stalls_report import stall_points
from tests.analysis.stall_fixtures import write_hand, write_injected

pytest.importorskip("altair")
runner = CliRunner()


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_injected(tmp_path_factory.mktemp("injected"))


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_hand(tmp_path_factory.mktemp("hand"))


def _view(trace: Path, steps: Path, points: int = 2_400) -> TraceView:
    return TraceView(str(trace), servetrace.analyze(trace, steps=steps), points=points)


def _sections(view: TraceView) -> dict[str, Section]:
    ((_, sections),) = report_sections([view])
    return {s.id: s for s in sections}


def test_hand_made_gaps_in_words(hand: tuple[Path, Path]) -> None:
    by = _sections(_view(*hand))
    ids = list(by)
    assert ids[ids.index("t0-latency-time") + 1 : ids.index("t0-latency-time") + 3] == [
        "t0-stalls-prefill",
        "t0-stalls-causes",
    ]
    prefill = by["t0-stalls-prefill"]
    # ITL p99 of 10, 15, 5, 10, 5 ms (linear): 14.8 ms; only the 15 ms gap is at or above.
    assert prefill.sentence == (
        "4 of 5 ITL gaps are covered by engine steps (not joined — 1 gap: the gap lies "
        "before the first or after the last step of its replica). The median gap is 15 ms "
        "when its steps carry prefill work (1 gap) and 10 ms when they do not (3 gaps). "
        "Gaps at or above the ITL p99 (14.8 ms): 1, 100% of them with prefill work in "
        "their steps."
    )
    assert prefill.note is not None
    assert "baseline is unavailable (only 3 decode-only steps (need 10))" in prefill.note
    ((_, spec),) = prefill.charts
    drawn = [d for d in spec["datasets"].values() if d and "gap_ms" in d[0]]
    assert sorted(p["gap_ms"] for p in drawn[0]) == [5.0, 10.0, 10.0, 15.0]
    assert {p["cause"] for p in drawn[0]} == {"no baseline"}
    causes = by["t0-stalls-causes"]
    assert causes.sentence == (
        "The excess by cause is unavailable: only 3 decode-only steps (need 10)."
    )
    assert causes.charts == [] and causes.table is None


def test_injected_prefill_dominates_the_tail(injected: tuple[Path, Path]) -> None:
    view = _view(*injected)
    causes = _sections(view)["t0-stalls-causes"]
    report = view.json["stalls"]
    assert causes.table is not None
    cells = {path: text for row in causes.table["rows"] for text, path in row if path}
    assert len(cells) == 12  # six causes, overall and in the tail
    for path, text in cells.items():
        _, group, name = path.split(".")
        assert text == f"{report[group][name]:.1%}", path
    # The long prompts are prefilled beside the decoders: prefill is the tail's cause.
    assert report["tail"]["prefill_share"] > 0.9 > report["overall"]["prefill_share"] > 0.5
    assert causes.sentence.startswith(f"{report['overall']['gaps']:,} gaps are longer than")
    assert "; of the" in causes.sentence and "ITL p99, prefill (92% of their" in causes.sentence
    assert len(causes.charts) == 1


def test_the_scatter_keeps_every_tail_gap_and_thins_the_rest(injected: tuple[Path, Path]) -> None:
    stalls = _view(*injected).analysis.stalls
    assert stalls is not None
    points, total = stall_points(stalls, 500)
    tail = stalls.tail.height
    assert total == 10_086 and tail == 120
    # 380 places for 9,966 other gaps: every 27th, 370 of them.
    assert points.height == 490 and int(points["tail"].sum()) == tail
    all_points, all_total = stall_points(stalls, 20_000)
    assert all_points.height == all_total == 10_086


@pytest.mark.slow  # the whole page is written (about 3 s of CPU)
def test_report_cli_with_steps(
    injected: tuple[Path, Path], hand: tuple[Path, Path], tmp_path: Path
) -> None:
    trace, steps = injected
    out = tmp_path / "r.html"
    done = runner.invoke(
        app,
        ["report", str(trace), "--steps", str(steps), "--steps-from", "canonical", "-o", str(out)],
    )
    assert done.exit_code == 0, done.output
    html = out.read_text()
    assert 'id="t0-stalls-prefill"' in html and 'id="t0-stalls-causes"' in html
    assert 'data-path="stalls.tail.prefill_share"' in html
    plain = TraceView(str(trace), servetrace.analyze(trace))
    assert not any(i.startswith("t0-stalls-") for i in _sections(plain))


def test_report_steps_options_and_inputs_are_checked(
    injected: tuple[Path, Path], hand: tuple[Path, Path], tmp_path: Path
) -> None:
    trace, steps = injected
    out = tmp_path / "r.html"
    lone = runner.invoke(app, ["report", str(trace), "--steps-from", "vidur", "-o", str(out)])
    assert lone.exit_code == 2 and "--steps-from needs --steps" in lone.stderr
    two = runner.invoke(
        app, ["report", str(trace), str(hand[0]), "--steps", str(steps), "-o", str(out)]
    )
    assert two.exit_code == 2 and "give one trace" in two.stderr
    bad = runner.invoke(
        app, ["report", str(trace), "--steps", str(steps), "--steps-from", "x", "-o", str(out)]
    )
    assert bad.exit_code == 2 and "not a step format" in bad.stderr
    gone = runner.invoke(
        app, ["report", str(trace), "--steps", str(tmp_path / "none.parquet"), "-o", str(out)]
    )
    assert gone.exit_code == 3, gone.output
    # the steps of another clock: one line naming the file and the rule
    moved = tmp_path / "moved.parquet"
    pl.read_parquet(steps).with_columns(
        pl.col("ts_start") + 10**15, pl.col("ts_end") + 10**15
    ).write_parquet(moved)
    far = runner.invoke(app, ["report", str(trace), "--steps", str(moved), "-o", str(out)])
    assert far.exit_code == 3 and "rule clocks_disjoint" in far.stderr
    assert "Traceback" not in far.output
