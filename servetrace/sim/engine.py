"""A seeded discrete-time model of a continuous-batching LLM engine.

`simulate(workload, config)` replays a workload (see `servetrace.sim.workloads`) through
one engine replica and returns the **canonical event log** (DESIGN §2) a real engine
would have written. It exists to make sample traces and controlled experiments (the
same workload under several schedulers), not to predict production latencies.

The model
---------
The engine runs *iterations* (steps) back to back while it has work. At the start of
a step it drops cancelled requests, admits queued ones into the running batch and
grows KV caches; every request in the step's batch then gets its output token when
the step ends (all tokens of a step share its end time, as in Vidur).

Scheduling policies (`Policy`):

* ``fcfs`` — vLLM (v0) default: *prefill first*. If any queued request can be
  admitted, the step is a prefill-only step: requests are admitted in arrival order
  while their whole prompt fits the token budget and the KV cache (head-of-line
  blocking: the first that does not fit stops admission); running decodes pause for
  that step. Otherwise the step decodes one token for every running request.
* ``chunked`` — Sarathi-Serve / vLLM chunked prefill: every step first decodes one
  token for every decoding request, then spends the rest of the token budget on
  prompt chunks (continuing partially prefilled requests first, then admitting new
  ones in arrival order). Long prompts span several steps; decodes never pause.
* ``sjf`` — as ``fcfs`` but the queue is ordered by prompt length (shortest first,
  ties by arrival): lower median waits, a longer tail for long prompts.

In every policy, requests that were preempted wait at the front of the queue, ahead of
new ones (among themselves in the policy's order).

KV cache: ``kv_blocks`` blocks of ``block_size`` tokens. Admission allocates the blocks
for everything the request will prefill (prompt, plus the tokens generated so far when
it is re-admitted after a preemption) and is refused unless ``watermark`` of the cache
stays free afterwards (vLLM's watermark, which stops admit-then-evict thrashing). A
decode step needs ``ceil((prompt + generated) / block_size)`` blocks per request; when
the running requests need more than the cache holds, the most recently admitted ones
are preempted (recompute-style: blocks freed, ``preemption`` event, back to the queue;
on re-admission, ``admission`` again and the recompute prefill of prompt + generated
tokens yields the next ``token`` — its ``first_token`` already happened).

A request can never run when ``prompt + output - 1`` tokens exceed the KV cache (less
the watermark) or, under the prefill-first policies, the token budget (vLLM's
``max_model_len`` limits); such a request is *rejected*: its ``cancellation`` follows
its ``arrival`` at the same instant.

Step time (`EngineConfig.step_time_ns`), a linear roofline-ish model:
``base + prefill_token·prefill_tokens + decode_seq·decode_seqs + context_token·Σcontext``
where Σcontext is the KV length read by the decoding requests. The defaults are loosely
calibrated to Llama-2-7B in fp16 on one A100 (cf. Vidur's profile): 10 ms per step for
reading the weights, 80 µs per prompt token (≈ 14 GFLOP at ~55 % of peak), 0.1 ms per
decoding sequence and 0.25 µs per context token of attention (512 KiB of KV per token
at ~2 TB/s). A 512-token prompt alone takes 51 ms; 64 requests decoding at 1,000 tokens
of context take 33 ms a step.

Streaming: ``first_token`` always carries 1 token. Later tokens are delivered in chunks
of ``stream_chunk`` tokens, except that each chunk bundles 2-4 tokens with probability
``bundle_prob``; a chunk is delivered when it is full or the request completes, so
``Σ tokens`` over a completed request's ticks equals its ``output_tokens``. Tokens held
back when a request is cancelled are never delivered.

Cancellation: a fraction ``cancel_fraction`` of requests (drawn per request) have a
client deadline ``arrival + patience``, patience log-uniform in ``cancel_after_ns``.
The ``cancellation`` event is at the deadline itself, in whatever state the request is
then: queued, prefill (admitted, no first token yet) or decode; a token whose step ends
after the deadline is not delivered. The engine notices at its next step boundary and
frees the request's blocks there. With ``release_delay_ns`` set, a ``release`` event
follows when the engine frees the request (completion, or noticing a cancellation),
plus that delay, except for a ``leak_fraction`` of requests that never get one.

``horizon_ns`` cuts the log: only events at or before it are kept, so requests still
queued or running then are *in flight* at the end of the trace (a release of a request
that ended before the horizon is kept, so the cut creates no false leaks).

Every random draw comes from ``numpy.random.SeedSequence(config.seed)``: the same
workload and config give a byte-identical event log.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import polars as pl

from servetrace.errors import UsageError
from servetrace.schema import EVENT_KINDS
from servetrace.sim.workloads import validate_workload

__all__ = [
    "EVENT_COLUMNS",
    "EngineConfig",
    "Policy",
    "Simulation",
    "run_simulation",
    "simulate",
]


class Policy(str, Enum):
    """Scheduling policies the engine model implements (see the module docstring)."""

    FCFS = "fcfs"
    CHUNKED = "chunked"
    SJF = "sjf"


#: Columns (and dtypes) of the event log `simulate` returns.
EVENT_COLUMNS: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "event": pl.String(),
    "ts": pl.Int64(),
    "tokens": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "policy": pl.String(),
}

_NEVER = np.iinfo(np.int64).max
_K = {name: code for code, name in enumerate(EVENT_KINDS)}
_ARRIVAL, _ADMISSION, _FIRST, _TOKEN = (
    _K["arrival"],
    _K["admission"],
    _K["first_token"],
    _K["token"],
)
_PREEMPTION, _COMPLETION, _CANCEL, _RELEASE = (
    _K["preemption"],
    _K["completion"],
    _K["cancellation"],
    _K["release"],
)
# Request states inside the engine.
_PENDING, _QUEUED, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class EngineConfig:
    """One engine replica: scheduler, capacity, step-time model, client behaviour, seed.

    Times are Int64 ns. See the module docstring for what each knob does.
    """

    policy: str = "fcfs"
    """``fcfs`` (prefill-first), ``chunked`` (chunked prefill) or ``sjf``."""
    max_batch_tokens: int = 4096
    """Token budget per step: prompt tokens prefilled plus one per decoding request."""
    max_running: int = 128
    """At most this many requests in the running batch (vLLM ``max_num_seqs``)."""
    kv_blocks: int = 4096
    """KV-cache capacity in blocks (4,096 blocks x 16 tokens ≈ 32 GiB for Llama-2-7B fp16)."""
    block_size: int = 16
    """Tokens per KV block."""
    watermark: float = 0.01
    """Fraction of KV blocks admission must leave free."""
    step_base_ns: int = 10_000_000
    """Fixed cost of a step (weights read once)."""
    step_prefill_token_ns: int = 80_000
    """Cost per prompt token prefilled in the step."""
    step_decode_seq_ns: int = 100_000
    """Cost per request decoding in the step."""
    step_context_token_ns: int = 250
    """Cost per token of KV context read by the decoding requests."""
    stream_chunk: int = 1
    """Tokens per streamed chunk after the first token."""
    bundle_prob: float = 0.0
    """Probability that a chunk bundles 2-4 tokens instead of ``stream_chunk``."""
    cancel_fraction: float = 0.0
    """Fraction of requests whose client gives up at a deadline."""
    cancel_after_ns: tuple[int, int] = (20_000_000, 60_000_000_000)
    """Range of the log-uniform client patience (deadline - arrival)."""
    release_delay_ns: int | None = None
    """Emit ``release`` this long after the engine frees a request; None: no releases."""
    leak_fraction: float = 0.0
    """Fraction of requests that never get a ``release`` (when releases are emitted)."""
    horizon_ns: int | None = None
    """Cut the log here (relative to the first arrival); None: run until all finish."""
    seed: int = 0
    """Seed of every random draw (cancellations, chunk bundling, leaks)."""

    def __post_init__(self) -> None:
        try:
            policy = Policy(self.policy).value
        except ValueError:
            raise UsageError(
                f"unknown scheduling policy {self.policy!r}",
                hint="choose one of: " + ", ".join(p.value for p in Policy),
            ) from None
        object.__setattr__(self, "policy", policy)
        positive = (
            "max_batch_tokens",
            "max_running",
            "kv_blocks",
            "block_size",
            "stream_chunk",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise UsageError(f"engine setting {name} must be >= 1 (got {getattr(self, name)})")
        if self.max_running > self.max_batch_tokens:
            raise UsageError(
                f"max_running ({self.max_running}) exceeds max_batch_tokens "
                f"({self.max_batch_tokens})",
                hint="every running request decodes one token per step within the budget",
            )
        for name in (
            "step_base_ns",
            "step_prefill_token_ns",
            "step_decode_seq_ns",
            "step_context_token_ns",
        ):
            if getattr(self, name) < 0:
                raise UsageError(f"engine setting {name} must be >= 0 (got {getattr(self, name)})")
        if self.step_base_ns + self.step_prefill_token_ns + self.step_decode_seq_ns < 1:
            raise UsageError("the step-time model must make every step take at least 1 ns")
        for name in ("watermark", "bundle_prob", "cancel_fraction", "leak_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"engine setting {name} must be in [0, 1] (got {value})")
        if self.watermark >= 1.0:
            raise UsageError("watermark must be < 1")
        low, high = self.cancel_after_ns
        if not 0 < low <= high:
            raise UsageError(
                f"cancel_after_ns must be (low, high) with 0 < low <= high (got {low}, {high})"
            )
        if self.release_delay_ns is not None and self.release_delay_ns < 0:
            raise UsageError(f"release_delay_ns must be >= 0 (got {self.release_delay_ns})")
        if self.horizon_ns is not None and self.horizon_ns < 0:
            raise UsageError(f"horizon_ns must be >= 0 (got {self.horizon_ns})")

    @property
    def watermark_blocks(self) -> int:
        """KV blocks admission leaves free."""
        return int(self.watermark * self.kv_blocks)

    @property
    def max_context_tokens(self) -> int:
        """The longest prompt + output - 1 a request may have (longer ones are rejected)."""
        kv_tokens = (self.kv_blocks - self.watermark_blocks) * self.block_size
        if self.policy == Policy.CHUNKED.value:
            return kv_tokens
        return min(kv_tokens, self.max_batch_tokens)

    def step_time_ns(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> int:
        """Duration of one step (ns), from the linear step-time model."""
        return (
            self.step_base_ns
            + self.step_prefill_token_ns * prefill_tokens
            + self.step_decode_seq_ns * decode_seqs
            + self.step_context_token_ns * context_tokens
        )


@dataclass(frozen=True)
class Simulation:
    """Everything one run produced: the event log plus the engine's own accounting."""

    events: pl.DataFrame
    """The canonical event log (columns `EVENT_COLUMNS`), sorted by ``ts``."""
    steps: pl.DataFrame
    """One row per engine step: ``step, start_ns, end_ns, prefill_tokens, decode_tokens,
    batch_tokens, prefill_seqs, decode_seqs, running, queued, kv_blocks_used, preempted``
    (``kv_blocks_used`` is the peak within the step, after admission and growth)."""
    requests: pl.DataFrame
    """One row per request in the log: ``request_id, arrival_ns, prompt_tokens,
    output_tokens, outcome`` (completed, cancelled, rejected, in_flight),
    ``cancel_state`` (queued, prefill, decode or null), ``preemptions``,
    ``tokens_delivered``, ``released``."""
    config: EngineConfig


