"""Numbers in rules must mean something: NaN, infinities and out-of-range values are exit 2
with a caret under the number, never an exit 4 or a silent pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.rules.grammar import (
    MAX_TIME_NS,
    RuleError,
    parse_goodput_target,
    parse_regression,
    parse_rules,
    parse_slo,
)

SAMPLE = str(Path(__file__).parents[2] / "sample_traces" / "worked_example.csv")
runner = CliRunner()


@pytest.mark.parametrize(
    ("text", "position", "length", "reason"),
    [
        ("ttft.p99<=1e999ms", 10, 7, "too large to be finite"),
        ("ttft.p99:+1e400%", 10, 6, "too large to be finite"),
        ("ttft.p99:1e400ms", 9, 7, "too large to be finite"),
        ("cancelled.count<=1e309", 17, 5, "too large to be finite"),
        ("ttft.p99<=1e300s", 10, 6, "longer than any trace can be"),
        ("itl.p50:+300years", 12, 5, "unknown unit 'years'"),
        ("e2e.max<=9300000000s", 9, 11, "longer than any trace can be"),
        ("cancelled.fraction<=1.5", 20, 3, "between 0 and 1"),
        ("cancelled.fraction<=150%", 20, 4, "between 0 and 1"),
        ("goodput.fraction>=2", 18, 1, "between 0 and 1"),
        ("cancelled.fraction:+2", 20, 1, "between 0 and 1"),
        ("throughput.requests_per_s:-150%", 27, 4, "cannot fall by more than 100%"),
        ("goodput.fraction:-101%", 18, 4, "cannot fall by more than 100%"),
        ("ttft.p99<=nanms", 10, 1, "expected a number"),
        ("ttft.p99<=infs", 10, 1, "expected a number"),
        ("ttft.p99:+nan%", 10, 1, "expected a number"),
    ],
)
def test_numbers_out_of_range_point_at_the_number(
    text: str, position: int, length: int, reason: str
) -> None:
    with pytest.raises(RuleError) as raised:
        parse_rules(text)
    error = raised.value
    assert reason in error.reason
    assert (error.position, error.length) == (position, length)
    caret = error.message.splitlines()[2]
    assert caret == "  " + " " * position + "^" * length


def test_the_edges_of_every_range_are_accepted() -> None:
    assert parse_slo("cancelled.fraction<=1")[0].limit == 1.0
    assert parse_slo("cancelled.fraction<=100%")[0].limit == 1.0
    assert parse_slo("cancelled.fraction<=0")[0].limit == 0.0
    assert parse_regression("throughput.requests_per_s:-100%")[0].value == -100
    assert parse_regression("cancelled.fraction:+1")[0].value == 1
    # relative to the baseline's fraction: 200 % more is a meaningful budget
    assert parse_regression("cancelled.fraction:+200%")[0].limit_for(0.01) == pytest.approx(0.03)
    assert parse_regression("ttft.p99:+1000%")[0].limit_for(10.0) == pytest.approx(110.0)
    longest = parse_slo(f"ttft.p99<={int(MAX_TIME_NS)}ns")[0]
    assert longest.limit == MAX_TIME_NS
    with pytest.raises(RuleError, match="longer than any trace"):
        parse_slo("ttft.p99<=9223372036854775808000ns")
    assert parse_slo("cancelled.count<=1e300")[0].limit == 1e300  # large but finite: a count


def test_goodput_targets_are_range_checked_too() -> None:
    with pytest.raises(RuleError, match="too large to be finite"):
        parse_goodput_target("ttft<=1e999ms")
    with pytest.raises(RuleError, match="longer than any trace"):
        parse_goodput_target("e2e<=1e12s")


@pytest.mark.parametrize(
    "flags",
    [
        ["--slo", "ttft.p99<=1e999ms"],  # was exit 4: OverflowError in the renderer
        ["--slo", "cancelled.fraction<=150%"],  # was accepted: a limit nothing can exceed
        ["--max-regression", "ttft.p99:+1e400%", "--baseline", SAMPLE],  # was an inf limit
        ["--max-regression", "throughput.requests_per_s:-150%", "--baseline", SAMPLE],
        ["--slo", "goodput.fraction>=0.5", "--goodput", "ttft<=1e999ms"],
    ],
)
def test_cli_refuses_out_of_range_numbers_with_exit_2_and_a_caret(flags: list[str]) -> None:
    result = runner.invoke(app, ["check", SAMPLE, *flags])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "error: bad rule:" in result.stderr and "^" in result.stderr
    assert "Traceback" not in result.stderr


def test_minutes_and_hours_are_time_units_as_in_window_and_slice() -> None:
    from servetrace.analysis.slices import parse_slice
    from servetrace.rules.rules import internal_value

    (slo,) = parse_slo("e2e.p99<=2min")
    assert internal_value(slo.value, slo.unit) == 120e9 == parse_slice("2min")
    target = parse_goodput_target("e2e<=1h")
    assert target.limit_ns == 3600e9 == parse_slice("1h")
    with pytest.raises(RuleError, match="use ns, us, ms, s, min or h"):
        parse_slo("ttft.p99<=2days")
