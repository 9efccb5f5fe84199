"""``sources.normalise.with_event_kinds``: a decoded event column of canonical kinds is
cast to the Enum at once; anything else is left for ``_normalise_event`` to map or name."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.dtypes import EVENT_DTYPE
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.normalise import with_event_kinds

KINDS = ["arrival", "first_token", "token", "completion"]


@pytest.mark.parametrize("dtype", [pl.String, pl.Categorical])
def test_canonical_kinds_are_cast_to_the_enum(dtype: pl.DataType) -> None:
    frame = pl.DataFrame({"event": pl.Series(KINDS, dtype=dtype), "ts": [0, 1, 2, 3]})
    got = with_event_kinds(frame, IngestOptions())
    assert got.schema["event"] == EVENT_DTYPE
    assert got["event"].cast(pl.String).to_list() == KINDS
    assert got["ts"].to_list() == [0, 1, 2, 3]


def test_a_mapped_event_column_is_cast_under_its_file_name() -> None:
    frame = pl.DataFrame({"kind": KINDS, "event": ["not", "the", "event", "column"]})
    got = with_event_kinds(frame, IngestOptions(columns={"event": "kind"}))
    assert got.schema["kind"] == EVENT_DTYPE
    assert got.schema["event"] == pl.String


@pytest.mark.parametrize(
    ("values", "options"),
    [
        (["arrival", "TOKEN"], IngestOptions()),  # an alias in another case: mapped later
        (["arrival", "tok"], IngestOptions()),  # unknown: named later
        (KINDS, IngestOptions(event_map={"tok": "token"})),  # the map applies to every value
        ([0, 3], IngestOptions()),  # not text
    ],
)
def test_anything_else_is_left_as_it_is(values: list[object], options: IngestOptions) -> None:
    frame = pl.DataFrame({"event": values})
    got = with_event_kinds(frame, options)
    assert got.schema == frame.schema and got.equals(frame)
