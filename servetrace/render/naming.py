"""What each benchmark tool calls servetrace's metrics (``--naming``).

Names only: the numbers never change. A metric a tool has no name for keeps servetrace's
name. Definitions differ in places, so a name is only mapped when the tool's metric is the
same quantity: GuideLLM's ``time_per_output_token`` includes TTFT and is therefore *not*
our ``tpot``; LLMPerf's ITL divides by chunks, not tokens.
"""

from __future__ import annotations

from enum import Enum


class Naming(str, Enum):
    servetrace = "servetrace"
    vllm = "vllm"
    aiperf = "aiperf"
    genai_perf = "genai-perf"
    guidellm = "guidellm"
    mlperf = "mlperf"


# servetrace metric -> the tool's name for the same quantity.
TOOL_NAMES: dict[str, dict[str, str]] = {
    "vllm": {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2el"},
    "aiperf": {
        "ttft": "time_to_first_token",
        "itl": "inter_chunk_latency",
        "tpot": "inter_token_latency",
        "response": "request_latency",
    },
    "genai-perf": {
        "ttft": "time_to_first_token",
        "tpot": "inter_token_latency",
        "response": "request_latency",
    },
    "guidellm": {
        "ttft": "time_to_first_token",
        "tpot": "inter_token_latency",
        "e2e": "request_latency",
    },
    "mlperf": {"ttft": "TTFT", "tpot": "TPOT", "e2e": "latency"},
}

# How each tool treats a streamed chunk carrying several tokens (docs/reference.md table).
CHUNK_HANDLING: dict[str, str] = {
    "servetrace": "itl = gap between chunks; tpot = decode / (tokens - 1)",
    "vllm": "itl = gap between chunks; tpot = (e2el - ttft) / (tokens - 1)",
    "aiperf": "inter_chunk_latency = gap between chunks; inter_token_latency per token",
    "genai-perf": "inter_token_latency = (last - first chunk) / (tokens - 1)",
    "guidellm": "inter_token_latency per token; time_per_output_token = e2e / tokens",
    "mlperf": "TPOT = (latency - TTFT) / (tokens - 1)",
}


def display_name(metric: str, naming: str = "servetrace") -> str:
    return TOOL_NAMES.get(naming, {}).get(metric, metric)
