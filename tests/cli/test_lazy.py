"""Start-up: ``--help`` lists every command from declared summaries without importing one,
and neither it nor ``analyze`` loads what only other commands need (issue 13, item 1)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.cli._lazy import LAZY_COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[2]
WORKED = str(ROOT / "sample_traces" / "worked_example.csv")
HEAVY = ("polars", "numpy", "scipy", "altair", "pyarrow", "pandas")
COMMAND_MODULES = sorted({lazy.module for lazy in LAZY_COMMANDS.values()})


def _words(text: str) -> str:
    return " ".join(text.split())


def _first_paragraph(text: str) -> str:
    return _words(inspect.cleandoc(text).split("\n\n")[0])


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


def test_every_declared_summary_is_its_commands_docstring() -> None:
    assert set(LAZY_COMMANDS) == {
        "analyze",
        "validate",
        "capacity",
        "check",
        "compare",
        "import",
        "merge",
        "report",
        "simulate",
        "timeline",
    }
    for name, lazy in LAZY_COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert command.callback is not None
        assert lazy.summary == _first_paragraph(inspect.getdoc(command.callback) or ""), name


def test_every_registered_command_is_declared() -> None:
    for module in COMMAND_MODULES:
        __import__(module)
    registered = {
        info.name or typer.main.get_command_name(info.callback.__name__)
        for info in app.registered_commands
        if info.callback is not None
    }
    assert registered == set(LAZY_COMMANDS)


def test_help_lists_every_command_with_its_summary_and_imports_none() -> None:
    code = (
        "import json, sys\n"
        "from servetrace.cli import main\n"
        "sys.argv = ['servetrace', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        f"or m in {COMMAND_MODULES!r})))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    *help_lines, loaded = done.stdout.rstrip("\n").split("\n")
    assert json.loads(loaded) == []
    # Rich wraps within a box: drop the frame characters, then compare words.
    shown = _words(" ".join(line.strip(" │╭╮╰╯─") for line in help_lines))
    for name, lazy in LAZY_COMMANDS.items():
        assert f"{name} {lazy.summary}" in shown, name


def test_import_cli_loads_no_heavy_module() -> None:
    code = (
        "import json, sys, servetrace.cli\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# Every percentile carries its binomial interval, computed without SciPy
# (stats/binomial.py): analyze must not pay SciPy's import.
def test_analyze_loads_no_other_command() -> None:
    code = (
        "import json, sys\n"
        "from servetrace.cli import main\n"
        "sys.argv = ['servetrace', 'analyze', sys.argv[1], '--format', 'json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('altair', 'pandas', 'ray', 'scipy') or m.startswith(('servetrace.cli.', "
        "'servetrace.comparison.compare', 'servetrace.stats.rank_tests', "
        "'servetrace.sim', 'servetrace.render.report')))))\n"
    )
    done = _run(code, WORKED)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.rstrip("\n").split("\n")[-1])
    assert [m for m in loaded if not m.startswith("servetrace.cli.")] == []
    # Only the analyze command's own module and the CLI's shared helpers.
    assert {m for m in loaded} <= {
        "servetrace.cli.analyze",
        "servetrace.cli._app",
        "servetrace.cli._lazy",
        "servetrace.cli._events",
        "servetrace.cli._options",
        "servetrace.cli._scale",  # --engine/--partial-out options; Ray only with --engine ray
    }


def test_commands_still_run_and_suggest() -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["analyze", WORKED, "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["accounting"]["requests_valid"] == 1
    typo = runner.invoke(app, ["analyz"])
    assert typo.exit_code == 2
    assert "Did you mean 'analyze'" in typo.output
    assert runner.invoke(app, ["nonsense"]).exit_code == 2
    assert runner.invoke(app, ["simulate", "--help"]).exit_code == 0
