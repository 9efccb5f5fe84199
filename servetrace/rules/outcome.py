"""What a rule's outcome can be, and why a trace has no value for a statistic.

A rule ends in one of three states (``Status``) for one reason (``Reason``, a code; the
words are ``servetrace.render.check_words``'). When a trace has no value for a statistic,
the reason decides the state, by one rule:

- **FAIL** when the run produced nothing to measure: no valid request (``no_requests``;
  every rule fails on such a trace, so an empty or broken run can never pass a gate), no
  completed request (``no_completed``), or a window of zero length (``zero_window``).
  The trace could have had the value; that it has none is the run's failure.
- **SKIP** when the trace *cannot express* the statistic, whatever the run did: a
  client-side trace has no admission, hence no ``queue_wait``/``prefill``, and sees no
  preemption (``client_trace``); a request-level export has no per-token times, hence no
  ITL (``no_token_times``); a trace without send times has no throughput window
  (``arrival_unknown``); without prompt lengths there is no ``total_tokens_per_s``
  (``prompt_unknown``); without output-token counts (a request-level trace whose tool
  logged none: ``analysis/output_counts.py``) there is no output/total tok/s,
  ``output_tokens`` or ``tpot`` (``output_count_unknown``); completed requests none of
  which has the metric (``tpot`` of
  one-token answers: ``metric_missing``); ``stalls.*`` without the engine's steps
  (``no_steps``). A skipped rule passes the check unless
  ``require_all`` (``--require-all``) asks for every rule to be checked.

A fourth state, **INCONCLUSIVE** (``undecided``), belongs to SLOs on a latency
percentile whose confidence interval contains the limit (``rules.percentile_gate``); it
fails the check unless ``allow_inconclusive`` (``--allow-inconclusive``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from servetrace.comparison.catalog import MetricSpec

Side = Literal["trace", "baseline"]


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    # The percentile's confidence interval straddles the SLO limit (rules.percentile_gate).
    INCONCLUSIVE = "inconclusive"


class Reason(str, Enum):
    # PASS
    WITHIN = "within"  # the limit or budget holds
    NOT_SIGNIFICANT = "not_significant"  # beyond the budget, but not significantly
    NOT_TESTABLE = "not_testable"  # beyond the budget, too few requests to test
    # FAIL
    BEYOND = "beyond"  # the limit or budget is exceeded (and significant, if tested)
    NO_REQUESTS = "no_requests"
    NO_COMPLETED = "no_completed"
    ZERO_WINDOW = "zero_window"
    # SKIP
    CLIENT_TRACE = "client_trace"
    NO_TOKEN_TIMES = "no_token_times"
    ARRIVAL_UNKNOWN = "arrival_unknown"
    PROMPT_UNKNOWN = "prompt_unknown"
    OUTPUT_UNKNOWN = "output_count_unknown"
    METRIC_MISSING = "metric_missing"
    NO_STEPS = "no_steps"  # stalls.* without the engine's steps (--steps)
    # INCONCLUSIVE
    UNDECIDED = "undecided"  # the percentile's interval contains the limit

    @property
    def status(self) -> Status:
        return _STATUS[self]


_STATUS: dict[Reason, Status] = {
    **dict.fromkeys((Reason.WITHIN, Reason.NOT_SIGNIFICANT, Reason.NOT_TESTABLE), Status.PASS),
    **dict.fromkeys(
        (Reason.BEYOND, Reason.NO_REQUESTS, Reason.NO_COMPLETED, Reason.ZERO_WINDOW), Status.FAIL
    ),
    **dict.fromkeys(
        (
            Reason.CLIENT_TRACE,
            Reason.NO_TOKEN_TIMES,
            Reason.ARRIVAL_UNKNOWN,
            Reason.PROMPT_UNKNOWN,
            Reason.OUTPUT_UNKNOWN,
            Reason.METRIC_MISSING,
            Reason.NO_STEPS,
        ),
        Status.SKIP,
    ),
    Reason.UNDECIDED: Status.INCONCLUSIVE,
}
# Metrics only the server sees: a client logs neither admission nor preemption.
SERVER_SIDE = ("queue_wait", "prefill", "requeued", "preemptions")
# Metrics made of the time between output tokens.
TOKEN_TIMED = ("itl", "itl_max", "fluidity")
# Statistics over the trace window (first arrival to last terminal event).
RATES = ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s")


@dataclass(frozen=True)
class TraceFacts:
    """What a trace can express, as far as a missing value needs explaining."""

    requests_valid: int
    completed: int
    client: bool
    ticks_available: bool
    arrival_known: bool
    window_known: bool
    preemption_events: int | None = None
    # Metrics and rate statistics unavailable for unknown output counts
    # (analysis.unavailable's OUTPUT_RATES / OUTPUT_COUNTED that apply to the trace).
    output_unknown: frozenset[str] = frozenset()
    steps_joined: bool = False  # the trace's gaps were joined to engine steps (--steps)


def precheck(facts: TraceFacts, spec: MetricSpec) -> Reason | None:
    """A reason known before looking at the value (the value may exist but mean nothing).

    A client trace's preemption count is 0 because a client cannot see preemptions, not
    because there were none.
    """
    if facts.requests_valid == 0:
        return Reason.NO_REQUESTS
    if spec.name == "preemptions" and facts.client and not facts.preemption_events:
        return Reason.CLIENT_TRACE
    return None


def missing_reason(facts: TraceFacts, spec: MetricSpec, stat: str) -> Reason:
    """Why the trace has no value for ``spec.stat`` (see the module docstring)."""
    if facts.requests_valid == 0:
        return Reason.NO_REQUESTS
    if spec.kind == "rate" and stat in RATES:
        if not facts.arrival_known:
            return Reason.ARRIVAL_UNKNOWN
        if facts.completed == 0:
            return Reason.NO_COMPLETED
        if not facts.window_known:
            return Reason.ZERO_WINDOW
        if spec.name == "throughput" and stat in facts.output_unknown:
            return Reason.OUTPUT_UNKNOWN
        return Reason.PROMPT_UNKNOWN  # the only other rate that can be missing
    if spec.name == "stalls" and not facts.steps_joined:
        return Reason.NO_STEPS
    if facts.completed == 0:
        return Reason.NO_COMPLETED
    if spec.name in SERVER_SIDE and facts.client:
        return Reason.CLIENT_TRACE
    if spec.name in TOKEN_TIMED and not facts.ticks_available:
        return Reason.NO_TOKEN_TIMES
    if spec.name in facts.output_unknown:
        return Reason.OUTPUT_UNKNOWN
    return Reason.METRIC_MISSING
