"""``render.grid.Grid`` draws what rich's ``Table`` draws, character for character and
style for style, and hands the table to rich whenever the one-pass drawing would not."""

from __future__ import annotations

import copy
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


def printed(
    renderable: object,
    width: int,
    colour: bool,
    encoding: str = "utf-8",
    highlight: bool = False,
    legacy_windows: bool = False,
    soft_wrap: bool = True,
    safe_box: bool = True,
) -> str:
    raw = io.BytesIO()
    file = io.TextIOWrapper(raw, encoding=encoding, errors="replace", write_through=True)
    console = Console(
        file=file,
        width=width,
        soft_wrap=soft_wrap,
        highlight=highlight,
        force_terminal=colour,
        color_system="truecolor" if colour else None,
        legacy_windows=legacy_windows,
        safe_box=safe_box,
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


def drawn_in_one_pass(table: Grid, width: int, colour: bool, **console: object) -> str:
    """The grid printed with its rich fallback made to fail: proof the fast path ran."""

    def refuse() -> None:
        raise AssertionError("fell back to rich's Table")

    fast = copy.copy(table)
    fast.table = refuse  # type: ignore[method-assign, assignment]
    return printed(fast, width, colour, **console)  # type: ignore[arg-type]


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_the_metric_table_is_rich_s_table(colour: bool, encoding: str) -> None:
    table = grid(ROWS)
    expected = printed(table.table(), 80, colour, encoding)
    assert drawn_in_one_pass(table, 80, colour, encoding=encoding) == expected
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
        ("group = 1", CAPTION, 64),  # ROWS' table is 65 wide: one short
        ("group = 1", CAPTION, 65),
    ],
)
@pytest.mark.parametrize("colour", [False, True])
def test_titles_captions_and_widths(title: str, caption: str, width: int, colour: bool) -> None:
    table = grid(ROWS, title, caption)
    assert printed(table, width, colour) == printed(table.table(), width, colour)


def test_the_grid_is_drawn_exactly_when_it_fits() -> None:
    """ROWS' natural width: 13 + 9 + 5 × 7 columns with padding, 8 borders = 65."""
    assert drawn_in_one_pass(grid(ROWS), 65, False) == printed(grid(ROWS).table(), 65, False)
    assert len(printed(grid(ROWS), 65, False).splitlines()[1]) == 65
    with pytest.raises(AssertionError, match="fell back"):
        drawn_in_one_pass(grid(ROWS), 64, False)


@pytest.mark.parametrize("colour", [False, True])
def test_centred_string_annotations_as_rich_styles_and_highlights_them(colour: bool) -> None:
    """rich's defaults: title and caption centred (which a soft-wrapping console, like
    the CLI's, does not pad); a string is parsed as markup, styled ``table.title`` /
    ``table.caption``, and never highlighted even by a console that highlights (numbers
    in a caption would otherwise turn colour)."""
    table = Grid(
        COLUMNS, ROWS, title="[b]runs[/b] at 12.5 req/s", caption="p99 over 3,899 requests"
    )
    for soft_wrap in (True, False):
        expected = printed(table.table(), 80, colour, highlight=True, soft_wrap=soft_wrap)
        drawn = drawn_in_one_pass(table, 80, colour, highlight=True, soft_wrap=soft_wrap)
        assert drawn == expected
    lines = Text.from_ansi(expected).plain.splitlines()
    assert lines[0].startswith(" " * 10) and lines[-1].startswith(" " * 10)  # centred
    if colour:
        assert "\x1b[1;3mruns" in expected  # bold from the markup, italic from table.title


@pytest.mark.parametrize("safe_box", [True, False])
def test_a_legacy_windows_console_gets_rich_s_safe_box(safe_box: bool) -> None:
    expected = printed(grid(ROWS).table(), 80, False, legacy_windows=True, safe_box=safe_box)
    assert ("┌" in expected) is safe_box and ("┏" in expected) is not safe_box
    drawn = drawn_in_one_pass(grid(ROWS), 80, False, legacy_windows=True, safe_box=safe_box)
    assert drawn == expected


def test_left_justified_annotations_pad_as_rich_pads_them() -> None:
    """Without soft wrapping rich pads a left-justified title to the table's width."""
    expected = printed(grid(ROWS).table(), 80, True, soft_wrap=False)
    assert drawn_in_one_pass(grid(ROWS), 80, True, soft_wrap=False) == expected
    assert Text.from_ansi(expected).plain.splitlines()[0] == "group = 1".ljust(65)


def test_rich_draws_what_does_not_fit_or_is_not_one_line() -> None:
    assert printed(grid(ROWS), 40, False) == printed(grid(ROWS).table(), 40, False)
    with pytest.raises(AssertionError, match="fell back"):
        drawn_in_one_pass(grid(ROWS), 40, False)
    marked = Grid([GridColumn("[bold]metric[/bold]"), *COLUMNS[1:]], ROWS)
    assert printed(marked, 80, True) == printed(marked.table(), 80, True)
    with pytest.raises(AssertionError, match="fell back"):  # a header is markup
        drawn_in_one_pass(marked, 80, False)
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


@pytest.mark.parametrize(
    "table",
    [
        Grid([GridColumn(":smile: count"), *COLUMNS[1:]], ROWS),  # an emoji code in a header
        Grid([], []),  # no columns: rich prints a blank line
        Grid(COLUMNS, [ROWS[0][:5]]),  # a short row: rich pads it with empty cells
        Grid(COLUMNS, [[*ROWS[0], "extra"]]),  # a long row: rich adds a column
    ],
    ids=["emoji header", "no columns", "short row", "long row"],
)
def test_what_only_rich_can_lay_out_is_left_to_rich(table: Grid) -> None:
    assert printed(table, 80, True) == printed(table.table(), 80, True)
    with pytest.raises(AssertionError, match="fell back"):
        drawn_in_one_pass(table, 80, False)


def test_a_grid_measures_as_rich_s_table_inside_a_panel() -> None:
    from rich.panel import Panel

    table = grid(ROWS)
    assert printed(Panel.fit(table), 100, False) == printed(Panel.fit(table.table()), 100, False)


def test_a_column_is_justified_left_or_right() -> None:
    with pytest.raises(ValueError, match="'left' or 'right'"):
        GridColumn("x", justify="center")  # type: ignore[arg-type]


def test_a_recording_console_keeps_the_styles() -> None:
    """Without colour the grid prints whole lines, but a recording console exports styles:
    there it draws the styled cells as rich does."""
    exported = []
    for renderable in (grid(ROWS), grid(ROWS).table()):
        console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
        console.print(renderable)
        exported.append(console.export_html(inline_styles=True))
    assert exported[0] == exported[1]
    assert "font-weight: bold" in exported[0]
