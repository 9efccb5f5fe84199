"""Regenerate the engine fixtures: ``python tests/data/engines/make_fixtures.py``.

The files are written by ``tests/sources/engine_writers.py`` (which follows each engine's
source, cited in its PROVENANCE.md) from ``fixture_requests()``; the same bytes come out
every time.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.sources.engine_writers import (  # noqa: E402
    fixture_requests,
    genai_span,
    trtllm_item,
    vllm_span,
    write_mlcommons,
    write_otlp,
    write_sglang,
    write_trtllm,
)


def main() -> None:
    reqs = fixture_requests()
    otlp = HERE / "otlp"
    otlp.mkdir(exist_ok=True)
    # vLLM 0.33: no span for aborted requests, no finish_reasons attribute.
    finished = [r for r in reqs if r.outcome == "completed"]
    write_otlp(
        otlp / "spans.jsonl",
        [vllm_span(r, i, finish_reasons=False, pre_engine_ms=0.9) for i, r in enumerate(finished)],
    )
    write_otlp(
        otlp / "genai_client.jsonl",
        [genai_span(r, i) for i, r in enumerate(reqs)],
        service="chat-app",
    )
    folder = otlp / "rotated"
    folder.mkdir(exist_ok=True)
    spans = [vllm_span(r, i) for i, r in enumerate(reqs)]
    write_otlp(folder / "traces-2026-03-02T10-00-00.000.json", spans[:3])
    rotated = write_otlp(folder / "traces-2026-03-02T11-00-00.000.json", spans[3:6])
    (folder / (rotated.name + ".gz")).write_bytes(gzip.compress(rotated.read_bytes(), mtime=0))
    rotated.unlink()
    write_otlp(folder / "traces.json", spans[5:])  # spans[5] also in the rotated copy
    sglang = HERE / "sglang"
    sglang.mkdir(exist_ok=True)
    retracted = [
        reqs[0],
        reqs[1],
        reqs[2].__class__(**{**reqs[2].__dict__, "retractions": 2}),
        *reqs[3:],
    ]
    write_sglang(sglang / "sglang-request-metrics-20260302_10.log", retracted[:4], version="0.5")
    write_sglang(sglang / "sglang-request-metrics-20260302_11.log", retracted[4:], version="0.5")
    newer = HERE / "sglang-newer"
    newer.mkdir(exist_ok=True)
    write_sglang(newer / "sglang-request-metrics-20260302_10.log", reqs, version="newer")
    trt = HERE / "trtllm"
    trt.mkdir(exist_ok=True)
    items = [trtllm_item(r, i + 1) for i, r in enumerate(finished)]
    write_trtllm(trt / "perf_metrics.json", [items[:2], [], items[2:]])
    ml = HERE / "mlcommons"
    ml.mkdir(exist_ok=True)
    for name, schema in (("events.db", "current"), ("events_removed_schema.db", "removed")):
        (ml / name).unlink(missing_ok=True)
        write_mlcommons(ml / name, reqs, schema=schema)
    print(json.dumps(sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*") if p.is_file())))


if __name__ == "__main__":
    main()
