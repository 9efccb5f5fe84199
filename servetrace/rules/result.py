"""The result of ``servetrace check``: one ``RuleResult`` per rule and the ``CheckResult``.

Numbers only, in internal units (ns for times, a ratio for fractions, per second for
rates); ``servetrace.render.check_words`` writes their words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from servetrace.comparison.catalog import MetricSpec, get_metric
from servetrace.comparison.measure import Skipped
from servetrace.comparison.workload import WorkloadMatch
from servetrace.rules.outcome import Reason, Side, Status
from servetrace.rules.rules import Rule, RuleKind


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule; numbers in internal units (ns for times).

    ``value`` is the trace's statistic, ``limit`` the SLO limit or the worst value the
    budget allows, ``baseline`` the baseline's statistic (budgets only). ``ratio``,
    ``ci_low``, ``ci_high`` and ``p_value`` are the significance test of a budget;
    ``samples`` the requests on the smaller side when a budget was ``not_testable``;
    ``missing_in`` which side had no value when the reason is a missing value.
    """

    rule: Rule
    status: Status
    reason: Reason
    value: float | None
    limit: float | None
    baseline: float | None = None
    significant: bool | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    samples: int | None = None
    missing_in: Side | None = None
    why: str | None = None  # a missing value's reason in the data's own words
    # SLOs on a latency percentile: its interval (ns; None ends are unbounded), the
    # samples behind it, and (INCONCLUSIVE) how many more would decide it.
    interval: tuple[float | None, float | None] | None = None
    interval_samples: int | None = None
    more_samples: int | None = None
    interval_confidence: float | None = None
    # Decided on the observed percentile (``gate="point"``), the interval shown beside it.
    point_gate: bool = False

    @property
    def kind(self) -> RuleKind:
        return self.rule.kind

    @property
    def spec(self) -> MetricSpec:
        return get_metric(self.rule.metric)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS


# Where the rules given to ``check`` itself (the CLI's --slo, --max-regression) come from.
GIVEN_RULES = "the command line"


@dataclass(frozen=True)
class CheckResult:
    """Every rule's result. It passes when no rule failed and, under ``require_all``,
    none was skipped. ``notes`` are what the measuring engine said about the test."""

    results: tuple[RuleResult, ...]
    significance: bool
    seed: int
    resamples: int
    confidence: float
    baseline_kind: Literal["trace", "json"] | None
    require_all: bool = False
    workload: WorkloadMatch | None = None
    notes: tuple[Skipped, ...] = ()
    allow_inconclusive: bool = False
    # What the gate ran on, and what reading it said (each naming its file).
    trace: str | None = None
    baseline_file: str | None = None
    warnings: tuple[str, ...] = ()
    # Where the rules and the baseline came from: (a config file or "command line", how
    # many rules), and the file the baseline was configured in (None: given or none).
    rule_sources: tuple[tuple[str, int], ...] = ()
    baseline_from: str | None = None

    @property
    def failures(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.FAIL)

    @property
    def inconclusive(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.INCONCLUSIVE)

    @property
    def skipped(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.SKIP)

    @property
    def passed(self) -> bool:
        return (
            not self.failures
            and not (self.require_all and self.skipped)
            and not (self.inconclusive and not self.allow_inconclusive)
        )
