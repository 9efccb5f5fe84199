"""`analyze RESULTS_FOLDER` of an inference-perf run: each stage's client summary against
its server Prometheus summary, in the format asked for."""

from __future__ import annotations

from pathlib import Path

from servetrace.cli._report import deliver
from servetrace.errors import UsageError
from servetrace.render.formats import SummaryFormat


def stage_pairs_view(path: str, fmt: SummaryFormat, output: Path | None) -> bool:
    """An inference-perf results folder: each stage's client summary against its server
    Prometheus summary (``render/stage_pairs``); False for any other input."""
    from servetrace.sources.server_metrics.inference_perf import stage_folder

    if "://" in path or stage_folder(Path(path)) is None:
        return False
    from servetrace import api
    from servetrace.render import stage_pairs as render

    found = api.inference_perf_stages(path)
    if fmt is SummaryFormat.json:
        from servetrace.render.summary import render_json

        deliver(render_json(render.stage_pairs_dict(found)) + "\n", output)
    elif fmt is SummaryFormat.markdown:
        deliver(render.stage_pairs_markdown(found), output)
    elif fmt is SummaryFormat.csv:
        raise UsageError("an inference-perf stage comparison has no CSV form", hint="-f json")
    else:
        deliver(render.stage_pairs_table(found), output)
    return True
