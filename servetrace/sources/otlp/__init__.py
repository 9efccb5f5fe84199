"""OpenTelemetry spans as the Collector's ``file`` exporter writes them (OTLP JSON).

One JSON object per line, each an ``ExportTraceServiceRequest``:
``resourceSpans[].scopeSpans[].spans[]``, every span with ``traceId``, ``spanId``,
``name``, ``kind``, ``startTimeUnixNano`` / ``endTimeUnixNano`` (decimal strings of Unix
ns, per the proto3 JSON mapping: exact), ``attributes`` as ``[{key, value}]`` with typed
values (``stringValue``, ``intValue`` — a string —, ``doubleValue``, ``boolValue``,
``arrayValue``, ``kvlistValue``) and ``status.code`` (2 = error). Pinned to
open-telemetry/opentelemetry-proto ``opentelemetry/proto/trace/v1/trace.proto`` and the
Collector's ``exporter/fileexporter`` (JSON lines; ``rotation`` renames the full file,
with its UTC time in the name, beside the current one: names are not relied on, content
is).

Input: one file (``.json``/``.jsonl``, gzip allowed, detected by magic) or a **folder**
holding the current file and its rotated and gzipped siblings: every file whose first
line is OTLP JSON is read, in name order, as one trace. A span exported twice (a rotated
copy kept beside the original) is counted once, with a warning.

Two dialects, chosen by content in ``dispatch`` (see their modules for the mapping):

- ``vllm``: vLLM's ``llm_request`` server span (``--otlp-traces-endpoint``), with
  queue, TTFT, e2e and model prefill/decode latencies: a server-side trace with
  admissions;
- ``genai``: spans following the OpenTelemetry GenAI semantic conventions
  (``gen_ai.operation.name``, ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.response.time_to_first_chunk``), from any instrumented client or server.

Spans carry no per-token times: both dialects give a **request-level** trace. TPOT is
exact (decode / (output_tokens - 1)); the ITL distribution is unavailable, and says why.
Spans of other kinds (HTTP handlers, tools, embeddings) are counted and skipped.
"""

from servetrace.sources.otlp.dispatch import read
from servetrace.sources.otlp.spans import FORMAT, sniff_file, sniff_record

__all__ = ["FORMAT", "read", "sniff_file", "sniff_record"]
