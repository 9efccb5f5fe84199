"""Foreign times → Int64 ns: the one conversion every importer uses, checked.

A time is converted once, by :func:`checked_ns` (or :func:`with_ns` over a frame's
columns), which rounds each value once and refuses, naming the file, the record and the
field, any value that is not finite or lies beyond ±``MAX_ABS_NS`` **once in ns**: the
canonical reader's guarantee, so no importer hands the analysis a time that wrapped
around Int64 (1e10 s is 1e19 ns, past 2^63). The range is judged on the converted value,
never in the file's unit, so seconds, microseconds and per-row units are held to the same
bound. Gaps are accumulated in integer nanoseconds afterwards (:func:`cumulative_ticks`),
so a sum of gaps is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS
from servetrace.units import TIME_UNITS

# Record index → where the error points, file included ("f.log: record 3 (line 4)").
Where = Callable[[int], str]

_UNIT_NAMES = {ns: name for name, ns in TIME_UNITS.items()}
_RANGE = "beyond the ±4.6e18 ns (±146 years) a time may span"


def ns_column(column: str) -> str:
    """The name :func:`with_ns` gives the ns column of ``column`` (``ttft_s`` → ``ttft_ns``)."""
    return column.removesuffix("_s") + "_ns"


def with_ns(
    frame: pl.DataFrame,
    fields: Mapping[str, str],
    unit_ns: int,
    where_of: Where,
    *,
    resolution_ns: int = 1,
) -> pl.DataFrame:
    """``frame`` plus, for each float column of ``fields`` (column → the field's name in
    the file), its Int64 ns column named by :func:`ns_column`, checked by
    :func:`checked_ns`."""
    return frame.with_columns(
        checked_ns(
            frame[column], unit_ns, where_of, field=field, resolution_ns=resolution_ns
        ).alias(ns_column(column))
        for column, field in fields.items()
    )


def checked_ns(
    values: pl.Series,
    unit_ns: int | pl.Series,
    where_of: Where,
    *,
    field: str | None = None,
    resolution_ns: int = 1,
) -> pl.Series:
    """Times (floats, whole numbers, or lists of floats) in a unit of ``unit_ns`` ns (one
    for all values, or one per row) → Int64 ns, floats rounded once to ``resolution_ns``,
    whole numbers converted exactly.

    Nulls stay null. A value that is NaN, infinite, or ±``MAX_ABS_NS`` or more once in ns
    raises ``InputError`` naming ``where_of(row)`` and ``field`` (default: the series'
    name): checked in Float64 before the Int64 cast, so nothing wraps.
    """
    field = field or values.name
    nested = isinstance(values.dtype, pl.List)
    scale = (
        unit_ns.cast(pl.Float64)
        if isinstance(unit_ns, pl.Series)
        else pl.repeat(float(unit_ns), len(values), dtype=pl.Float64, eager=True)
    )
    frame = pl.DataFrame(
        {"value": values.cast(pl.List(pl.Float64) if nested else pl.Float64), "scale": scale}
    )
    value, steps = pl.col("value"), pl.col("scale") / resolution_ns
    scaled = value * pl.col("scale")
    beyond = scaled.list.eval(_beyond(pl.element())).list.any() if nested else _beyond(scaled)
    bad = frame.select(beyond.fill_null(False)).to_series().arg_true()
    if len(bad):
        raise _refusal(frame.row(int(bad[0]), named=True), where_of(int(bad[0])), field)
    if values.dtype.is_integer() and resolution_ns == 1:
        # Whole numbers convert exactly (Float64 would lose the ns of epoch times).
        exact = values.cast(pl.Int64) * (
            unit_ns.cast(pl.Int64) if isinstance(unit_ns, pl.Series) else unit_ns
        )
        return exact.alias(values.name)
    # The integer part and the fraction are scaled separately, so epoch seconds (1.7e9 s)
    # keep every digit the float has instead of losing ~100 ns to the product.
    if nested:
        whole = value.list.eval(pl.element().floor())
        parts = whole.list.eval(pl.element().cast(pl.Int64)) * steps.round(0).cast(pl.Int64) + (
            (value - whole) * steps
        ).list.eval(pl.element().round(0).cast(pl.Int64))
    else:
        whole = value.floor()
        parts = whole.cast(pl.Int64) * steps.round(0).cast(pl.Int64) + (
            (value - whole) * steps
        ).round(0).cast(pl.Int64)
    return frame.select((parts * resolution_ns).alias(values.name)).to_series()


def _beyond(ns: pl.Expr) -> pl.Expr:
    return ns.is_not_null() & (~ns.is_finite() | (ns.abs() >= MAX_ABS_NS))


def _refusal(row: dict[str, object], where: str, field: str) -> InputError:
    value, scale = row["value"], row["scale"]
    assert isinstance(scale, float)
    named = f"field '{field}'"
    if isinstance(value, list):
        index, value = next(
            (k, v) for k, v in enumerate(value) if v is not None and _beyond_number(v * scale)
        )
        named += f" element {index}"
    assert isinstance(value, float)
    if not math.isfinite(value):
        return InputError(f"{where}: {named} must be a finite time, got {value}")
    unit = _UNIT_NAMES.get(int(scale), f"x {scale:g} ns")
    return InputError(
        f"{where}: {named} is {value:.6g} {unit} ({value * scale:.3g} ns), {_RANGE}",
        hint="is the file from the tool and version it claims, and in its units?",
    )


def _beyond_number(ns: float) -> bool:
    return not math.isfinite(ns) or abs(ns) >= MAX_ABS_NS


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
