"""Fit a table to a terminal: leave out columns, least needed first, until it fits, and
say which were left out (a table squeezed by rich into ``q…`` cells says nothing)."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

# The text every shortened table ends with: where the whole table is.
EVERY_COLUMN = "(every column: -f csv or json)"


def plain_frame(columns: int) -> int:
    """Characters a plain table adds to its cells: two spaces between columns."""
    return 2 * (columns - 1)


def boxed_frame(columns: int) -> int:
    """Characters rich's boxed table adds: a border and a space each side of every cell."""
    return 3 * columns + 1


def fit_columns(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    drop_order: Sequence[str],
    frame: Callable[[int], int] = plain_frame,
) -> tuple[list[int], list[str]]:
    """The indices of the columns to show, and the heads of those left out, in order.

    Columns named in ``drop_order`` go first to last until the table is ``width`` wide or
    narrower; the others always stay.
    """
    widths = [max(len(head), *(len(row[i]) for row in rows)) for i, head in enumerate(heads)]
    kept = list(range(len(heads)))
    cut: list[str] = []
    for head in drop_order:
        if sum(widths[i] for i in kept) + frame(len(kept)) <= width:
            break
        if head in heads and heads.index(head) in kept:
            kept.remove(heads.index(head))
            cut.append(head)
    return kept, cut


def left_out_line(cut: Sequence[str], width: int) -> str:
    return f"left out to fit {width} columns: {', '.join(cut)} {EVERY_COLUMN}"


def plain_lines(rows: Sequence[Sequence[str]], right: Container[int] = ()) -> list[str]:
    """Rows as plain text columns two spaces apart (``plain_frame``), each as wide as its
    widest cell, left-aligned but for the columns in ``right``; no trailing spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
