"""The server's own per-request figures (``analysis.server_reported``) in words and JSON:
the ``server_reported`` key of the analyze report, and the lines under the table. Every
view names them as the engine's, beside (never instead of) the trace's own figures."""

from __future__ import annotations

from typing import Any

from servetrace.analysis.server_reported import DEFINITIONS, ServerReported
from servetrace.render._json import clean
from servetrace.render.distribution import distribution_ms
from servetrace.units import NS_PER_MS

SOURCE = "vLLM per-request metrics and usage in the response body"
CLOCK = "server"
TITLE = "Server-reported, per request (the engine's figures, not this trace's)"


def server_reported_dict(report: ServerReported) -> dict[str, Any]:
    """``{"server_reported": {source, clock, completed, metrics: {NAME: {unit, …,
    definition}}, prefix_cache, spec_decode}}``."""
    return {
        "server_reported": {
            "source": SOURCE,
            "clock": CLOCK,
            "completed": report.completed,
            "metrics": {
                name: {**distribution_ms(stats), "definition": DEFINITIONS[name]}
                for name, stats in report.metrics.items()
            },
            "prefix_cache": _clean(report.prefix_cache),
            "spec_decode": _clean(report.spec_decode),
        }
    }


def _clean(part: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if part is None else {k: clean(v) for k, v in part.items()}


def _ms(value: Any) -> str:
    return "—" if value is None else f"{value / NS_PER_MS:,.2f}"


def server_reported_lines(report: ServerReported) -> list[str]:
    """The figures in words, one line each (the table's and Markdown's)."""
    out = [f"server-reported ({SOURCE}; the engine's clock):"]
    for name, stats in report.metrics.items():
        out.append(
            f"  {name}: {stats['count']:,} of {report.completed:,} completed, mean "
            f"{_ms(stats['mean'])} ms, p50 {_ms(stats['p50'])} ms, p99 {_ms(stats['p99'])} ms "
            f"— {DEFINITIONS[name]}"
        )
    cache = report.prefix_cache
    if cache is not None:
        share = "" if cache["hit_fraction"] is None else f" ({cache['hit_fraction']:.1%})"
        out.append(
            f"  prefix cache: {cache['cached_tokens']:,} of {cache['prompt_tokens']:,} prompt "
            f"tokens cached{share} over {cache['requests']:,} requests"
        )
    spec = report.spec_decode
    if spec is not None:
        rate = "" if spec["acceptance_rate"] is None else f" ({spec['acceptance_rate']:.1%})"
        length = spec["mean_acceptance_length"]
        per_step = spec["output_tokens_per_step"]
        out.append(
            f"  speculative decoding: {spec['accepted_tokens']:,} of {spec['draft_tokens']:,} "
            f"drafted tokens accepted{rate} over {spec['steps']:,} verify steps of "
            f"{spec['requests']:,} requests; mean acceptance length "
            f"{'—' if length is None else f'{length:.2f}'}, output tokens per step "
            f"{'—' if per_step is None else f'{per_step:.2f}'}"
        )
    return out
