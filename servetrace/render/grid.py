"""A rich ``Table`` of one-line text cells, drawn in one pass when it fits.

rich lays out every cell of a ``Table`` through ``Padding``, measurement and word
wrapping: ~6 ms for the 11-row metric table of ``analyze``, so ``--by`` over 300 groups
spent ~2 s of a ~3 s run printing (the report itself takes ~0.1 s to build). When every
column fits at its natural width — each cell one line of plain text, the table no wider
than the console — there is nothing to wrap or shrink, and the grid is drawn here from
the same box characters, widths, justification and styles rich would use; the title and
caption still go through rich (they may wrap to the table's width). Anything else is
handed to the ``Table`` itself. ``tests/render/test_grid.py`` holds the two to the same
bytes, in colour and without, with the rich the tests run on (CI installs the newest;
rich 13.8.0, the oldest typer 0.28 accepts, and 13.9.4 passed them too in s20).
Callers pass full rows of plain one-line strings; anything else falls back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class GridColumn:
    header: str
    justify: Literal["left", "right"] = "left"
    style: str = ""

    def __post_init__(self) -> None:
        if self.justify not in ("left", "right"):  # the one-pass drawing knows these two
            raise ValueError(f"GridColumn justify must be 'left' or 'right', not {self.justify!r}")


class Grid:
    """``Table(title=, caption=, title_justify=, caption_justify=)`` with ``columns`` and
    ``rows`` of plain strings, in rich's default look (heavy head, padding 1, edges)."""

    def __init__(
        self,
        columns: Sequence[GridColumn],
        rows: Iterable[Sequence[str]],
        title: Text | str | None = None,
        caption: Text | str | None = None,
        title_justify: str = "center",
        caption_justify: str = "center",
    ) -> None:
        self.columns = tuple(columns)
        self.rows = [tuple(row) for row in rows]
        self.title, self.caption = title, caption
        self.title_justify, self.caption_justify = title_justify, caption_justify

    def table(self) -> Table:
        """The same table as rich builds it: the fallback, and the reference in tests."""
        table = Table(
            title=self.title,
            caption=self.caption,
            title_justify=self.title_justify,  # type: ignore[arg-type]
            caption_justify=self.caption_justify,  # type: ignore[arg-type]
        )
        for column in self.columns:
            table.add_column(column.header, justify=column.justify, style=column.style)
        for row in self.rows:
            table.add_row(*map(Text, row))
        return table

    def _widths(self, max_width: int) -> list[int] | None:
        """Each column's width with its padding when the grid can be drawn in one pass at
        ``max_width``; None when rich must lay it out."""
        if not self.columns or any(len(row) != len(self.columns) for row in self.rows):
            return None  # rich prints a blank line for no columns, pads or adds to rows
        widths = []
        for index, column in enumerate(self.columns):
            cells = [column.header, *(row[index] for row in self.rows)]
            # a header is parsed as markup and emoji codes; rich splits a cell at a line
            # break, strips control codes, and trims the spaces at either end
            if "[" in column.header or ":" in column.header:
                return None
            if not all(cell.isprintable() and cell == cell.strip() for cell in cells):
                return None
            widths.append(max(map(_cell_width, cells)) + 2)
        return widths if _table_width(widths) <= max_width else None

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """rich's measure of the same table (a panel or a layout around the grid asks for
        its narrowest and widest; nothing on the hot path does)."""
        return Measurement.get(console, options, self.table())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(options.max_width)
        if widths is None:
            yield self.table()
            return
        table_width = _table_width(widths)
        boxes = box.HEAVY_HEAD.substitute(options, safe=console.safe_box)
        annotation_options = options.update(width=table_width, highlight=False, height=None)
        if self.title:
            yield from self._annotation(
                console, annotation_options, self.title, "table.title", self.title_justify
            )
        yield from self._grid(console, boxes, widths)
        if self.caption:
            yield from self._annotation(
                console, annotation_options, self.caption, "table.caption", self.caption_justify
            )

    @staticmethod
    def _annotation(
        console: Console, options: ConsoleOptions, text: Text | str, style: str, justify: str
    ) -> RenderResult:
        """As rich's ``Table.render_annotation``: a string is parsed as markup and styled."""
        if isinstance(text, str):
            text = console.render_str(text, style=style, highlight=False)
        return console.render(text, options=options.update(justify=justify))  # type: ignore[arg-type]

    def _grid(self, console: Console, boxes: box.Box, widths: list[int]) -> RenderResult:
        # without colour and recording the styles are dropped on output, so whole lines do
        plain = console.color_system is None and not console.record
        newline = Segment.line()
        header_style = console.get_style("table.header")
        styles = [console.get_style(column.style) for column in self.columns]
        yield Segment(boxes.get_top(widths))
        yield newline
        yield from self._row(
            [c.header for c in self.columns],
            widths,
            [header_style] * len(widths),
            (boxes.head_left, boxes.head_vertical, boxes.head_right),
            plain,
        )
        yield Segment(boxes.get_row(widths, "head", edge=True))
        yield newline
        last = len(self.rows) - 1
        for index, row in enumerate(self.rows):
            edges = (
                (boxes.foot_left, boxes.foot_vertical, boxes.foot_right)
                if index == last
                else (boxes.mid_left, boxes.mid_vertical, boxes.mid_right)
            )
            yield from self._row(row, widths, styles, edges, plain)
        yield Segment(boxes.get_bottom(widths))
        yield newline

    def _row(
        self,
        cells: Sequence[str],
        widths: list[int],
        styles: list[Style],
        edges: tuple[str, str, str],
        plain: bool,
    ) -> RenderResult:
        left, divider, right = edges
        padded = []
        for cell, width, column in zip(cells, widths, self.columns, strict=True):
            room = " " * (width - 2 - _cell_width(cell))
            padded.append(f" {room + cell if column.justify == 'right' else cell + room} ")
        if plain:  # no styles reach the output: one segment per line
            yield Segment(left + divider.join(padded) + right + "\n")
            return
        yield Segment(left)
        for index, (text, style) in enumerate(zip(padded, styles, strict=True)):
            if index:
                yield Segment(divider)
            # three segments, as rich's Padding yields them: the same escape codes
            yield Segment(" ", style)
            yield Segment(text[1:-1], style)
            yield Segment(" ", style)
        yield Segment(right)
        yield Segment.line()


def _cell_width(text: str) -> int:
    """Terminal cells ``text`` takes: its length when ASCII (rich's ``cell_len`` otherwise)."""
    return len(text) if text.isascii() else cell_len(text)


def _table_width(widths: list[int]) -> int:
    """The columns (padding included) and the borders between and around them."""
    return sum(widths) + len(widths) + 1
