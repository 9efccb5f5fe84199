"""The queue order of ``--policy priority``: a per-request attribute of the trace.

The attribute is a column of the canonical trace (a ``priority`` or tier column, carried
to the per-request frame like every attribute). Lower values run first, by arrival
within a level. A number orders by value; text orders only if every value reads as a
number (a JSON export may carry ``"2"``), since ``gold`` < ``silver`` by spelling says
nothing about which tenant comes first. A request without a value waits behind every
level, as an unlabelled request would behind every labelled class.
"""

from __future__ import annotations

import polars as pl

from servetrace.errors import UsageError
from servetrace.sim.workloads import PRIORITY


def priority_values(requests: pl.DataFrame, attribute: str, label: str) -> pl.Series:
    """``attribute`` of each request as a Float64 ``priority`` (null: no value), or a
    usage error naming the trace, the attribute and what is wrong with it."""
    flag = f"--priority-by {attribute}"
    if attribute not in requests.columns:
        raise UsageError(
            f"{label}: {flag}: the trace has no attribute {attribute!r}",
            hint="a priority is a per-request column of the trace (e.g. priority or tier)",
        )
    column = requests[attribute]
    if column.dtype == pl.String:
        numbers = column.str.strip_chars().cast(pl.Float64, strict=False)
        bad = column.is_not_null() & numbers.is_null()
        if bad.any():
            first = requests.filter(bad).row(0, named=True)
            raise UsageError(
                f"{label}: {flag}: request {first['request_id']!r} has {attribute} "
                f"{first[attribute]!r}, not a number: the queue order needs numbers",
                hint=f"rank the levels in a numeric column (0 runs first) and give that to {flag}",
            )
        column = numbers
    elif not (column.dtype.is_numeric() or column.dtype in (pl.Boolean, pl.Null)):
        raise UsageError(
            f"{label}: {flag}: {attribute} is {column.dtype}, not a number",
            hint="the queue order needs a numeric attribute (lower runs first)",
        )
    values = column.cast(pl.Float64)
    values = values.fill_nan(None).alias(PRIORITY)
    if values.null_count() == values.len():
        raise UsageError(f"{label}: {flag}: no completed request has a value for {attribute}")
    return values
