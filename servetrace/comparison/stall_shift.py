"""Where the two runs' ITL stalls come from (``compare --steps``): each side's share of the
excess by cause, overall and in its own tail (gaps at or above its ITL p99), and the
change, candidate − baseline, in points of share. A side without steps or without a
decode-step baseline is unavailable, with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from servetrace.analysis.stall_causes import CAUSES

if TYPE_CHECKING:
    from servetrace.analysis.stalls import Stalls

GROUPS = ("overall", "tail")


@dataclass(frozen=True)
class StallSide:
    """One run's shares (`Stalls.shares`, `Stalls.tail_shares`), or why it has none."""

    steps_file: str | None
    overall: dict[str, Any]
    tail: dict[str, Any]
    unavailable: str | None = None


@dataclass(frozen=True)
class StallShift:
    baseline: StallSide
    candidate: StallSide

    def change(self, group: str, cause: str) -> float | None:
        """Candidate − baseline share of ``cause`` in ``group`` (None where a side has none)."""
        key = f"{cause}_share"
        a = getattr(self.baseline, group).get(key)
        b = getattr(self.candidate, group).get(key)
        return None if a is None or b is None else b - a


def _side(stalls: Stalls | None) -> StallSide:
    if stalls is None:
        return StallSide(None, {}, {}, "no --steps for this run")
    if stalls.fit.unavailable is not None:
        return StallSide(
            stalls.steps_file, {}, {}, f"no decode-step baseline: {stalls.fit.unavailable}"
        )
    return StallSide(stalls.steps_file, stalls.shares(), stalls.tail_shares())


def stall_shift(base: Stalls | None, cand: Stalls | None) -> StallShift | None:
    """The two sides' stall shares; None when neither run has steps."""
    if base is None and cand is None:
        return None
    return StallShift(_side(base), _side(cand))


__all__ = ["CAUSES", "GROUPS", "StallShift", "StallSide", "stall_shift"]
