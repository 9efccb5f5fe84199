"""Config files: every value checked, nothing silently ignored, a byte-order mark read,
and every message clear."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.errors import UsageError
from servetrace.rules.config import (
    MAX_SEED,
    CheckConfig,
    find_config,
    load_config,
    option_problems,
)

SAMPLE = str(Path(__file__).parents[2] / "sample_traces" / "worked_example.csv")
runner = CliRunner()


def check_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(tmp_path)
    return runner.invoke(app, ["check", SAMPLE, *args])


def test_a_byte_order_mark_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Notepad and some Windows editors start UTF-8 files with U+FEFF.
    (tmp_path / "servetrace.toml").write_bytes(
        b'\xef\xbb\xbf[check]\nslo = ["ttft.max<=1s"]\nseed = 3\n'
    )
    assert load_config(cwd=tmp_path).seed == 3
    result = check_in(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.stderr
    assert "check passed: 1 of 1 rules" in result.stdout


def test_a_bom_in_pyproject_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(
        b'\xef\xbb\xbf[tool.servetrace.check]\nslo = "ttft.p99<=1s"\n'
    )
    assert find_config(tmp_path) == tmp_path / "pyproject.toml"
    assert [str(r) for r in load_config(cwd=tmp_path).rules] == ["ttft.p99<=1s"]


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ("[tool]\nservetrace = 5\n", "tool.servetrace must be a table, not 5"),
        ('[tool]\nservetrace = "check"\n', "tool.servetrace must be a table, not 'check'"),
        ("[tool.servetrace]\ncheck = 5\n", "[tool.servetrace.check] must be a table, not 5"),
        ("[tool.servetrace.chek]\nslo = 'ttft.p99<=1s'\n", "'chek' (did you mean 'check'?)"),
    ],
)
def test_a_servetrace_entry_that_is_not_a_table_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pyproject: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    # with rules on the command line the config was silently ignored: exit 0
    result = check_in(tmp_path, monkeypatch, "--slo", "ttft.p99<=1s")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert str(tmp_path / "pyproject.toml") in result.stderr


def test_an_unknown_table_in_servetrace_toml_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "servetrace.toml"
    path.write_text("[chek]\nslo = ['ttft.p99<=1s']\n")
    with pytest.raises(UsageError, match=r"unknown table in the file: 'chek' \(did you mean"):
        load_config(path)


def test_a_broken_pyproject_on_the_way_up_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "servetrace.toml").write_text("[check]\nslo = 'ttft.p99<=1s'\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.servetrace.check\n")
    # walking past it would silently pick up the outer project's rules
    with pytest.raises(UsageError, match="not valid TOML"):
        find_config(inner)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("seed = nan", f"check.seed must be an integer from 0 to {MAX_SEED}, not nan"),
        ("seed = -1", "check.seed must be an integer from 0 to"),
        ("seed = 1.5", "check.seed must be an integer"),
        ("seed = true", "check.seed must be an integer"),
        ("resamples = 0", "check.resamples must be an integer from 100 to 1000000, not 0"),
        ("resamples = 1_000_000_000", "check.resamples must be an integer from 100 to"),
        ("resamples = inf", "check.resamples must be an integer"),
        ("confidence = nan", "check.confidence must be a number from 0.5 up to"),
        ("confidence = inf", "check.confidence must be a number"),
        ("confidence = -inf", "check.confidence must be a number"),
        ("confidence = 1", "not 1"),
        ("confidence = 95", "not 95"),
        ("confidence = 0.1", "not 0.1"),
        ("significance = 1", "check.significance must be true or false, not 1"),
        ("require_all = 'yes'", "check.require_all must be true or false, not 'yes'"),
        ("baseline = 5", "check.baseline must be a path, not 5"),
        ("baseline = ''", "check.baseline must be a path, not ''"),
    ],
)
def test_config_values_out_of_range_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    (tmp_path / "servetrace.toml").write_text(f"[check]\nslo = ['ttft.p99<=1s']\n{line}\n")
    result = check_in(tmp_path, monkeypatch)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_rules_in_a_config_are_range_checked_with_a_caret(tmp_path: Path) -> None:
    path = tmp_path / "servetrace.toml"
    path.write_text(
        "[check]\nslo = ['ttft.p99<=1e999ms']\nregression = 'ttft.p99:+1e400%'\n"
        "goodput = ['ttft<=1e300s']\nconfidence = nan\n"
    )
    with pytest.raises(UsageError) as raised:
        load_config(path)
    message = raised.value.message
    assert f"{path}: check.slo[0]: bad rule: this number is too large to be finite" in message
    assert "  ttft.p99<=1e999ms\n            ^^^^^^^" in message
    assert f"{path}: check.regression: bad rule: this number is too large" in message
    assert f"{path}: check.goodput[0]: bad rule: 1e+300s is longer than any trace" in message
    assert "check.confidence must be a number" in message


def test_valid_values_and_require_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "servetrace.toml").write_text(
        "[check]\nslo = ['ttft.p99<=1s', 'queue_wait.p99<=1s']\nrequire_all = true\n"
        f"seed = {2**63 - 1}\nresamples = 100\nconfidence = 0.5\n"
    )
    config = load_config(cwd=tmp_path)
    assert config == CheckConfig(
        rules=config.rules,
        require_all=True,
        seed=2**63 - 1,
        resamples=100,
        confidence=0.5,
        source=tmp_path / "servetrace.toml",
    )


def test_option_problems_name_every_bad_option() -> None:
    assert option_problems(0, 2000, 0.95) == []
    assert option_problems(MAX_SEED, 100, 0.5) == []
    problems = option_problems(-1, 99, float("nan"))
    assert [p.split()[0] for p in problems] == ["seed", "resamples", "confidence"]
    assert option_problems(MAX_SEED + 1, 1_000_001, True)[2].startswith("confidence")
    assert len(option_problems(0.0, 2000.0, 0.95)) == 2  # floats are not counts
