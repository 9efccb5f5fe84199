"""``servetrace import``: another tool's per-request export → a canonical trace file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servetrace.cli._app import app, err_console, examples, guarded, warn
from servetrace.settings import IMPORT_FORMATS


@app.command(
    "import",
    epilog=examples(
        "servetrace import aiperf profile_export.jsonl -o trace.parquet",
        "servetrace import auto metrics_dir/ -o sglang.parquet",
    ),
)
@guarded
def import_command(
    fmt: Annotated[
        str,
        typer.Argument(metavar="FORMAT", help="One of: " + ", ".join(IMPORT_FORMATS) + ", auto."),
    ],
    file: Annotated[
        Path, typer.Argument(help="The tool's per-request export (or the engine's folder).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Canonical trace to write (.parquet, .csv, …).")
    ],
) -> None:
    """Convert another tool's or engine's export into a canonical trace file.

    Reads AIPerf, GenAI-Perf, vLLM bench, GuideLLM, LLMPerf, OTLP spans, SGLang,
    TensorRT-LLM and MLCommons endpoints exports."""
    from servetrace.outputs import check_frame_output, refuse_overwriting_inputs, write_frame
    from servetrace.sources.registry import import_file

    check_frame_output(output, "--output")
    refuse_overwriting_inputs([("--output", output)], [file])
    result = import_file(file, None if fmt == "auto" else fmt)
    for message in result.warnings:
        warn(f"{file}: {message}")
    write_frame(result.events, output)
    kind = "request-level (no per-token times)" if result.request_level else "per-token"
    sides = sorted(str(s) for s in result.events["source"].drop_nulls().unique().to_list())
    err_console.print(
        f"wrote {output}: {result.events.height:,} events from {result.records:,} "
        f"{result.format} records, {kind}, {'/'.join(sides) or 'client'}-side",
        markup=False,
    )
