"""Foreign times → Int64 ns, as Polars expressions.

A time is converted once, by :func:`float_to_ns`, which rounds each value once; gaps are
accumulated in integer nanoseconds afterwards (:func:`cumulative_ticks`), so a sum of gaps
is exact.
"""

from __future__ import annotations

import polars as pl


def float_to_ns(expr: pl.Expr, scale: int | pl.Expr) -> pl.Expr:
    """A float time in some unit → Int64 ns, rounded once.

    The integer part and the fraction are scaled separately, so epoch seconds
    (1.7e9 s) keep every digit the float has instead of losing ~100 ns to the product.
    """
    whole = expr.floor()
    scale_expr = scale if isinstance(scale, pl.Expr) else pl.lit(scale, dtype=pl.Int64)
    return whole.cast(pl.Int64) * scale_expr + ((expr - whole) * scale_expr.cast(pl.Float64)).round(
        0
    ).cast(pl.Int64)


def cumulative_ticks(first_ns: pl.Expr, gaps_ns: pl.Expr) -> pl.Expr:
    """Absolute tick times: the first token, then the first token plus the running sum of
    the gaps (integer ns, so the last tick is exactly first + Σgaps). Null when there is no
    first token."""
    return (
        pl.when(first_ns.is_not_null())
        .then(
            pl.concat_list(
                first_ns, gaps_ns.fill_null(pl.lit([], dtype=pl.List(pl.Int64)))
            ).list.eval(pl.element().cum_sum())
        )
        .otherwise(None)
    )
