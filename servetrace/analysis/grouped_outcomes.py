"""Each ``--by`` group's requests of one outcome: counts, tokens delivered, example ids and
the distribution of a time, over flat arrays.

``groups._ended`` and ``grouped_figures.examples``/``describe_groups`` (the Polars
reference) took, per outcome, a filter, a ``group_by``, a sort of every request of that
outcome and a ``group_by`` with quantiles: a dozen queries for cancelled, in-flight and
errored requests. Here the requests are ordered once by (group, arrival, id) — the order
``examples`` takes — and each outcome is a mask: its counts and token sums are
``bincount``s and exact int64 sums, its examples the first ``EXAMPLES_SHOWN`` of each
group in that order, its times described from one sort by (group, value)
(``grouped_gaps.describe_sample``). Groups are the codes ``CODE`` (positions in
``values``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.figures import CANCEL_STAGES, OUTCOMES
from servetrace.analysis.grouped_gaps import CODE, describe_sample
from servetrace.analysis.summary import EXAMPLES_SHOWN, Distribution
from servetrace.stats.grouped_moments import float_moments_of
from servetrace.stats.grouped_order import first_of_each_group, group_sums, sort_by_group

Mask = npt.NDArray[np.bool_]


# The flags ``summarize_groups`` asks for, taken in the one query of ``Outcomes.of``
# (each ``==`` of a Series is a query of its own: a dozen of them cost ~1 ms).
_PREFETCHED = {"outcome": OUTCOMES, "cancelled_in": CANCEL_STAGES}


@dataclass(frozen=True)
class Outcomes:
    """The requests of every group (``requests`` with ``CODE``), ordered for examples."""

    requests: pl.DataFrame
    values: Sequence[Any]
    code: npt.NDArray[np.int64]
    order: npt.NDArray[np.int64]  # rows by (group, arrival, id), nulls last, stable
    # (column, value) → rows whose ``column`` is ``value``; output tokens: unknown, or 0
    flags: dict[tuple[str, Any], Mask]
    tokens_unknown: Mask
    tokens: npt.NDArray[np.int64]

    @classmethod
    def of(cls, requests: pl.DataFrame, values: Sequence[Any]) -> Outcomes:
        wanted = [(c, v) for c, names in _PREFETCHED.items() if c in requests for v in names]
        tokens = pl.col("output_tokens")
        found = requests.select(
            pl.arg_sort_by(
                CODE, "arrival_ns", "request_id", nulls_last=True, maintain_order=True
            ).alias("_order"),
            tokens.is_null().alias("_unknown"),
            tokens.fill_null(0).alias("_tokens"),
            *[(pl.col(c) == v).fill_null(False).alias(f"_{i}") for i, (c, v) in enumerate(wanted)],
        )
        code = requests[CODE].to_numpy().astype(np.int64, copy=False)
        return cls(
            requests,
            values,
            code,
            found["_order"].to_numpy().astype(np.int64, copy=False),
            {key: found[f"_{i}"].to_numpy() for i, key in enumerate(wanted)},
            found["_unknown"].to_numpy(),
            found["_tokens"].to_numpy(),
        )

    def _is(self, column: str, value: Any) -> Mask:
        key = (column, value)
        if key not in self.flags:
            self.flags[key] = (self.requests[column] == value).fill_null(False).to_numpy()
        return self.flags[key]

    def mask(self, outcome: str) -> Mask:
        return self._is("outcome", outcome)

    def counts(self, column: str, names: Sequence[str]) -> dict[tuple[Any, str], int]:
        """``(value, name) → requests`` of each group whose ``column`` is each of
        ``names`` (``groups._pair_counts`` for those names; the others are left out)."""
        out: dict[tuple[Any, str], int] = {}
        for name in names:
            counted = self._count(self._is(column, name))
            out |= {(v, name): n for v, n in zip(self.values, counted, strict=True) if n}
        return out

    def _count(self, rows: Mask) -> list[int]:
        return np.bincount(self.code[rows], minlength=len(self.values)).tolist()

    def ended(self, rows: Mask, with_error: Mask | None = None) -> dict[Any, dict[str, Any]]:
        """Per value: ``count``, ``tokens`` (the output tokens of the rows, None when one
        is unknown), ``uncounted`` and ``with_error`` (rows also in ``with_error``)."""
        unknown = self.tokens_unknown
        known = rows & ~unknown
        sums = group_sums(self.code, self.tokens, known, len(self.values))
        count, uncounted = self._count(rows), self._count(rows & unknown)
        errors = self._count(rows & with_error) if with_error is not None else [0] * len(count)
        return {
            value: {
                "count": count[c],
                "tokens": int(sums[c]) if not uncounted[c] else None,
                "uncounted": uncounted[c],
                "with_error": errors[c],
            }
            for c, value in enumerate(self.values)
        }

    def examples(self, rows: Mask) -> dict[Any, list[Any]]:
        """The first ``EXAMPLES_SHOWN`` request ids of each group's ``rows``, earliest
        arrival first (``grouped_figures.examples``)."""
        picked = self.order[rows[self.order]]
        taken = first_of_each_group(picked, self.code, len(self.values), EXAMPLES_SHOWN)
        ids = self.requests["request_id"].gather(pl.Series(taken)).to_list()
        out: dict[Any, list[Any]] = {}
        for c, rid in zip(self.code[taken].tolist(), ids, strict=True):
            out.setdefault(self.values[c], []).append(rid)
        return out

    def describe(self, rows: Mask, times: pl.Series) -> dict[Any, Distribution]:
        """``describe`` of each group's known ``times`` among ``rows`` (NaNs left out)."""
        if not rows.any():  # every group empty (errors are rare): no queries of ``times``
            none = np.zeros(0, np.int64)
            return describe_sample(sort_by_group(none, none, len(self.values)), self.values)
        keep = rows & times.is_not_null().to_numpy()
        if times.dtype.is_float():
            keep &= ~times.is_nan().fill_null(True).to_numpy()
        sample = sort_by_group(
            self.code[keep], times.fill_null(0).to_numpy()[keep], len(self.values)
        )
        moments = float_moments_of(sample) if times.dtype.is_float() else None
        return describe_sample(sample, self.values, moments)


def error_flags(requests: pl.DataFrame, failed: pl.Expr) -> Mask:
    """``figures.failed`` of each request, as a mask (the expression may be a literal)."""
    flags = requests.select(failed.alias("_failed")).to_series()
    if flags.len() != requests.height:
        return np.full(requests.height, bool(flags[0]) if flags.len() else False)
    return flags.fill_null(False).to_numpy()
