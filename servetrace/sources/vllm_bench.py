"""vLLM serving benchmark results: ``vllm bench serve --save-result [--save-detailed]`` and
the older ``benchmarks/benchmark_serving.py --save-result``.

The file is one JSON object with run-level scalars (``request_rate``, ``mean_ttft_ms``, …)
and parallel per-request arrays in request order:

- ``ttfts``: time to first token, **seconds** (0.0 for a request that produced nothing);
- ``itls``: per request, the gaps between consecutive output chunks, **seconds**;
- ``output_lens`` / ``input_lens``: token counts; ``errors``: "" when the request succeeded;
- ``start_times`` (newer vLLM only): the client's ``time.perf_counter()`` at send, seconds
  on a process-local monotonic clock (only differences between requests mean anything).

Mapping: arrival = ``start_times[i]`` (or 0 when the file has none: ``arrival_known`` is
then False and every request's times are relative to its own send); first token = arrival
+ ``ttfts[i]``; ticks = first token + running sum of ``itls[i]`` (each gap rounded once to
ns, summed in integers); completion = the last tick. A chunk's token count is not
recorded: every tick carries ``tokens=1`` and ``output_tokens`` on the completion row is
``output_lens[i]`` (``len(itls) == output_lens - 2`` means one chunk carried two tokens).
A failed request (non-empty ``errors[i]``, or no first token) ends with ``error`` (an
errored request, not a cancellation) at its last known time with ``terminal_known=False``,
the error text in ``error`` and its last line (the exception, e.g. ``ClientResponseError:
429``) as ``error_type``, the code it is counted under: vLLM does not record when it
failed. Admission does not exist in a client-side file.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.sources.events import (
    ImportResult,
    Notes,
    count_phrase,
    error_type_of,
    import_result,
)
from servetrace.sources.fields import Fields
from servetrace.sources.reading import load_document
from servetrace.sources.times import cumulative_ticks, with_ns
from servetrace.units import NS_PER_S as _NS_PER_S

FORMAT = "vllm-bench"
_ARRAYS = ("ttfts", "itls", "output_lens", "input_lens", "errors", "start_times", "e2els")


def sniff(doc: Any) -> bool:
    """True for a vLLM benchmark result object."""
    return isinstance(doc, dict) and "ttfts" in doc and "itls" in doc


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    doc = load_document(
        path, sniff, "a vLLM benchmark result", "a JSON object with 'ttfts' and 'itls' arrays"
    )
    fields = Fields(path, "vLLM benchmark")
    notes = Notes()

    arrays: dict[str, list[Any]] = {}
    for key in _ARRAYS:
        value = fields.array(
            doc, key, "top level", required=key in ("ttfts", "itls", "output_lens")
        )
        if value is not None:
            arrays[key] = value
    count = len(arrays["ttfts"])
    if count == 0:
        raise fields.error("top level", "no requests: 'ttfts' is empty")
    for key, values in arrays.items():
        if len(values) != count:
            raise fields.error(
                "top level",
                f"field '{key}' has {len(values)} entries but 'ttfts' has {count}; "
                "the per-request arrays must be parallel",
            )

    arrival_known = "start_times" in arrays
    arrays = {key: arrays.get(key, [None] * count) for key in _ARRAYS}

    def where(index: int) -> str:
        return f"request {index}"

    errors = [_error_text(value) for value in arrays["errors"]]
    frame = pl.DataFrame(
        {
            "request_id": [str(i) for i in range(count)],
            "ttft_s": fields.column(arrays["ttfts"], "ttfts", where, nullable=False, minimum=0),
            "itls_s": fields.float_lists(arrays["itls"], "itls", where),
            "output_lens": fields.column(
                arrays["output_lens"], "output_lens", where, integer=True, minimum=0
            ),
            "input_lens": fields.column(
                arrays["input_lens"], "input_lens", where, integer=True, minimum=0
            ),
            "start_s": fields.column(arrays["start_times"], "start_times", where),
            "e2e_s": fields.column(arrays["e2els"], "e2els", where, minimum=0),
            "error": pl.Series(errors, dtype=pl.Utf8),
        }
    )
    if not arrival_known:
        notes.add(
            "this vLLM result has no per-request send times ('start_times'); every arrival "
            "is set to 0, so times are relative to each request's own send: TTFT, ITL and "
            "TPOT are exact, throughput and concurrency are unavailable"
        )

    frame = with_ns(
        frame,
        {"start_s": "start_times", "itls_s": "itls", "ttft_s": "ttfts", "e2e_s": "e2els"},
        _NS_PER_S,
        lambda index: f"{path}: {where(index)}",
    )
    requests = (
        frame.with_columns(
            arrival_ns=pl.col("start_ns").fill_null(0),
            gaps_ns=pl.col("itls_ns"),
        )
        .with_columns(
            first_ns=pl.when(pl.col("ttft_s") > 0).then(pl.col("arrival_ns") + pl.col("ttft_ns")),
        )
        .with_columns(ticks_ns=cumulative_ticks(pl.col("first_ns"), pl.col("gaps_ns")))
        .with_columns(
            completed=pl.col("error").is_null() & pl.col("first_ns").is_not_null(),
            last_tick=pl.col("ticks_ns").list.last(),
        )
        .with_columns(
            terminal=pl.when(pl.col("completed"))
            .then(pl.lit("completion"))
            .otherwise(pl.lit("error")),
            terminal_ns=pl.when(pl.col("completed"))
            .then(
                pl.max_horizontal(
                    pl.col("last_tick"),
                    pl.col("arrival_ns") + pl.col("e2e_ns"),
                )
            )
            .otherwise(pl.coalesce("last_tick", "arrival_ns")),
            terminal_known=pl.col("completed"),
            output_tokens=pl.when(pl.col("completed")).then(pl.col("output_lens")),
            prompt_tokens=pl.col("input_lens"),
            error=pl.when(pl.col("completed"))
            .then(None)
            .otherwise(pl.col("error").fill_null("no output token received")),
        )
        .with_columns(error_type=error_type_of(pl.col("error")))
    )

    completed = requests.filter(pl.col("completed"))
    failed = count - completed.height
    if failed:
        notes.add(
            f"{count_phrase(failed, 'request')} failed or produced no output; each ends with an "
            "'error' (errored, not cancelled) at its last known time (terminal_known=False, "
            "vLLM does not record when a request failed) and keeps its error text in 'error'"
        )
    chunks = completed.select(
        fewer=(pl.col("itls_s").list.len() + 1 < pl.col("output_lens")).sum(),
        more=(pl.col("itls_s").list.len() + 1 > pl.col("output_lens")).sum(),
    ).row(0)
    if chunks[0]:
        notes.add(
            f"{count_phrase(chunks[0], 'request')} received fewer chunks than output tokens "
            "(a chunk carried several tokens): each tick carries tokens=1 and output_tokens is "
            "vLLM's count, so TPOT uses vLLM's count and ITL gaps are per chunk"
        )
    if chunks[1]:
        notes.add(
            f"{count_phrase(chunks[1], 'request')} received more chunks than output tokens; "
            "output_tokens keeps vLLM's count"
        )

    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=count,
        tool_summary=_summary(doc),
        ticks_available=True,
        arrival_known=arrival_known,
        attributes=["error_type"],
    )


def _error_text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text.strip() or None


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    """vLLM's own run-level figures: every scalar of the file.

    ``request_rate`` "inf" becomes ``math.inf``; keys spelled with a trailing colon (vLLM
    0.8's ``"request_goodput:"``) are also given under their clean name.
    """
    summary: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, (list, dict)):
            continue
        clean = key.rstrip(":")
        if key == "request_rate" and isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value)
        summary[key] = value
        if clean != key and clean not in doc:
            summary[clean] = value
    if isinstance(summary.get("request_rate"), float) and math.isinf(summary["request_rate"]):
        summary["request_rate"] = math.inf
    return summary
