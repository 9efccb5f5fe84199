"""A seeded discrete-time model of a continuous-batching LLM engine: the step loop.

One `_Engine` holds the state of one run (per-request numpy arrays, the queue, the
running batch, the KV blocks in use) and steps it until every request has ended or the
horizon is passed; `servetrace.sim.simulate` is the entry point.

The model
---------
The engine runs *iterations* (steps) back to back while it has work. At the start of
a step it drops cancelled requests, admits queued ones into the running batch and
grows KV caches; every request in the step's batch then gets its output token when
the step ends (all tokens of a step share its end time, as in Vidur).

Scheduling policies: ``fcfs`` (prefill first), ``chunked`` (chunked prefill), ``sjf``
and ``priority``, as `servetrace.sim.config.Policy` describes them (the queue's order is
`servetrace.sim.workloads.queue_keys`); the step-time model is
`EngineConfig.step_time_ns`.

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

``horizon_ns`` cuts the log (`servetrace.sim.eventlog`). Every random draw comes from
``numpy.random.SeedSequence(config.seed)`` (`servetrace.sim.draws`): the same workload and
config give a byte-identical event log.
"""

from __future__ import annotations

import heapq

import numpy as np
import polars as pl

from servetrace.sim.config import EngineConfig, Policy
from servetrace.sim.draws import Draws
from servetrace.sim.eventlog import (
    ADMISSION,
    ARRIVAL,
    CANCEL,
    COMPLETION,
    FIRST,
    NEVER,
    PREEMPTION,
    RELEASE,
    TOKEN,
    EventLog,
    Simulation,
    to_simulation,
)
from servetrace.sim.steps_record import StepRecorder
from servetrace.sim.workloads import queue_keys

# Request states inside the engine.
_PENDING, _QUEUED, _PREFILL, _DECODE, _DONE = 0, 1, 2, 3, 4


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
        self.key = queue_keys(wl, cfg.policy)

        draws = self.draws = Draws(cfg, self.arrival)
        self.deadline, self.leak = draws.deadline, draws.leak
        cand = np.flatnonzero(self.deadline != NEVER)
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
        self.terminal_ts = np.full(n, NEVER, dtype=np.int64)
        # 0 in flight, 1 completed, 2 cancelled, 3 rejected
        self.outcome = np.zeros(n, dtype=np.int8)
        self.cancel_state = np.full(n, -1, dtype=np.int8)  # 0 queued, 1 prefill, 2 decode
        self.released = np.zeros(n, dtype=bool)
        self.preempted_at_step = np.full(n, -1, dtype=np.int64)

        self.queue: list[tuple[int, int, int]] = []  # heap of (class, key, request)
        self.n_queued = 0
        self.running: list[int] = []  # admission order
        self.used_blocks = 0
        self.log = EventLog()
        self.steps = StepRecorder()
        self.step_index = 0

    # ---- queue ----------------------------------------------------------------

    def _enqueue(self, i: int, preempted: bool) -> None:
        heapq.heappush(self.queue, (0 if preempted else 1, int(self.key[i]), i))
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
            self.log.add_one(RELEASE, i, ts + delay)
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
        self.log.add_one(CANCEL, i, deadline)
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
        self.log.add_one(ADMISSION, i, t)
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
        self.log.add_one(PREEMPTION, i, t)
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
            self.log.add(FIRST, firsts, t1, np.ones(len(firsts), dtype=np.int64))
            self.first_done[firsts] = True
            self._draw_chunk_targets(firsts)
        if len(later):
            self.pending[later] += 1
            deliver = later[
                (self.pending[later] >= self.chunk_target[later])
                | (self.generated[later] >= self.target[later])
            ]
            if len(deliver):
                self.log.add(TOKEN, deliver, t1, self.pending[deliver].copy())
                self.pending[deliver] = 0
                self._draw_chunk_targets(deliver)
        state[producers[~complete_mask]] = _DECODE
        if len(completed):
            self.log.add(COMPLETION, completed, t1)
            state[completed] = _DONE
            self.outcome[completed] = 1
            self.terminal_ts[completed] = t1
            self.used_blocks -= int(self.blocks[completed].sum())
            self.blocks[completed] = 0
            if self.cfg.release_delay_ns is not None:
                rel = completed[~self.leak[completed]]
                self.log.add(RELEASE, rel, t1 + self.cfg.release_delay_ns)
                self.released[rel] = True

    def _draw_chunk_targets(self, idx: np.ndarray) -> None:
        self.chunk_target[idx] = self.draws.chunk_sizes(len(idx))

    # ---- main loop --------------------------------------------------------------

    def run(self) -> Simulation:
        cfg, n = self.cfg, self.n
        horizon = cfg.horizon_ns
        everyone = np.arange(n, dtype=np.int64)
        self.log.add(ARRIVAL, everyone, self.arrival)
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
                    self.log.add_one(CANCEL, i, int(self.arrival[i]))
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
            kv_tokens = context + int((self.computed[pre] + chunks).sum())
            state = (len(self.running), queued_before, self.used_blocks, preempted, kv_tokens)
            self.steps.record(self.step_index, (t, t1), decoders, pre, prefill_tokens, state)
            self._cancel_due(t1, inclusive=False, notice=t1)
            self._finish_step(t1, decoders, pre, chunks)
            self.step_index += 1
            t = t1
        return self._result()

    # ---- output ---------------------------------------------------------------

    def _result(self) -> Simulation:
        return to_simulation(
            self.log,
            config=self.cfg,
            workload=self.wl,
            prompt=self.prompt,
            target=self.target,
            terminal_ts=self.terminal_ts,
            outcome_code=self.outcome,
            cancel_code=self.cancel_state,
            recorder=self.steps,
        )
