"""When not to trust a comparison: too few requests, unreliable tails, no pairs.

Each caveat is data (a kind and its numbers); ``servetrace.render.compare_words`` words
it. A workload that does not pair is a caveat of its own, read from the
``WorkloadMatch`` by the renderer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servetrace.comparison.population import Population
from servetrace.comparison.workload import WorkloadMatch
from servetrace.stats.names import percentile_of
from servetrace.stats.verdicts import MIN_SAMPLES

# Below this many values above a percentile, the percentile is flagged as unreliable.
TAIL_VALUES = 10

CaveatKind = Literal[
    "unpaired_workload",  # the workloads differ: differences may come from the load
    "no_paired_completions",  # paired, but no request completed in both traces
    "no_completed",  # ``side`` has no completed request
    "few_completed",  # ``side`` has ``n`` completed requests, fewer than ``need``
    "unreliable_tail",  # ``stat`` rests on fewer than ``tail`` requests above it
]
Side = Literal["baseline", "candidate"]


@dataclass(frozen=True)
class Caveat:
    kind: CaveatKind
    side: Side | None = None
    stat: str | None = None
    n: int | None = None
    need: int | None = None
    tail: int | None = None


def caveats(match: WorkloadMatch, population: Population, stats: Sequence[str]) -> list[Caveat]:
    """Every reason to read the comparison with care, in report order."""
    out: list[Caveat] = []
    if not match.paired:
        out.append(Caveat("unpaired_workload"))
    sides: tuple[tuple[Side, int], ...] = (
        ("baseline", population.base.height),
        ("candidate", population.cand.height),
    )
    if match.paired and min(population.base.height, population.cand.height) == 0:
        out.append(Caveat("no_paired_completions"))
        sides = ()
    for side, n in sides:
        if n == 0:
            out.append(Caveat("no_completed", side=side))
        elif n < MIN_SAMPLES:
            out.append(Caveat("few_completed", side=side, n=n, need=MIN_SAMPLES))
    n = min(population.base.height, population.cand.height)
    for stat in stats:
        q = percentile_of(stat)
        if q is None or q >= 100.0 or n == 0:
            continue
        if n * (1.0 - q / 100.0) < TAIL_VALUES:
            need = math.ceil(TAIL_VALUES / (1.0 - q / 100.0))
            out.append(Caveat("unreliable_tail", stat=stat, n=n, need=need, tail=TAIL_VALUES))
    return out
