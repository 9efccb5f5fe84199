"""inference-perf's client against server per stage: JSON, a table, Markdown (times in ms)."""

from __future__ import annotations

from typing import Any

from servetrace.analysis.stage_pairs import DIFFERENCES, StagePairs
from servetrace.render._json import VERSIONS
from servetrace.render.fit import plain_lines
from servetrace.render.markdown_text import md_table


def _value(v: float | None, unit: str) -> float | None:
    return None if v is None else (v * 1000 if unit == "s" else v)


def stage_pairs_dict(found: StagePairs) -> dict[str, Any]:
    stages = []
    for s in found.stages:
        pairs = [
            {
                **p,
                "unit": "ms" if p["unit"] == "s" else p["unit"],
                "client": _value(p["client"], p["unit"]),
                "server": _value(p["server"], p["unit"]),
            }
            for p in s["pairs"]
        ]
        stages.append({**s, "pairs": pairs})
    return {
        **VERSIONS,
        "inputs": [found.path],
        "source": "inference-perf",
        "differences": DIFFERENCES,
        "stages": stages,
    }


def _cell(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.4g}"


def _rows(found: StagePairs) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for s in stage_pairs_dict(found)["stages"]:
        for p in s["pairs"]:
            rows.append(
                (
                    str(s["stage"]),
                    f"{p['quantity']} {p['stat']}",
                    p["unit"],
                    _cell(p["client"]),
                    _cell(p["server"]),
                    "–" if p["ratio"] is None else f"{p['ratio']:.3g}×",
                    p["difference"],
                )
            )
    return rows


HEAD = ("stage", "quantity", "unit", "client", "server", "server/client", "difference")


def _notes(found: StagePairs) -> list[str]:
    lines = [f"{key}: {text}" for key, text in DIFFERENCES.items()]
    for s in found.stages:
        window = s["server_window_s"]
        lines.append(
            f"stage {s['stage']}: client window {_cell(s['client_window_s'])} s, server "
            f"window {_cell(window)} s (count ÷ rate); server rate "
            f"{_cell(s['excess_rate_factor'])}× the client's"
            + (
                "; unavailable on the server: " + ", ".join(s["server_unavailable"])
                if s["server_unavailable"]
                else ""
            )
        )
    return lines


def stage_pairs_table(found: StagePairs) -> str:
    text = [
        f"inference-perf client vs server per stage: {found.path}",
        *plain_lines([HEAD, *_rows(found)]),
    ]
    zero = "0 in every statistic: inference-perf writes 0.0 when its query fails"
    return "\n".join([*text, "", *_notes(found), f"(unavailable: {zero})"]) + "\n"


def stage_pairs_markdown(found: StagePairs) -> str:
    out = [f"## inference-perf client vs server per stage: `{found.path}`", ""]
    out += md_table(HEAD, _rows(found), "l" * len(HEAD))
    out += ["", *(f"- {line}" for line in _notes(found))]
    return "\n".join(out) + "\n"
