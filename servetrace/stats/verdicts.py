"""Judge a ratio and its interval: significant, and in which direction (pyperf's rule).

Numbers only: the words ("1.14x slower") are the renderer's (``servetrace.render``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from servetrace.stats.ratio import RatioCI

Better = Literal["lower", "higher"]
Verdict = Literal["slower", "faster", "no significant change"]
# Below this many values on either side no change is called significant.
MIN_SAMPLES = 10


@dataclass(frozen=True)
class Change:
    """The verdict on one ratio: significant only if the interval excludes no change,
    on the side of the point estimate, and the change is larger than ``min_change``."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    significant: bool
    verdict: Verdict
    better: Better


def assess_change(
    ci: RatioCI,
    better: Better,
    min_change: float = 0.05,
    *,
    min_samples: int = MIN_SAMPLES,
) -> Change:
    """Turn a ratio and its interval into a verdict (pyperf's rule).

    A change counts when the interval excludes 1 on the same side as the ratio, the
    effect ``max(r, 1/r) - 1`` exceeds ``min_change``, and each side has at least
    ``min_samples`` values. "slower" means worse in the metric's direction: a higher
    latency or a lower throughput (a renderer may word it "worse" for a count).
    """
    ratio = ci.ratio
    significant = False
    verdict: Verdict = "no significant change"
    if ratio is not None and ci.ci_low is not None and ci.ci_high is not None:
        up = ratio > 1.0 and ci.ci_low > 1.0
        down = ratio < 1.0 and ci.ci_high < 1.0
        effect = max(ratio, 1.0 / ratio) - 1.0 if ratio > 0 else math.inf
        enough = ci.method == "poisson" or min(ci.n_baseline, ci.n_candidate) >= min_samples
        if (up or down) and effect > min_change and enough:
            significant = True
            worse = up if better == "lower" else down
            verdict = "slower" if worse else "faster"
    return Change(
        ratio=ratio,
        ci_low=ci.ci_low,
        ci_high=ci.ci_high,
        p_value=ci.p_value,
        significant=significant,
        verdict=verdict,
        better=better,
    )
