"""Typed access to the fields of a tool's records, with errors that name the file, the
record and the field; every time and integer is range-checked (``MAX_ABS_NS``) before
any Int64 arithmetic, so no value wraps around.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS
from servetrace.sources.reading import describe_json
from servetrace.units import TIME_UNITS

_MISSING = object()


class Fields:
    """Typed access to fields of one file's records, with errors naming file/record/field.

    ``where`` describes the record (``"record 12 (line 13)"``); ``dotted`` names the field
    (``"metrics.ttft.value"``).
    """

    def __init__(self, path: Path, fmt_label: str) -> None:
        self.path = path
        self.label = fmt_label

    def error(self, where: str, message: str, hint: str | None = None) -> InputError:
        return InputError(f"{self.path}: {where}: {message}", hint=hint)

    def record(self, value: Any, where: str) -> dict[str, Any]:
        """``value`` when it is a JSON object (a record, a block of records), else the error."""
        if not isinstance(value, dict):
            raise self.error(where, f"expected an object ({describe_json(value)})")
        return value

    def lookup(self, obj: Any, dotted: str) -> Any:
        current = obj
        for key in dotted.split("."):
            if not isinstance(current, Mapping) or key not in current:
                return _MISSING
            current = current[key]
        return current

    def get(self, obj: Any, dotted: str) -> Any:
        """The field's value, or None when it is absent (no type check)."""
        value = self.lookup(obj, dotted)
        return None if value is _MISSING else value

    def text(self, obj: Any, dotted: str) -> str | None:
        """The field's value as text (an id, a message, whatever its JSON type), or None."""
        value = self.get(obj, dotted)
        return None if value is None else str(value)

    def _get(self, obj: Any, dotted: str, where: str, required: bool) -> Any:
        value = self.lookup(obj, dotted)
        if value is _MISSING or value is None:
            if required:
                raise self.error(where, f"missing field '{dotted}' in this {self.label} record")
            return None
        return value

    def number(
        self,
        obj: Any,
        dotted: str,
        where: str,
        *,
        required: bool = True,
        minimum: float | None = None,
        unit_ns: int | None = None,
    ) -> float | int | None:
        """A finite number; with ``unit_ns`` (ns per unit) a time that fits MAX_ABS_NS."""
        value = self._get(obj, dotted, where, required)
        if value is None:
            return None
        given = value
        if isinstance(value, str):
            # Some tools write special floats as strings ("inf", "nan").
            try:
                value = float(value)
            except ValueError:
                value = None
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(where, f"field '{dotted}' must be a number, got {_show(given)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(where, f"field '{dotted}' must be finite, got {value}")
        if minimum is not None and value < minimum:
            raise self.error(where, f"field '{dotted}' must be >= {minimum:g}, got {value}")
        if unit_ns is not None:
            self.check_time(value, unit_ns, dotted, where)
        return value

    def check_time(self, value: float, unit_ns: int, dotted: str, where: str) -> None:
        """A time or duration must fit ±MAX_ABS_NS once in ns: no Int64 wraps later."""
        if abs(value) * unit_ns >= MAX_ABS_NS:
            raise self.error(
                where,
                f"field '{dotted}' is {value:.4g} ({abs(value) * unit_ns:.3g} ns), beyond "
                "the ±4.6e18 ns (±146 years) a time may span",
                hint="is the file from the tool and version it claims to be?",
            )

    def integer(
        self, obj: Any, dotted: str, where: str, *, required: bool = True, unit_ns: int = 1
    ) -> int | None:
        """A whole number; every integer field (ns times, counts, codes) must fit
        ±MAX_ABS_NS once scaled by ``unit_ns``, so no later sum or difference wraps."""
        value = self.number(obj, dotted, where, required=required, unit_ns=unit_ns)
        if value is None:
            return None
        if isinstance(value, float):
            if not value.is_integer():
                raise self.error(where, f"field '{dotted}' must be a whole number, got {value}")
            return int(value)
        return value

    def first_integer(self, where: str, *candidates: tuple[Any, str]) -> int | None:
        """The first present ``integer`` among ``(object, dotted)`` candidates, or None."""
        for obj, dotted in candidates:
            value = self.integer(obj, dotted, where, required=False)
            if value is not None:
                return value
        return None

    def string(self, obj: Any, dotted: str, where: str, *, required: bool = True) -> str | None:
        return self._typed(obj, dotted, where, required, str, "a string")

    def mapping(
        self, obj: Any, dotted: str, where: str, *, required: bool = True
    ) -> Mapping[str, Any] | None:
        return self._typed(obj, dotted, where, required, Mapping, "an object")

    def array(
        self, obj: Any, dotted: str, where: str, *, required: bool = True
    ) -> list[Any] | None:
        return self._typed(obj, dotted, where, required, list, "a list")

    def _typed(
        self, obj: Any, dotted: str, where: str, required: bool, kind: type, what: str
    ) -> Any:
        value = self._get(obj, dotted, where, required)
        if value is not None and not isinstance(value, kind):
            raise self.error(where, f"field '{dotted}' must be {what}, got {_show(value)}")
        return value

    def float_lists(
        self,
        lists: Sequence[list[Any] | None],
        dotted: str,
        where_of: Callable[[int], str],
    ) -> pl.Series:
        """One List[Float64] column from per-record lists, checked in Polars: an element
        that is not a finite number is reported with its record (``where_of(index)``).
        Times are range-checked when converted to ns (``times.checked_ns``)."""
        series = pl.Series(dotted, lists, dtype=pl.List(pl.Float64), strict=False)
        bad = series.list.eval(pl.element().is_null() | ~pl.element().is_finite()).list.any()
        bad_rows = bad.fill_null(False).arg_true()
        if len(bad_rows):
            index = int(bad_rows[0])
            values = lists[index] or []
            offender = next(
                (v for v in values if not _is_number(v) or not math.isfinite(float(v))), None
            )
            raise self.error(
                where_of(index),
                f"field '{dotted}' must hold finite numbers, found {_show(offender)}",
            )
        return series

    def column(
        self,
        values: Sequence[Any],
        dotted: str,
        where_of: Callable[[int], str],
        *,
        integer: bool = False,
        nullable: bool = True,
        minimum: float | None = None,
    ) -> pl.Series:
        """One Float64 (or Int64 when ``integer``) column from per-record values, checked in
        Polars; a value that is not a finite (whole) number is reported with its record.
        Times are range-checked when converted to ns (``times.checked_ns``)."""
        floats = pl.Series(dotted, values, dtype=pl.Float64, strict=False)
        given = pl.Series([v is not None for v in values], dtype=pl.Boolean)
        bad = (given & floats.is_null()) | (floats.is_not_null() & ~floats.is_finite())
        if integer:
            bad = bad | (floats.is_not_null() & (floats != floats.floor()))
        if not nullable:
            bad = bad | ~given
        if minimum is not None:
            bad = bad | (floats.is_not_null() & (floats < minimum))
        # Whole numbers are ns or counts: within 2^62, no later sum or difference wraps.
        limit = MAX_ABS_NS
        bad = bad | (floats.is_not_null() & (floats.abs() >= limit))
        bad_rows = bad.fill_null(True).arg_true()
        if len(bad_rows):
            index = int(bad_rows[0])
            value = values[index]
            what = "a whole number" if integer else "a finite number"
            if minimum is not None:
                what += f" >= {minimum:g}"
            what += f" below {limit:.3g}"
            if value is None:
                raise self.error(where_of(index), f"missing value in field '{dotted}'")
            raise self.error(
                where_of(index), f"field '{dotted}' must be {what}, got {_show(value)}"
            )
        return floats.cast(pl.Int64) if integer else floats

    def struct_lists(
        self,
        lists: Sequence[list[Any] | None],
        dtype: pl.List,
        dotted: str,
        where_of: Callable[[int], str],
        *,
        time_fields: Sequence[str] = (),
    ) -> pl.Series:
        """One List[Struct] column from per-record lists of objects (GenAI-Perf
        ``response_outputs``, AIPerf raw ``responses``). When Polars refuses the data (an
        element that is not an object, a field of the wrong type, 2^70 in an Int64), the
        records are looked at in Python, only then, to name the record and element;
        ``time_fields`` (integer ns) must fit MAX_ABS_NS."""
        try:
            series = pl.Series(dotted, lists, dtype=dtype, strict=False)
        except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError) as error:
            raise self._struct_problem(lists, dtype, dotted, where_of, error) from None
        for name in time_fields:
            values = series.list.eval(pl.element().struct.field(name).abs() >= MAX_ABS_NS)
            bad = values.list.any().fill_null(False).arg_true()
            if len(bad):
                index = int(bad[0])
                raise self.error(
                    where_of(index),
                    f"field '{dotted}[].{name}' holds a time beyond the ±4.6e18 ns "
                    "(±146 years) a time may span",
                )
        return series

    def _struct_problem(
        self,
        lists: Sequence[list[Any] | None],
        dtype: pl.List,
        dotted: str,
        where_of: Callable[[int], str],
        error: BaseException,
    ) -> InputError:
        inner = dtype.inner
        fields = inner.to_schema() if isinstance(inner, pl.Struct) else {}
        for index, items in enumerate(lists):
            for k, item in enumerate(items or []):
                name = f"{dotted}[{k}]"
                if not isinstance(item, Mapping):
                    return self.error(
                        where_of(index), f"field '{name}' must be an object, got {_show(item)}"
                    )
                for key, kind in fields.items():
                    value = item.get(key)
                    if value is None:
                        continue
                    if kind.is_integer():
                        fits = _is_number(value) and float(value).is_integer()
                        if not fits or abs(value) >= MAX_ABS_NS:
                            return self.error(
                                where_of(index),
                                f"field '{name}.{key}' must be a whole number within "
                                f"±4.6e18, got {_show(value)}",
                            )
                    elif kind == pl.Utf8 and not isinstance(value, str):
                        return self.error(
                            where_of(index),
                            f"field '{name}.{key}' must be a string, got {_show(value)}",
                        )
                    elif kind.is_nested() and not isinstance(value, list):
                        return self.error(
                            where_of(index),
                            f"field '{name}.{key}' must be a list, got {_show(value)}",
                        )
        return InputError(f"{self.path}: field '{dotted}' cannot be read: {error}")

    def unit_scale(self, unit: Any, dotted: str, where: str) -> int:
        """Nanoseconds per ``unit`` (``ns``, ``us``, ``ms``, ``s``/``sec``)."""
        name = {"sec": "s", "second": "s", "seconds": "s", "µs": "us"}.get(unit, unit)
        if not isinstance(name, str) or name not in TIME_UNITS:
            raise self.error(
                where,
                f"field '{dotted}' has unit {_show(unit)}; expected one of "
                + ", ".join(TIME_UNITS),
            )
        return TIME_UNITS[name]


Column = tuple[Any, Callable[[Any], Any]]
"""A column of ``record_frame``: its Polars type, and how to get its value from a record."""


def record_frame(records: Sequence[Any], columns: Mapping[str, Column]) -> pl.DataFrame:
    """One row per record, one column per entry of ``columns``; read record by record, so
    the first bad value in the file is the one reported."""
    rows = [[get(record) for _, get in columns.values()] for record in records]
    return pl.DataFrame(
        {name: [row[i] for row in rows] for i, name in enumerate(columns)},
        schema={name: dtype for name, (dtype, _) in columns.items()},
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
