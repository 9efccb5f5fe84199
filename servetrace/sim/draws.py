"""Every random draw of one simulated run, from ``numpy.random.SeedSequence(config.seed)``.

Three independent child streams: the clients' deadlines (who gives up, and when), the
requests that never get a ``release`` (leaks), and the size of each streamed chunk. The
same workload and config give the same draws, so a byte-identical event log; a knob
changes only the draws it governs (raising ``cancel_fraction`` only adds cancellers).
"""

from __future__ import annotations

import math

import numpy as np

from servetrace.sim.config import EngineConfig
from servetrace.sim.eventlog import NEVER

__all__ = ["Draws"]


class Draws:
    """The seeded draws of one run over requests arriving at ``arrival`` (Int64 ns).

    ``deadline``: when each client gives up (`NEVER` for the patient ones), ``arrival`` +
    a patience log-uniform in ``cancel_after_ns`` for a ``cancel_fraction`` of requests;
    ``leak``: True for the ``leak_fraction`` of requests that never get a release.
    """

    def __init__(self, cfg: EngineConfig, arrival: np.ndarray) -> None:
        n = len(arrival)
        cancel_rng, self._chunk_rng, leak_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(cfg.seed).spawn(3)
        )
        # Drawn for every request, so raising cancel_fraction only adds cancellers.
        u_cancel = cancel_rng.random(n)
        low, high = cfg.cancel_after_ns
        patience = np.rint(np.exp(cancel_rng.uniform(math.log(low), math.log(high), n)))
        self.deadline: np.ndarray = np.where(
            u_cancel < cfg.cancel_fraction, arrival + patience.astype(np.int64), NEVER
        )
        self.leak: np.ndarray = leak_rng.random(n) < cfg.leak_fraction
        self._bundle_prob = cfg.bundle_prob
        self._stream_chunk = cfg.stream_chunk

    def chunk_sizes(self, k: int) -> np.ndarray:
        """Tokens in each of the next ``k`` chunks: 2-4 with probability ``bundle_prob``,
        else ``stream_chunk``."""
        bundle = self._chunk_rng.random(k) < self._bundle_prob
        sizes = self._chunk_rng.integers(2, 5, k)
        return np.where(bundle, sizes, self._stream_chunk)
