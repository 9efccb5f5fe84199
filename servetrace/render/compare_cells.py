"""The cells of a comparison, shared by its table and its Markdown: p-values, intervals,
factors, row keys and the one-line summaries of hidden and unavailable rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from servetrace.analysis.errors import errors_phrase
from servetrace.analysis.unavailable import phrase
from servetrace.comparison.compare import Comparison
from servetrace.render.compare_words import display_rows


def p_text(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def ci_text(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    if not (math.isfinite(low) or math.isfinite(high)):
        return "-"  # a ratio from zero: no finite bound to show
    return f"{factor_text(low)}-{factor_text(high)}"


def factor_text(value: float) -> str:
    if not math.isfinite(value):
        return "inf"
    return f"{value:.3f}" if value < 10 else f"{value:.3g}"


def row_key(row: Mapping[str, Any]) -> str:
    return f"{row['metric']}.{row['stat']}"


def change_text(row: Mapping[str, Any]) -> str:
    return str(row["words"]) if row["significant"] else "no significant change"


def shown_rows(
    comparison: Comparison, verbose: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The rows a table speaks of, those it lists (the significant ones; every one with
    ``verbose``) and the keys of those it folds into one line. A row a side cannot express
    is not "no significant change": it is left to the unavailable line."""
    rows = [r for r in display_rows(comparison) if r["significant"] or r["unavailable"] is None]
    shown = [r for r in rows if r["significant"] or verbose]
    hidden = [row_key(r) for r in rows if not (r["significant"] or verbose)]
    return rows, shown, hidden


def errored_line(comparison: Comparison) -> str | None:
    """``Errored (failed, not cancelled): baseline none; candidate 130 × HTTP 429``."""
    base, cand = comparison.errors
    if not base and not cand:
        return None
    return (
        "Errored (failed, not cancelled): baseline "
        + (errors_phrase(base) if base else "none")
        + "; candidate "
        + (errors_phrase(cand) if cand else "none")
    )


def unavailable_line(comparison: Comparison) -> str:
    """``Unavailable: itl (request-level export), preemptions (client trace)``."""
    return "Unavailable: " + phrase(comparison.unavailable)


def hidden_line(hidden: Sequence[str], total: int) -> str:
    if len(hidden) == total:
        return f"No significant change in any of the {total} statistics compared."
    return f"No significant change ({len(hidden)}): " + ", ".join(hidden)


def negligible(value: float | None) -> bool:
    return value is None or abs(value) < 1e-6


def tidy(value: float | None) -> float | None:
    """Float noise of a sum of means shows as 0."""
    return 0.0 if value is not None and abs(value) < 1e-9 else value
