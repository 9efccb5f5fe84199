"""Seeded synthetic workloads: Gamma inter-arrival gaps (Poisson at burstiness 1) and
lognormal prompt and output lengths, each from its own child stream of the seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.errors import UsageError
from servetrace.sim.workloads import WORKLOAD_SCHEMA, request_ids
from servetrace.units import NS_PER_S as _NS_PER_S

__all__ = ["DEFAULT_OUTPUT", "DEFAULT_PROMPT", "LengthDistribution", "synthetic_workload"]


@dataclass(frozen=True)
class LengthDistribution:
    """A lognormal token-length distribution, rounded to integers and clipped.

    A length is ``round(exp(N(log(median), sigma)))`` clipped to ``[minimum, maximum]``:
    ``median`` is the median before clipping and ``sigma`` the standard deviation of the
    log-length (0.8-1.0 gives the long right tail of chat traffic; 0 gives a constant).
    """

    median: float
    sigma: float
    minimum: int = 1
    maximum: int = 4096

    def __post_init__(self) -> None:
        if not self.median > 0:
            raise UsageError(f"length median must be > 0 (got {self.median})")
        if self.sigma < 0:
            raise UsageError(f"length sigma must be >= 0 (got {self.sigma})")
        if not 0 <= self.minimum <= self.maximum:
            raise UsageError(
                f"length bounds must satisfy 0 <= minimum <= maximum "
                f"(got {self.minimum}, {self.maximum})"
            )

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` lengths (Int64) from ``rng``."""
        raw = np.exp(rng.normal(math.log(self.median), self.sigma, n))
        return np.clip(np.rint(raw), self.minimum, self.maximum).astype(np.int64)


#: Default prompt lengths: median 512, long tail, at most 3,072 tokens (so that prompt +
#: output fits the 4,096-token context and token budget of the default engine).
DEFAULT_PROMPT = LengthDistribution(median=512, sigma=0.9, minimum=8, maximum=3072)
#: Default output lengths: median 160, at most 1,024 tokens.
DEFAULT_OUTPUT = LengthDistribution(median=160, sigma=0.8, minimum=1, maximum=1024)


def synthetic_workload(
    n: int,
    rate_per_s: float,
    seed: int,
    prompt: LengthDistribution = DEFAULT_PROMPT,
    output: LengthDistribution = DEFAULT_OUTPUT,
    *,
    burstiness: float = 1.0,
    id_prefix: str = "r",
) -> pl.DataFrame:
    """Make a seeded synthetic workload of ``n`` requests.

    Inter-arrival gaps are Gamma(shape=``burstiness``, mean=1/``rate_per_s``): shape 1 is
    a Poisson process; below 1 arrivals are burstier (clustered), above 1 more regular
    (the convention of ``vllm bench serve --burstiness``). Gaps are rounded to whole ns
    before summing, so arrivals are exact integers. Prompt and output lengths are drawn
    from the two `LengthDistribution`s, independently of each other.

    Arrivals, prompt lengths and output lengths come from three independent child
    streams of ``numpy.random.SeedSequence(seed)``: the same seed with another rate or
    burstiness keeps every length and changes only the arrival times.

    Request ids are ``id_prefix`` + the zero-padded arrival index (``r0000``, ``r0001``...).
    """
    if n < 0:
        raise UsageError(f"number of requests must be >= 0 (got {n})")
    if not rate_per_s > 0:
        raise UsageError(f"arrival rate must be > 0 requests/s (got {rate_per_s})")
    if not burstiness > 0:
        raise UsageError(
            f"burstiness must be > 0 (got {burstiness})", hint="1 is a Poisson process"
        )
    arrival_rng, prompt_rng, output_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    gaps_ns = np.rint(
        arrival_rng.gamma(burstiness, _NS_PER_S / (rate_per_s * burstiness), n)
    ).astype(np.int64)
    if n:
        gaps_ns[0] = 0  # the first request arrives at 0
    return pl.DataFrame(
        {
            "request_id": request_ids(n, id_prefix),
            "arrival_ns": np.cumsum(gaps_ns),
            "prompt_tokens": prompt.sample(prompt_rng, n),
            "output_tokens": output.sample(output_rng, n),
        },
        schema=WORKLOAD_SCHEMA,
    )
