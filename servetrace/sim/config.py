"""The engine model's configuration: scheduling policies, capacity, the step-time model,
client behaviour and the seed (`EngineConfig`), validated when it is made.

Step time (`EngineConfig.step_time_ns`), a linear roofline-ish model:
``base + prefill_token·prefill_tokens + decode_seq·decode_seqs + context_token·Σcontext``
where Σcontext is the KV length read by the decoding requests. The defaults are loosely
calibrated to Llama-2-7B in fp16 on one A100 (cf. Vidur's profile): 10 ms per step for
reading the weights, 80 µs per prompt token (≈ 14 GFLOP at ~55 % of peak), 0.1 ms per
decoding sequence and 0.25 µs per context token of attention (512 KiB of KV per token
at ~2 TB/s). A 512-token prompt alone takes 51 ms; 64 requests decoding at 1,000 tokens
of context take 33 ms a step.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from servetrace.errors import UsageError

__all__ = ["LIMITS", "EngineConfig", "Policy"]

# The scheduler limits a what-if may set or sweep, and a trace may be told it ran with.
LIMITS = ("max_batch_tokens", "max_running", "kv_tokens")


class Policy(str, Enum):
    """Scheduling policies the engine model implements.

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
      ties by arrival): lower median waits, a longer tail for long prompts. The prompt,
      not the output length: a real scheduler knows only what it was sent.
    * ``priority`` — as ``fcfs`` but the queue is ordered by the workload's ``priority``
      column, lower value first, by arrival within a level; a request without a value
      waits behind every level.

    In every policy, requests that were preempted wait at the front of the queue, ahead of
    new ones (among themselves in the policy's order).
    """

    FCFS = "fcfs"
    CHUNKED = "chunked"
    SJF = "sjf"
    PRIORITY = "priority"


@dataclass(frozen=True)
class EngineConfig:
    """One engine replica: scheduler, capacity, step-time model, client behaviour, seed.

    Times are Int64 ns. See the module docstring for what each knob does.
    """

    policy: str = "fcfs"
    """``fcfs`` (prefill-first), ``chunked`` (chunked prefill), ``sjf`` or ``priority``."""
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
        # Capacities count something (at least one); costs and delays are at least zero.
        counts = ("max_batch_tokens", "max_running", "kv_blocks", "block_size", "stream_chunk")
        costs = (
            "step_base_ns",
            "step_prefill_token_ns",
            "step_decode_seq_ns",
            "step_context_token_ns",
        )
        delays = ("release_delay_ns", "horizon_ns")
        for name, least in [(name, 1) for name in counts] + [(n, 0) for n in costs + delays]:
            value = getattr(self, name)
            if value is not None and value < least:
                raise UsageError(f"engine setting {name} must be >= {least} (got {value})")
        if self.max_running > self.max_batch_tokens:
            raise UsageError(
                f"max_running ({self.max_running}) exceeds max_batch_tokens "
                f"({self.max_batch_tokens})",
                hint="every running request decodes one token per step within the budget",
            )
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

    @property
    def watermark_blocks(self) -> int:
        """KV blocks admission leaves free."""
        return int(self.watermark * self.kv_blocks)

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds, less the watermark."""
        return (self.kv_blocks - self.watermark_blocks) * self.block_size

    @property
    def max_context_tokens(self) -> int:
        """The longest prompt + output - 1 a request may have (longer ones are rejected)."""
        if self.policy == Policy.CHUNKED.value:
            return self.kv_tokens
        return min(self.kv_tokens, self.max_batch_tokens)

    def step_time_ns(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> int:
        """Duration of one step (ns), from the linear step-time model."""
        return (
            self.step_base_ns
            + self.step_prefill_token_ns * prefill_tokens
            + self.step_decode_seq_ns * decode_seqs
            + self.step_context_token_ns * context_tokens
        )
