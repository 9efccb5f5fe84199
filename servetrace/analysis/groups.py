"""The group key every summary figure is computed over: the whole trace, or ``--by``.

A trace's summary is the summary of one group; ``--by policy`` runs the same code over a
key. Each request of a group carries the group's index (``CODE``); a figure is then one
Polars ``group_by`` on it (counts, sums, flags), or, for order statistics, one sort of
the sample by (group, value) with every group's values a contiguous slice of it
(``Sample``): a group's percentile, interval or Kaplan–Meier estimate is then the
one-sample function applied to its slice, so a group's figure is, bit for bit, the
figure of analysing the group alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.lifecycle import KEY

CODE = "_code"
Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Sample:
    """A column's non-null (non-NaN) values, sorted within each group, groups in order:
    group ``i`` is ``ordered[offsets[i]:offsets[i + 1]]``."""

    ordered: Array
    offsets: npt.NDArray[np.int64]

    def of(self, index: int) -> Array:
        return self.ordered[self.offsets[index] : self.offsets[index + 1]]

    @property
    def sizes(self) -> npt.NDArray[np.int64]:
        return np.diff(self.offsets)


@dataclass(frozen=True)
class Groups:
    """The groups of a summary: their values (report order) and each request's group.

    ``column`` is the request attribute grouped by (None: the whole trace, one group of
    value None). ``codes`` maps each grouped request's ``KEY`` to its group's index.
    """

    column: str | None
    values: tuple[Any, ...]
    codes: pl.DataFrame  # KEY, CODE

    @classmethod
    def whole(cls, requests: pl.DataFrame) -> Groups:
        return cls(None, (None,), requests.select(KEY, pl.lit(0, pl.Int64).alias(CODE)))

    @classmethod
    def by(cls, requests: pl.DataFrame, column: str) -> Groups:
        """One group per value of ``column``, nulls last."""
        values = requests[column].unique().sort(nulls_last=True).to_list()
        table = pl.DataFrame(
            {column: values, CODE: np.arange(len(values), dtype=np.int64)},
            schema={column: requests.schema[column], CODE: pl.Int64},
        )
        codes = requests.select(KEY, column).join(
            table, on=column, how="left", nulls_equal=True, maintain_order="left"
        )
        return cls(column, tuple(values), codes.select(KEY, CODE))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.values)))

    def coded(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` (rows with a ``KEY``) with its rows' group index; rows of requests in
        no group (invalid ones) are left out."""
        if self.column is None:
            return frame.with_columns(pl.lit(0, pl.Int64).alias(CODE))
        return frame.join(self.codes, on=KEY, how="inner", maintain_order="left")

    def rows(self, frame: pl.DataFrame, *exprs: pl.Expr) -> list[dict[str, Any] | None]:
        """``exprs`` aggregated per group of ``frame`` (coded), one dict per group in
        order; None for a group with no row in ``frame``."""
        out: list[dict[str, Any] | None] = [None] * len(self)
        if frame.height == 0:
            return out
        for row in frame.group_by(CODE).agg(*exprs).iter_rows(named=True):
            out[row.pop(CODE)] = row
        return out

    def sample(self, frame: pl.DataFrame, column: str) -> Sample:
        """The values of ``column`` in ``frame`` (coded), sorted within each group."""
        value = pl.col(column)
        kept = value.is_not_null()
        if frame.schema[column].is_float():
            kept &= ~value.is_nan()
        part = frame.select(CODE, column).filter(kept)
        if len(self) == 1:  # one group: one sort of the values (NumPy's, for integers)
            values = part[column].to_numpy()
            ordered = np.sort(values)
            return Sample(ordered, np.array([0, ordered.size], dtype=np.int64))
        # Sorted by value, then stably by group: half the time of one sort by both keys.
        part = part.sort(column).sort(CODE, maintain_order=True)
        return Sample(part[column].to_numpy(), self._offsets(part))

    def slices(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, npt.NDArray[np.int64]]:
        """``frame`` (coded) in group order, rows of a group in their order, and the
        offsets of each group's rows."""
        if len(self) > 1:
            frame = frame.sort(CODE, maintain_order=True)
        return frame, self._offsets(frame)

    def _offsets(self, ordered: pl.DataFrame) -> npt.NDArray[np.int64]:
        """Where each group's rows start in ``ordered`` (sorted by group), and the end."""
        sizes = np.bincount(ordered[CODE].to_numpy(), minlength=len(self))
        return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)

    def examples(self, frame: pl.DataFrame, shown: int) -> list[list[Any]]:
        """The first ``shown`` request ids of each group, earliest arrival first."""
        out: list[list[Any]] = [[] for _ in self]
        if frame.height == 0:
            return out
        ordered = frame.select(CODE, "arrival_ns", "request_id").sort(
            "arrival_ns", "request_id", nulls_last=True, maintain_order=True
        )
        heads = ordered.group_by(CODE, maintain_order=True).head(shown)
        for code, rid in heads.select(CODE, "request_id").iter_rows():
            out[code].append(rid)
        return out
