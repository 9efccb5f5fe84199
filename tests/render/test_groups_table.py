"""``--by`` past a handful of groups prints one table, a row per group; a few groups
keep their full summaries side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request

runner = CliRunner()


def _trace(tmp_path: Path, groups: int) -> Path:
    rows = []
    for g in range(groups):
        # group g: two requests, TTFT 10 + g ms and 20 + g ms, two 5 ms gaps each
        for i, ttft in enumerate((10 + g, 20 + g)):
            start = 100 * g + 10 * i
            first = start + ttft
            rows.append(
                make_request(
                    f"g{g}r{i}",
                    arrival=start,
                    admission=start,
                    first=first,
                    ticks=[first + 5, first + 10],
                    complete=first + 10,
                    tenant=f"t|{g}",
                )
            )
    path = tmp_path / "trace.parquet"
    events(*rows).write_parquet(path)
    return path


def test_many_groups_are_one_table_with_a_row_each(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["analyze", str(_trace(tmp_path, 6)), "--by", "tenant"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    rows = [line for line in lines if line.lstrip().startswith("t|")]
    assert len(rows) == 6
    # t|2: 2 requests, 2 completed, TTFT p50 = (12 + 22) / 2 = 17, p99 = 12 + 0.99·10
    cells = rows[2].split()
    assert cells[:3] == ["t|2", "2", "(2)"]
    assert cells[3:5] == ["17.00", "21.90"]
    assert "6 values of tenant" in result.stdout and "--format json or csv" in result.stdout
    assert "tenant = " not in result.stdout  # no stacked tables
    assert max(len(line) for line in lines if "t|" in line) <= 80


def test_markdown_of_many_groups_escapes_the_values(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["analyze", str(_trace(tmp_path, 6)), "--by", "tenant", "-f", "markdown"]
    )
    assert result.exit_code == 0, result.output
    assert "| t\\|0 | 2 (2) | 15.00 | 19.90 |" in result.stdout  # (10, 20) ms


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_a_handful_of_groups_keep_their_summaries(tmp_path: Path, fmt: str) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path, 3)), "--by", "tenant", "-f", fmt])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("tenant = t|") == 3
    assert "values of tenant" not in result.stdout
