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


def display_name(metric: str, naming: str = "servetrace") -> str:
    return TOOL_NAMES.get(naming, {}).get(metric, metric)
