"""``servetrace.check``: a trace, rules and a baseline → ``CheckResult`` (the CI gate)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.api._analyze import (
    GoodputLike,
    PathsLike,
    analyze,
    as_targets,
    path_texts,
    require_number,
)
from servetrace.api._compare import label_of
from servetrace.errors import InputError, UsageError
from servetrace.rules.baseline import ReportBaseline, read_report
from servetrace.rules.config import CheckConfig, load_config
from servetrace.rules.evaluate import evaluate
from servetrace.rules.grammar import parse_rules
from servetrace.rules.result import GIVEN_RULES, CheckResult
from servetrace.rules.rules import Rule
from servetrace.settings import PercentileGate


def check_config(config: str | os.PathLike[str] | None) -> CheckConfig:
    """The rules file ``check`` uses: ``config``, else servetrace.toml found from the cwd up."""
    return load_config(Path(config) if config is not None else None)


def check(
    trace: PathsLike | Analysis,
    rules: str | Sequence[str | Rule] = (),
    *,
    baseline: PathsLike | Analysis | Mapping[str, Any] | None = None,
    goodput: GoodputLike = (),
    config: str | os.PathLike[str] | None = None,
    significance: bool = True,
    require_all: bool = False,
    seed: int | None = None,
    resamples: int | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
    fluidity: str | None = None,
    confidence: float | None = None,
    allow_inconclusive: bool = False,
    gate: PercentileGate | str = PercentileGate.interval,
    steps: str | os.PathLike[str] | None = None,
    steps_from: str | None = None,
    server_metrics: str | os.PathLike[str] | None = None,
    server_metrics_from: str | None = None,
) -> CheckResult:
    """Evaluate SLO rules and regression budgets on a trace (the CI gate).

    ``rules`` adds to those of the config file (``config``, or servetrace.toml /
    ``[tool.servetrace]`` found from the working directory up, as the CLI finds it). The
    baseline is a trace, an ``Analysis``, the parsed JSON report of ``analyze --format
    json`` or a path to one; without it the config's baseline is used, if any.
    ``confidence`` (default: the config's, else 0.95) is that of every interval: the
    bootstrap of budgets and the percentile interval of SLOs. An SLO on a latency
    percentile whose interval contains the limit is INCONCLUSIVE and fails the check
    unless ``allow_inconclusive``; ``gate="point"`` decides it on the observed percentile
    instead (the interval is still reported). ``steps`` (the engine's step records of the
    trace, format ``steps_from`` or detected) gives ``stalls.*`` rules their values.
    """
    settings = check_config(config)
    checked = list(settings.rules)
    for item in [rules] if isinstance(rules, str) else rules:
        checked.extend(parse_rules(item) if isinstance(item, str) else [item])
    given = len(checked) - len(settings.rules)
    sources = tuple(
        (where, count)
        for where, count in (
            (str(settings.source), len(settings.rules)),
            (GIVEN_RULES, given),
        )
        if count
    )
    if not checked:
        raise UsageError(
            "no rules to check",
            hint="give --slo 'ttft.p99<=500ms' or --max-regression 'ttft.p99:+10%', "
            "or put them in servetrace.toml",
        )
    if seed is not None:
        require_number("seed", seed, 0, 2**64 - 1)
    if resamples is not None:
        require_number("resamples", resamples, 100, 10_000_000)
    if confidence is not None:
        require_number("confidence", confidence, 0.5, 0.999999)
    targets = (*settings.goodput, *as_targets(goodput))
    if fluidity is None and any(rule.metric == "fluidity" for rule in checked):
        raise UsageError(
            "fluidity rules need per-token deadlines",
            hint="give --fluidity ttft=500ms,tbt=50ms (Etalon's TTFT and TBT targets)",
        )
    if server_metrics is None and any(r.metric.startswith("consistency.") for r in checked):
        raise UsageError(
            "consistency rules need the server's metrics",
            hint="give --server-metrics FILE (its Prometheus series)",
        )
    reading: dict[str, Any] = {
        "columns": columns,
        "time_unit": time_unit,
        "event_map": event_map,
        "from_format": from_format,
    }
    notes: list[str] = []

    def load(side: PathsLike | Analysis, with_steps: bool = False) -> Analysis:
        if isinstance(side, Analysis):
            analysis = side
        else:  # in memory: budgets are tested on every gap
            analysis = analyze(
                side,
                goodput=targets,
                streaming=False,
                fluidity=fluidity,
                steps=steps if with_steps else None,
                steps_from=steps_from if with_steps else None,
                **reading,
            )
        notes.extend(analysis.read_warnings)  # already name their file
        notes.extend(f"{label_of(side)}: {message}" for message in analysis.summary.warnings)
        return analysis

    analysis = load(trace, with_steps=True)
    if steps is not None and isinstance(trace, Analysis) and trace.stalls is None:
        from servetrace.api._stalls import with_stalls

        analysis = with_stalls(analysis, steps, steps_from)
    if server_metrics is not None:
        from servetrace.api._server_metrics import with_server_metrics

        analysis = with_server_metrics(analysis, server_metrics, server_metrics_from)
    chosen = baseline if baseline is not None else settings.baseline
    reference: Analysis | ReportBaseline | Mapping[str, Any] | None = None
    label: str | None = None
    if isinstance(chosen, Mapping):
        reference, label = chosen, None
    elif chosen is not None:
        label = label_of(chosen)
        if isinstance(chosen, Analysis):
            reference = chosen
        else:
            texts = path_texts(chosen)
            if len(texts) == 1 and not any(ch in texts[0] for ch in "*?["):
                if not Path(texts[0]).exists():
                    raise InputError(f"{texts[0]}: baseline not found")
                reference = read_report(Path(texts[0]))
            if reference is None:
                reference = load(chosen)
    result = evaluate(
        analysis,
        checked,
        reference,
        goodput=targets,
        significance=significance and settings.significance,
        require_all=require_all or settings.require_all,
        seed=settings.seed if seed is None else int(seed),
        resamples=settings.resamples if resamples is None else int(resamples),
        confidence=settings.confidence if confidence is None else float(confidence),
        allow_inconclusive=allow_inconclusive,
        gate=gate,
    )
    configured = baseline is None and settings.baseline is not None
    return replace(
        result,
        trace=label_of(trace),
        baseline_file=label,
        warnings=tuple(notes),
        rule_sources=sources,
        baseline_from=str(settings.source) if configured else None,
    )
