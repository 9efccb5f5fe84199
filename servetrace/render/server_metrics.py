"""The server metrics beside the trace, in words and JSON: ``server_metrics`` (what was
read, the clock) and ``consistency`` (one object per finding, times in ms)."""

from __future__ import annotations

from typing import Any

from servetrace.analysis.server_engines import ENGINES
from servetrace.analysis.server_findings import Finding, ServerComparison
from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS
from servetrace.units import NS_PER_MS

TIME_FINDINGS = ("clock_offset",)
UNITS = {
    "clock_offset": "ms",
    "waiting_gauge": "requests",
    "running_gauge": "requests",
    "success_counter": "requests",
    "preemption_counter": "preemptions",
    "prompt_tokens_counter": "tokens",
    "generation_tokens_counter": "tokens",
    **{check.name: f"{check.per}s per bucket" for check in HISTOGRAM_CHECKS},
}


def _ms(ns: float | int | None) -> float | None:
    return None if ns is None else ns / NS_PER_MS


def _finding(f: Finding, origin_ns: int) -> dict[str, Any]:
    scale = _ms if f.name in TIME_FINDINGS else (lambda v: v)
    out: dict[str, Any] = {
        "family": f.family,
        # A histogram's unit is its engine's observation (SGLang's ITL counts tokens).
        "unit": f"{f.extra['per']}s per bucket" if "per" in f.extra else UNITS[f.name],
        "compared": f.compared,
        "max_abs": scale(f.max_abs),
        "mean_abs": scale(f.mean_abs),
        "mean_signed": scale(f.mean_signed),
        "server_total": f.server_total,
        "trace_total": f.trace_total,
        "worst_at_s": None if f.worst_at_ns is None else (f.worst_at_ns - origin_ns) / 1e9,
        "cause": f.cause,
        "unavailable": f.unavailable,
    }
    if "resets" in f.extra:
        out["resets"] = f.extra["resets"]
    if "definition" in f.extra:
        out["definition"] = f.extra["definition"]
    if "quantiles" in f.extra:
        out["percentiles"] = {
            q: {
                "trace_ms": _ms(v["trace_ns"]),
                "histogram_ms": _ms(v["histogram_ns"]),
                "error_ms": _ms(v["error_ns"]),
                "bucket_ms": None if v["bucket_ns"] is None else [_ms(b) for b in v["bucket_ns"]],
            }
            for q, v in f.extra["quantiles"].items()
        }
    return out


def server_dict(found: ServerComparison, origin_ns: int) -> dict[str, Any]:
    """The ``server_metrics`` and ``consistency`` keys of the analyze JSON (and, with
    ``--slice``, ``server_slices``)."""
    from servetrace.render.server_slices import server_slices_dict

    a = found.alignment
    per_slice = server_slices_dict(found, origin_ns)
    return {
        "server_metrics": {
            "path": found.path,
            "engine": found.engine,
            "scrapes": found.scrapes,
            "interval_ms": _ms(found.interval_ns),
            "clock": {
                "offset_ms": _ms(a.offset_ns),
                "method": a.method,
                "statement": a.statement,
                "resolution_ms": _ms(a.resolution_ns),
            },
            "families": [
                {
                    "family": r["family"],
                    "kind": r["kind"],
                    "series": r["series"],
                    "samples": r["samples"],
                }
                for r in found.families.iter_rows(named=True)
            ],
        },
        "consistency": {name: _finding(f, origin_ns) for name, f in found.findings.items()},
        **({"server_slices": per_slice} if per_slice is not None else {}),
    }


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    # Three significant digits, whole numbers past a thousand (never an exponent).
    text = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{text} ms" if unit == "ms" else text


def _counted(value: float | None, unit: str) -> str:
    """``1 request``, ``2 requests``, ``1 token per bucket``: the unit's noun agrees."""
    noun, _, rest = unit.partition(" ")
    if value == 1 and noun.endswith("s") and noun != "ms":
        noun = noun[:-1]
    return f"{noun} {rest}".rstrip()


def _whose(engine: str) -> str:
    """Whose families were read, said when not vLLM's (the default, whose lines stay as
    they were)."""
    return "" if engine == "vllm" else f" ({ENGINES[engine].title}'s families)"


def server_markdown(found: ServerComparison, origin_ns: int) -> str:
    head, *rest = server_lines(found, origin_ns, per_slice=False)
    text = f"\n### {head}\n\n" + "".join(f"- {line.strip()}\n" for line in rest)
    per_slice = server_dict(found, origin_ns).get("server_slices")
    if per_slice is not None:
        from servetrace.render.server_slices import server_slice_markdown

        text += server_slice_markdown(per_slice)
    return text


def server_lines(found: ServerComparison, origin_ns: int, per_slice: bool = True) -> list[str]:
    """The "server metrics vs the trace" section: the clock, then one line per finding
    (and with ``--slice`` the per-slice table)."""
    report = server_dict(found, origin_ns)
    head = report["server_metrics"]
    clock = head["clock"]
    lines = [
        "server metrics vs the trace",
        f"  {head['path']}{_whose(head['engine'])}: {head['scrapes']:,} scrapes"
        + (f" every {head['interval_ms']:g} ms" if head["interval_ms"] else "")
        + f"; clock: {clock['statement']} (offset {clock['offset_ms']:g} ms"
        + (f" ± {clock['resolution_ms']:g} ms)" if clock["resolution_ms"] else ")"),
    ]
    for name, f in report["consistency"].items():
        if name == "clock_offset":
            continue
        if f["unavailable"]:
            lines.append(f"  {name}: unavailable ({f['unavailable']})")
            continue
        text = (
            f"  {name}: max |server − trace| {_num(f['max_abs'], f['unit'])} "
            f"{_counted(f['max_abs'], f['unit'])}, "
            f"mean {_num(f['mean_abs'], f['unit'])} over {f['compared']:,}"
        )
        if f["server_total"] is not None:
            text += f"; totals {_num(f['server_total'], '')} vs {_num(f['trace_total'], '')}"
        if f["max_abs"]:
            text += f"; worst at {f['worst_at_s']:.3f} s — likely: {f['cause']}"
        lines.append(text)
        for q, p in (f.get("percentiles") or {}).items():
            if p["histogram_ms"] is None or p["trace_ms"] is None:
                continue
            lo, hi = p["bucket_ms"]
            top = "+Inf" if hi is None else f"{hi:g}"
            lines.append(
                f"    {q}: {p['histogram_ms']:,.1f} ms from the buckets vs {p['trace_ms']:,.1f} "
                f"ms exact (error {p['error_ms']:+,.1f} ms; bucket {lo:g}–{top} ms)"
            )
    if per_slice and "server_slices" in report:
        from servetrace.render.server_slices import server_slice_table

        lines += ["", *server_slice_table(report["server_slices"])]
    return lines
