"""Which dialect reads an OTLP export: vLLM's ``llm_request`` spans when there are any,
else the GenAI semantic-convention spans; the other spans are counted and skipped.

The one module that knows both dialects, so neither dialect nor ``spans`` imports the
other.
"""

from __future__ import annotations

from pathlib import Path

from servetrace.errors import InputError
from servetrace.sources._engine import agree, folder_files
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.otlp import genai, vllm
from servetrace.sources.otlp.spans import Span, read_spans, sniff_file


def read(path: str | Path) -> ImportResult:
    """Import a Collector file export (or a folder of them, rotated and gzipped)."""
    path = Path(path)
    files = folder_files(path, sniff_file) if path.is_dir() else [path]
    notes = Notes()
    spans: list[Span] = []
    for file in files:
        spans.extend(read_spans(file))
    if not spans:
        raise InputError(f"{path}: no spans: the export holds no resourceSpans[].spans[]")
    spans = _deduplicate(spans, notes)
    vllm_spans = [s for s in spans if vllm.is_request_span(s)]
    if vllm_spans:
        chosen, dialect, import_spans = vllm_spans, vllm.DIALECT, vllm.import_spans
    else:
        chosen = [s for s in spans if genai.is_request_span(s)]
        dialect, import_spans = genai.DIALECT, genai.import_spans
        if not chosen:
            names = sorted({s.name for s in spans})[:5]
            raise InputError(
                f"{path}: none of the {len(spans)} spans is an LLM request: no vLLM "
                f"'llm_request' span and no GenAI span (gen_ai.operation.name chat or "
                f"text_completion); span names: {', '.join(names)}",
                hint="export the engine's request spans (vLLM: --otlp-traces-endpoint)",
            )
    skipped = len(spans) - len(chosen)
    if skipped:
        notes.add(
            f"{count_phrase(skipped, 'span')} that "
            f"{agree(skipped, 'is not an LLM request span', 'are not LLM request spans')} "
            f"({dialect} dialect) were skipped"
        )
    if len(files) > 1:
        notes.add(f"read {len(files)} files of the folder as one trace")
    return import_spans(chosen, path=path, notes=notes)


def _deduplicate(spans: list[Span], notes: Notes) -> list[Span]:
    seen: set[tuple[str, str]] = set()
    unique: list[Span] = []
    for span in spans:
        key = (span.trace_id, span.span_id)
        if span.span_id and key in seen:
            continue
        seen.add(key)
        unique.append(span)
    twice = len(spans) - len(unique)
    if twice:
        notes.add(
            f"{count_phrase(twice, 'span')} {agree(twice, 'appears', 'appear')} "
            "twice (same traceId "
            "and spanId, e.g. a rotated copy beside the original): counted once"
        )
    return unique