def simulate(workload: pl.DataFrame, config: EngineConfig | None = None) -> pl.DataFrame:
    """Replay ``workload`` through the engine model and return its canonical event log.

    ``workload`` has columns ``request_id, arrival_ns, prompt_tokens, output_tokens``
    (`servetrace.sim.workloads`). The result has one row per event with columns
    ``request_id`` (Utf8), ``event`` (Utf8), ``ts`` (Int64 ns from the first arrival),
    ``tokens`` (Int64, on ``first_token``/``token``), ``prompt_tokens`` (on ``arrival``),
    ``output_tokens`` (on ``completion``) and ``policy`` (Utf8), sorted by ``ts`` with
    events at equal times in the order the engine emitted them. Deterministic: the same
    workload and config give a byte-identical frame. Raises `InputError` for a malformed
    workload and `UsageError` (from `EngineConfig`) for an impossible configuration.
    """
    return run_simulation(workload, config).events


def run_simulation(workload: pl.DataFrame, config: EngineConfig | None = None) -> Simulation:
    """Like `simulate`, but also return the per-step and per-request accounting."""
    cfg = config if config is not None else EngineConfig()
    wl = validate_workload(workload)
    return _Engine(wl, cfg).run()


# --------------------------------------------------------------------------- engine


@dataclass
class _Log:
    """Events in emission order, kept as columnar chunks until the end."""

    req: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)
    ts: list[np.ndarray] = field(default_factory=list)
    tokens: list[np.ndarray] = field(default_factory=list)

    def add(
        self, kind: int, req: np.ndarray, ts: np.ndarray | int, tokens: np.ndarray | None = None
    ) -> None:
        n = len(req)
        if n == 0:
            return
        self.req.append(np.asarray(req, dtype=np.int64))
        self.kind.append(np.full(n, kind, dtype=np.int8))
        self.ts.append(np.broadcast_to(np.asarray(ts, dtype=np.int64), (n,)))
        self.tokens.append(
            np.full(n, -1, dtype=np.int64) if tokens is None else np.asarray(tokens, dtype=np.int64)
        )

    def add_one(self, kind: int, req: int, ts: int, tokens: int = -1) -> None:
        self.req.append(np.array([req], dtype=np.int64))
        self.kind.append(np.array([kind], dtype=np.int8))
        self.ts.append(np.array([ts], dtype=np.int64))
        self.tokens.append(np.array([tokens], dtype=np.int64))


