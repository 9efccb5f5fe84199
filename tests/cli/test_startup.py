"""Start-up: ``--help`` lists every command without loading Polars or the engine (the
command modules import them inside their functions), and ``analyze`` loads nothing only
other commands need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from servetrace.cli import app

ROOT = Path(__file__).resolve().parents[2]
WORKED = str(ROOT / "sample_traces" / "worked_example.csv")
HEAVY = ("polars", "numpy", "scipy", "altair", "pyarrow", "pandas", "ray")
COMMANDS = (
    "analyze",
    "validate",
    "capacity",
    "check",
    "compare",
    "import",
    "merge",
    "record-steps",
    "report",
    "simulate",
    "timeline",
    "whatif",
)


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def _loaded_after(argv: list[str], prefixes: tuple[str, ...], *args: str) -> tuple[str, list[str]]:
    """Run ``servetrace ARGV`` in a fresh interpreter: its stdout, and the loaded modules
    whose names start with one of ``prefixes``."""
    code = (
        "import json, sys\n"
        "from servetrace.cli import main\n"
        f"sys.argv = ['servetrace', *{argv!r}, *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n"
    )
    done = _run(code, *args)
    assert done.returncode == 0, done.stderr
    *shown, loaded = done.stdout.rstrip("\n").split("\n")
    return "\n".join(shown), json.loads(loaded)


def test_every_command_is_registered() -> None:
    registered = [
        info.name or typer.main.get_command_name(info.callback.__name__)
        for info in app.registered_commands
        if info.callback is not None
    ]
    assert sorted(registered) == sorted(COMMANDS)


def test_help_lists_every_command_and_loads_no_heavy_module() -> None:
    shown, loaded = _loaded_after(["--help"], tuple(f"{name}." for name in HEAVY) + HEAVY)
    assert loaded == []
    for name in COMMANDS:
        assert f"\n  {name} " in shown, name


@pytest.mark.slow
def test_each_commands_help_loads_no_heavy_module() -> None:
    for name in COMMANDS:
        _, loaded = _loaded_after([name, "--help"], HEAVY)
        assert loaded == [], name


# Every percentile carries its binomial interval, computed without SciPy
# (stats/binomial.py): analyze must not pay SciPy's import.
def test_analyze_loads_nothing_only_other_commands_need() -> None:
    _, loaded = _loaded_after(
        ["analyze", "--format", "json"],
        (
            "altair",
            "pandas",
            "ray",
            "scipy",
            "servetrace.comparison.compare",
            "servetrace.stats.rank_tests",
            "servetrace.sim.engine",
            "servetrace.sim.simulate",
            "servetrace.render.report",
        ),
        WORKED,
    )
    assert loaded == []


def test_commands_run_and_suggest() -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["analyze", WORKED, "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["accounting"]["requests_valid"] == 1
    typo = runner.invoke(app, ["analyz"])
    assert typo.exit_code == 2
    assert "Did you mean 'analyze'" in typo.output
    assert runner.invoke(app, ["nonsense"]).exit_code == 2
