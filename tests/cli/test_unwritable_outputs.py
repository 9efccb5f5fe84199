"""An output that cannot be written is one line naming it, exit 2 (as an output in a
missing directory), never a traceback: a symlink into a missing directory, a directory no
file can be created in, a full disk under a partial or under a redirected stdout."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app

ROOT = Path(__file__).parents[2]
TRACE = ROOT / "sample_traces" / "worked_example.parquet"
# Even root cannot create a file in /proc (a chmod 0o555 directory does not stop root).
UNWRITABLE = Path("/proc")
runner = CliRunner()
needs_proc = pytest.mark.skipif(not UNWRITABLE.is_dir(), reason="needs Linux /proc")


def _refused(args: list[str], *needles: str) -> str:
    done = runner.invoke(app, args)
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning:")]
    assert lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_a_dangling_symlink_into_a_missing_directory(tmp_path: Path) -> None:
    link = tmp_path / "requests.parquet"
    link.symlink_to(tmp_path / "missing" / "requests.parquet")
    _refused(
        ["analyze", str(TRACE), "--requests-out", str(link)],
        f"--requests-out {link}",
        f"directory {tmp_path / 'missing'} does not exist",
    )


@needs_proc
@pytest.mark.parametrize(
    "args",
    [
        ["analyze", str(TRACE), "--requests-out", str(UNWRITABLE / "requests.parquet")],
        ["check", str(TRACE), "--slo", "ttft.p99<=5s", "--output", str(UNWRITABLE / "c.json")],
        ["timeline", str(TRACE), "-o", str(UNWRITABLE / "timeline.json")],
        ["analyze", str(TRACE), "--partial-out", str(UNWRITABLE / "part")],
    ],
    ids=["requests-out", "check-output", "timeline-o", "partial-out"],
)
def test_an_output_in_a_directory_nothing_can_be_created_in(args: list[str]) -> None:
    _refused(args, f"{args[-1]}: cannot write")


def test_a_full_disk_while_writing_a_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: pl.DataFrame, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    out = tmp_path / "part"
    _refused(["analyze", str(TRACE), "--partial-out", str(out)], "No space left on device")
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing half-written left


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_under_a_redirected_stdout() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "servetrace", "analyze", str(TRACE), "--format", "json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning:")]
    assert lines == ["error: stdout: cannot write: No space left on device"], lines