class _Engine:
    """The mutable state of one run. Per-request state lives in numpy arrays."""

    def __init__(self, wl: pl.DataFrame, cfg: EngineConfig) -> None:
        self.cfg = cfg
        self.wl = wl
        n = wl.height
        self.n = n
        self.arrival = wl["arrival_ns"].to_numpy().astype(np.int64)
        self.prompt = wl["prompt_tokens"].to_numpy().astype(np.int64)
        self.target = wl["output_tokens"].to_numpy().astype(np.int64)

        cancel_rng, self.chunk_rng, leak_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(cfg.seed).spawn(3)
        )
        # Drawn for every request, so raising cancel_fraction only adds cancellers.
        u_cancel = cancel_rng.random(n)
        low, high = cfg.cancel_after_ns
        patience = np.rint(np.exp(cancel_rng.uniform(math.log(low), math.log(high), n)))
        self.deadline = np.where(
            u_cancel < cfg.cancel_fraction, self.arrival + patience.astype(np.int64), _NEVER
        )
        self.leak = leak_rng.random(n) < cfg.leak_fraction
        cand = np.flatnonzero(self.deadline != _NEVER)
        self.deadline_order = cand[np.argsort(self.deadline[cand], kind="stable")]
        self.deadline_ptr = 0

        self.state = np.full(n, _PENDING, dtype=np.int8)
        self.generated = np.zeros(n, dtype=np.int64)  # output tokens produced so far
        self.need = np.zeros(n, dtype=np.int64)  # tokens to prefill in this admission
        self.computed = np.zeros(n, dtype=np.int64)  # of which already prefilled
        self.blocks = np.zeros(n, dtype=np.int64)  # KV blocks held
        self.pending = np.zeros(n, dtype=np.int64)  # produced, not yet delivered
        self.chunk_target = np.full(n, cfg.stream_chunk, dtype=np.int64)
        self.first_done = np.zeros(n, dtype=bool)
        self.terminal_ts = np.full(n, _NEVER, dtype=np.int64)
        # 0 in flight, 1 completed, 2 cancelled, 3 rejected
        self.outcome = np.zeros(n, dtype=np.int8)
        self.cancel_state = np.full(n, -1, dtype=np.int8)  # 0 queued, 1 prefill, 2 decode
        self.released = np.zeros(n, dtype=bool)
        self.preempted_at_step = np.full(n, -1, dtype=np.int64)

        self.queue: list[tuple[int, int, int]] = []  # heap of (class, key, request)
        self.n_queued = 0
        self.running: list[int] = []  # admission order
        self.used_blocks = 0
        self.log = _Log()
        self.step_rows: list[tuple[int, ...]] = []
        self.step_index = 0

    # ---- queue ----------------------------------------------------------------

    def _enqueue(self, i: int, preempted: bool) -> None:
        key = int(self.prompt[i]) if self.cfg.policy == Policy.SJF.value else i
        heapq.heappush(self.queue, (0 if preempted else 1, key, i))
        self.state[i] = _QUEUED
        self.n_queued += 1

    def _queue_head(self) -> int | None:
        while self.queue:
            i = self.queue[0][2]
            if self.state[i] == _QUEUED:
                return i
            heapq.heappop(self.queue)  # cancelled while queued
        return None

    # ---- lifecycle transitions ------------------------------------------------

    def _release(self, i: int, ts: int) -> None:
        delay = self.cfg.release_delay_ns
        if delay is not None and not self.leak[i]:
            self.log.add_one(_RELEASE, i, ts + delay)
            self.released[i] = True

    def _cancel(self, i: int, deadline: int, notice: int) -> None:
        st = self.state[i]
        if st in (_PENDING, _QUEUED):
            self.cancel_state[i] = 0
            if st == _QUEUED:
                self.n_queued -= 1
        else:
            self.cancel_state[i] = 2 if self.first_done[i] else 1
            self.used_blocks -= int(self.blocks[i])
            self.blocks[i] = 0
        self.log.add_one(_CANCEL, i, deadline)
        self.state[i] = _DONE
        self.outcome[i] = 2
        self.terminal_ts[i] = deadline
        self._release(i, notice)

    def _cancel_due(self, upto: int, inclusive: bool, notice: int) -> None:
        order, dl = self.deadline_order, self.deadline
        while self.deadline_ptr < len(order):
            i = int(order[self.deadline_ptr])
            d = int(dl[i])
            if d > upto or (d == upto and not inclusive):
                break
            self.deadline_ptr += 1
            if self.state[i] != _DONE:
                self._cancel(i, d, notice)

    def _try_admit(self, i: int, t: int, budget: int) -> int | None:
        """Admit queue head ``i`` at ``t`` if it fits; return the tokens it must prefill
        (its prompt, plus what it generated before a preemption), or None."""
        cfg = self.cfg
        if len(self.running) >= cfg.max_running or self.preempted_at_step[i] == self.step_index:
            return None
        nd = max(int(self.prompt[i] + self.generated[i]), 1)
        if cfg.policy != Policy.CHUNKED.value and nd > budget:
            return None  # prefill-first: the whole prompt must fit this step's budget
        nb = -(-nd // cfg.block_size)
        if cfg.kv_blocks - self.used_blocks - nb < cfg.watermark_blocks:
            return None
        heapq.heappop(self.queue)
        self.need[i] = nd
        self.computed[i] = 0
        self.blocks[i] = nb
        self.used_blocks += nb
        self.state[i] = _PREFILL
        self.n_queued -= 1
        self.running.append(i)
        self.log.add_one(_ADMISSION, i, t)
        return nd

    def _grow_or_preempt(self, t: int) -> int:
        """Give every decoding request room for its next token; preempt the newest
        admissions until the running set fits. Returns how many were preempted."""
        if not self.running:
            return 0
        run = np.array(self.running, dtype=np.int64)
        decoding = self.state[run] == _DECODE
        grown = -(-(self.prompt[run] + self.generated[run]) // self.cfg.block_size)
        need = np.where(decoding, np.maximum(grown, self.blocks[run]), self.blocks[run])
        keep = int(np.searchsorted(np.cumsum(need), self.cfg.kv_blocks, side="right"))
        for i in reversed(run[keep:].tolist()):
            self._preempt(i, t)
        kept = run[:keep]
        self.blocks[kept] = need[:keep]
        self.used_blocks = int(need[:keep].sum())
        self.running = kept.tolist()
        return len(run) - keep

    def _preempt(self, i: int, t: int) -> None:
        self.log.add_one(_PREEMPTION, i, t)
        self.blocks[i] = 0
        self.preempted_at_step[i] = self.step_index
        self._enqueue(i, preempted=True)

    # ---- one step -----------------------------------------------------------

    def _schedule(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Decide the step at ``t``: (decoders, prefillers, their chunk sizes, preempted)."""
        cfg = self.cfg
        budget = cfg.max_batch_tokens
        empty = np.zeros(0, dtype=np.int64)
        if cfg.policy != Policy.CHUNKED.value:
            admitted: list[int] = []
            chunks: list[int] = []
            while (i := self._queue_head()) is not None and (
                nd := self._try_admit(i, t, budget)
            ) is not None:
                admitted.append(i)
                chunks.append(nd)
                budget -= nd
            if admitted:
                return (
                    empty,
                    np.array(admitted, dtype=np.int64),
                    np.array(chunks, dtype=np.int64),
                    0,
                )
            preempted = self._grow_or_preempt(t)
            return np.array(self.running, dtype=np.int64), empty, empty, preempted

        preempted = self._grow_or_preempt(t)
        run = np.array(self.running, dtype=np.int64)
        decoders = run[self.state[run] == _DECODE] if len(run) else empty
        budget -= len(decoders)
        pre: list[int] = []
        chunks = []
        for i in run[self.state[run] == _PREFILL].tolist() if len(run) else []:
            if budget <= 0:
                break
            c = min(int(self.need[i] - self.computed[i]), budget)
            pre.append(i)
            chunks.append(c)
            budget -= c
        while (
            budget > 0
            and (i := self._queue_head()) is not None
            and (nd := self._try_admit(i, t, budget)) is not None
        ):
            c = min(nd, budget)
            pre.append(i)
            chunks.append(c)
            budget -= c
        return decoders, np.array(pre, dtype=np.int64), np.array(chunks, dtype=np.int64), preempted

    def _finish_step(
        self, t1: int, decoders: np.ndarray, pre: np.ndarray, chunks: np.ndarray
    ) -> None:
        """Deliver the step's outputs at ``t1`` to the requests still alive."""
        state = self.state
        if len(pre):
            alive = state[pre] != _DONE
            pre, chunks = pre[alive], chunks[alive]
            self.computed[pre] += chunks
            done_prefill = pre[self.computed[pre] >= self.need[pre]]
        else:
            done_prefill = pre
        if len(decoders):
            decoders = decoders[state[decoders] != _DONE]
        producers = np.concatenate([done_prefill, decoders]) if len(done_prefill) else decoders
        if not len(producers):
            return
        self.generated[producers] += 1
        is_first = ~self.first_done[producers]
        firsts = producers[is_first]
        later = producers[~is_first]
        complete_mask = self.generated[producers] >= self.target[producers]
        completed = producers[complete_mask]
        if len(firsts):
            self.log.add(_FIRST, firsts, t1, np.ones(len(firsts), dtype=np.int64))
            self.first_done[firsts] = True
            self._draw_chunk_targets(firsts)
        if len(later):
            self.pending[later] += 1
            deliver = later[
                (self.pending[later] >= self.chunk_target[later])
                | (self.generated[later] >= self.target[later])
            ]
            if len(deliver):
                self.log.add(_TOKEN, deliver, t1, self.pending[deliver].copy())
                self.pending[deliver] = 0
                self._draw_chunk_targets(deliver)
        state[producers[~complete_mask]] = _DECODE
        if len(completed):
            self.log.add(_COMPLETION, completed, t1)
            state[completed] = _DONE
            self.outcome[completed] = 1
            self.terminal_ts[completed] = t1
            self.used_blocks -= int(self.blocks[completed].sum())
            self.blocks[completed] = 0
            if self.cfg.release_delay_ns is not None:
                rel = completed[~self.leak[completed]]
                self.log.add(_RELEASE, rel, t1 + self.cfg.release_delay_ns)
                self.released[rel] = True

    def _draw_chunk_targets(self, idx: np.ndarray) -> None:
        k = len(idx)
        bundle = self.chunk_rng.random(k) < self.cfg.bundle_prob
        sizes = self.chunk_rng.integers(2, 5, k)
        self.chunk_target[idx] = np.where(bundle, sizes, self.cfg.stream_chunk)

    # ---- main loop --------------------------------------------------------------

    def run(self) -> Simulation:
        cfg, n = self.cfg, self.n
        horizon = cfg.horizon_ns
        everyone = np.arange(n, dtype=np.int64)
        self.log.add(_ARRIVAL, everyone, self.arrival)
        too_long = (self.prompt + self.target - 1) > cfg.max_context_tokens

        next_arrival = 0
        t = int(self.arrival[0]) if n else 0
        while True:
            while next_arrival < n and self.arrival[next_arrival] <= t:
                i = next_arrival
                next_arrival += 1
                if self.state[i] == _DONE:
                    continue  # its client gave up before the engine looked
                if too_long[i]:
                    self.log.add_one(_CANCEL, i, int(self.arrival[i]))
                    self.state[i] = _DONE
                    self.outcome[i] = 3
                    self.cancel_state[i] = 0
                    self.terminal_ts[i] = self.arrival[i]
                    self._release(i, int(self.arrival[i]))
                    continue
                self._enqueue(i, preempted=False)
            self._cancel_due(t, inclusive=True, notice=t)
            self.running = [i for i in self.running if self.state[i] != _DONE]
            if horizon is not None and t > horizon:
                break
            if not self.running and self._queue_head() is None:
                if next_arrival >= n:
                    break
                t = int(self.arrival[next_arrival])  # idle until the next arrival
                continue

            queued_before = self.n_queued
            decoders, pre, chunks, preempted = self._schedule(t)
            if not len(decoders) and not len(pre):
                raise RuntimeError(f"engine stalled at t={t} ns with nothing to run")
            prefill_tokens = int(chunks.sum())
            context = int((self.prompt[decoders] + self.generated[decoders]).sum())
            t1 = t + cfg.step_time_ns(prefill_tokens, len(decoders), context)
            self.step_rows.append(
                (
                    self.step_index,
                    t,
                    t1,
                    prefill_tokens,
                    len(decoders),
                    prefill_tokens + len(decoders),
                    len(pre),
                    len(decoders),
                    len(self.running),
                    queued_before,
                    self.used_blocks,
                    preempted,
                )
            )
            self._cancel_due(t1, inclusive=False, notice=t1)
            self._finish_step(t1, decoders, pre, chunks)
            self.step_index += 1
            t = t1
        return self._result()

    # ---- output ---------------------------------------------------------------

    def _result(self) -> Simulation:
        cfg = self.cfg
        log = self.log
        if log.req:
            req = np.concatenate(log.req)
            kind = np.concatenate(log.kind)
            ts = np.concatenate(log.ts)
            tokens = np.concatenate(log.tokens)
        else:
            req = np.zeros(0, dtype=np.int64)
            kind = np.zeros(0, dtype=np.int8)
            ts = np.zeros(0, dtype=np.int64)
            tokens = np.zeros(0, dtype=np.int64)
        horizon = cfg.horizon_ns
        if horizon is not None:
            keep = (ts <= horizon) | ((kind == _RELEASE) & (self.terminal_ts[req] <= horizon))
            req, kind, ts, tokens = req[keep], kind[keep], ts[keep], tokens[keep]
        order = np.argsort(ts, kind="stable")
        req, kind, ts, tokens = req[order], kind[order], ts[order], tokens[order]

        ids = self.wl["request_id"]
        names = pl.Series("event", kind.astype(np.int64)).replace_strict(
            dict(enumerate(EVENT_KINDS)), return_dtype=pl.String
        )
        events = pl.DataFrame(
            {
                "request_id": ids.gather(req),
                "event": names,
                "ts": ts,
                "tokens": np.where(tokens >= 0, tokens, 0),
                "prompt_tokens": self.prompt[req],
                "output_tokens": self.target[req],
                "kind": kind,
                "tok_null": tokens < 0,
            }
        ).select(
            pl.col("request_id").cast(pl.String),
            pl.col("event"),
            pl.col("ts").cast(pl.Int64),
            pl.when(~pl.col("tok_null")).then(pl.col("tokens")).cast(pl.Int64).alias("tokens"),
            pl.when(pl.col("kind") == _ARRIVAL)
            .then(pl.col("prompt_tokens"))
            .cast(pl.Int64)
            .alias("prompt_tokens"),
            pl.when(pl.col("kind") == _COMPLETION)
            .then(pl.col("output_tokens"))
            .cast(pl.Int64)
            .alias("output_tokens"),
            pl.lit(cfg.policy, dtype=pl.String).alias("policy"),
        )

        steps = pl.DataFrame(
            self.step_rows,
            schema={
                name: pl.Int64
                for name in (
                    "step",
                    "start_ns",
                    "end_ns",
                    "prefill_tokens",
                    "decode_tokens",
                    "batch_tokens",
                    "prefill_seqs",
                    "decode_seqs",
                    "running",
                    "queued",
                    "kv_blocks_used",
                    "preempted",
                )
            },
            orient="row",
        )
        steps = steps.filter(pl.col("start_ns") <= horizon) if horizon is not None else steps

        in_log = self.arrival <= (horizon if horizon is not None else _NEVER)
        ended = self.terminal_ts <= (horizon if horizon is not None else _NEVER)
        outcome = np.where(ended, self.outcome, 0)
        cancel_state = np.where(ended, self.cancel_state, -1)
        # Counts as seen in the (possibly cut) log.
        tick = (kind == _FIRST) | (kind == _TOKEN)
        delivered = np.bincount(req[tick], weights=tokens[tick], minlength=self.n).astype(np.int64)
        preempts = np.bincount(req[kind == _PREEMPTION], minlength=self.n).astype(np.int64)
        released = np.bincount(req[kind == _RELEASE], minlength=self.n) > 0
        requests = pl.DataFrame(
            {
                "request_id": ids,
                "arrival_ns": self.arrival,
                "prompt_tokens": self.prompt,
                "output_tokens": self.target,
                "outcome": pl.Series(outcome.astype(np.int64)).replace_strict(
                    {0: "in_flight", 1: "completed", 2: "cancelled", 3: "rejected"},
                    return_dtype=pl.String,
                ),
                "cancel_state": pl.Series(cancel_state.astype(np.int64)).replace_strict(
                    {-1: None, 0: "queued", 1: "prefill", 2: "decode"},
                    return_dtype=pl.String,
                ),
                "preemptions": preempts,
                "tokens_delivered": delivered,
                "released": released,
            }
        ).filter(pl.Series(in_log))
        return Simulation(events=events, steps=steps, requests=requests, config=cfg)
