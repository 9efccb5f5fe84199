"""``render.grid.Grid`` draws what rich's ``Table`` draws, character for character and
style for style, and hands the table to rich whenever the one-pass drawing would not."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from servetrace.render.grid import Grid, GridColumn

COLUMNS = [GridColumn("metric (ms)", style="bold")] + [
    GridColumn(key, justify="right") for key in ("count", "mean", "p50", "p90", "p99", "max")
]
CAPTION = "latencies of completed requests, in ms; itl pools every gap"


def printed(renderable: object, width: int, colour: bool, encoding: str = "utf-8") -> str:
    raw = io.BytesIO()
    file = io.TextIOWrapper(raw, encoding=encoding, errors="replace", write_through=True)
    console = Console(
        file=file,
        width=width,
        soft_wrap=True,
        highlight=False,
        force_terminal=colour,
        color_system="truecolor" if colour else None,
    )
    console.print(renderable)
    return raw.getvalue().decode(encoding)


def grid(rows: list[list[str]], title: str = "group = 1", caption: str = CAPTION) -> Grid:
    return Grid(
        COLUMNS,
        rows,
        title=Text(title, style="table.title"),
        caption=caption,
        title_justify="left",
        caption_justify="left",
    )


ROWS = [
    ["queue_wait", "14", "21.40", "17.61", "45.46", "74.65", "77.91"],
    ["itl", "948,292", "26.21", "23.30", "42.24", "67.31", "2,958"],
    ["requeued", "3,899", "–", "0.00", "0.00", "242.3", "1,470"],
]


def drawn_in_one_pass(table: Grid, width: int, colour: bool, encoding: str = "utf-8") -> str:
    """The grid printed with its rich fallback made to fail: proof the fast path ran."""

    def refuse() -> None:
        raise AssertionError("fell back to rich's Table")

    fast = Grid(
        table.columns,
        table.rows,
        table.title,
        table.caption,
        table.title_justify,
        table.caption_justify,
    )
    fast.table = refuse  # type: ignore[method-assign]
    return printed(fast, width, colour, encoding)


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_the_metric_table_is_rich_s_table(colour: bool, encoding: str) -> None:
    table = grid(ROWS)
    expected = printed(table.table(), 80, colour, encoding)
    assert drawn_in_one_pass(table, 80, colour, encoding) == expected
    if encoding == "utf-8":
        assert "┡" in expected and "queue_wait" in expected
    else:  # no box characters in latin-1: rich substitutes ASCII, and so does the grid
        assert "|" in expected and "┡" not in expected


def test_the_exact_lines_for_one_row() -> None:
    """Hand-written: heavy head, one space of padding, right-justified numbers."""
    table = Grid(
        [GridColumn("m"), GridColumn("n", justify="right")],
        [["ab", "1"], ["c", "234"]],
        title=Text("t"),
        title_justify="left",
    )
    assert printed(table, 80, False).splitlines() == [
        "t",
        "┏━━━━┳━━━━━┓",
        "┃ m  ┃   n ┃",
        "┡━━━━╇━━━━━┩",
        "│ ab │   1 │",
        "│ c  │ 234 │",
        "└────┴─────┘",
    ]


@pytest.mark.parametrize(
    ("title", "caption", "width"),
    [
        ("group = 日本語のポリシー", CAPTION, 80),  # wide characters in the title
        ("group = " + "x" * 120, CAPTION, 80),  # a title wrapped to the table's width
        ("group = 1", CAPTION + "; " + "unavailable: " * 8, 80),  # a caption wrapped
        ("group = 1", "a [bold]caption[/bold] with markup", 80),
        ("group = [/x]", CAPTION, 80),  # the title is Text: never parsed
        ("group = 1", CAPTION, 50),  # narrower than the table: rich shrinks and wraps
        ("group = 1", CAPTION, 66),
        ("group = 1", CAPTION, 67),
    ],
)
@pytest.mark.parametrize("colour", [False, True])
def test_titles_captions_and_widths(title: str, caption: str, width: int, colour: bool) -> None:
    table = grid(ROWS, title, caption)
    assert printed(table, width, colour) == printed(table.table(), width, colour)


def test_rich_draws_what_does_not_fit_or_is_not_one_line() -> None:
    assert printed(grid(ROWS), 40, False) == printed(grid(ROWS).table(), 40, False)
    with pytest.raises(AssertionError, match="fell back"):
        drawn_in_one_pass(grid(ROWS), 40, False)
    with pytest.raises(AssertionError, match="fell back"):
        drawn_in_one_pass(grid([["two\nlines", "1", "2", "3", "4", "5", "6"]]), 80, False)


cell = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]),
    min_size=0,
    max_size=12,
)


@given(
    rows=st.lists(st.lists(cell, min_size=7, max_size=7), min_size=0, max_size=5),
    width=st.integers(min_value=20, max_value=140),
    colour=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_any_cells_print_as_rich_prints_them(
    rows: list[list[str]], width: int, colour: bool
) -> None:
    table = grid(rows)
    assert printed(table, width, colour) == printed(table.table(), width, colour)
