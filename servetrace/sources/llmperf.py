"""LLMPerf per-request results: ``*_individual_responses.json``.

The file is a JSON list with one object per request: ``ttft_s`` and
``end_to_end_latency_s`` (seconds from the request's send), ``inter_token_latency_s`` (a
per-request mean), ``number_input_tokens``, ``number_output_tokens``, and ``error_code``
(null on success; e.g. 429, -1, -100) with ``error_msg``. LLMPerf's aggregates are in the
``*_summary.json`` written beside it (the llmperf-leaderboard keeps them in
``../summary/<same name>``).

LLMPerf records neither send times nor per-token times, so this is a **request-level**
trace with **unknown arrivals**: every request's ``arrival`` is at ts 0 (times are relative
to its own send; ``arrival_known=False``: throughput and concurrency are unavailable), a
``first_token`` at ``ttft_s`` with ``tokens=1`` (``ticks_available=False``: no ITL
distribution), and a ``completion`` at ``end_to_end_latency_s`` with ``output_tokens`` =
``number_output_tokens``. TTFT, e2e and TPOT = (e2e - TTFT)/(N - 1) can be computed; the
last-token time is not recorded, so TPOT here includes the stream's closing.

An error row ends with an ``error`` event (an errored request, not a cancellation: the
client gave up on nothing, the server refused or failed) and keeps ``error_code`` and
``error``; rows that
carry latencies (e.g. -100 "Output too few tokens") keep their first token and end time,
rows with zero latencies (HTTP 429) were never served: their zeros mean "not measured",
so they get no first token and their error at their send (``terminal_known=False``).

LLMPerf's ``inter_token_latency_s`` is not servetrace's ITL nor TPOT: it is the sum of the
client's chunk gaps *including TTFT* divided by the output token count; it is kept per
request as ``tool_inter_token_latency_ns``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.events import ImportResult, Notes, count_phrase, import_result
from servetrace.sources.fields import Fields
from servetrace.sources.reading import FormatMismatch, describe_json, load_json, strip_suffixes
from servetrace.sources.times import with_ns
from servetrace.units import NS_PER_S as _NS_PER_S

FORMAT = "llmperf"
_ATTRIBUTES = ("tool_inter_token_latency_ns",)
_REQUIRED = ("ttft_s", "end_to_end_latency_s")
# The columns read from each record, one value per request.
_SCHEMA = {
    "ttft_s": pl.Float64,
    "e2e_s": pl.Float64,
    "itl_s": pl.Float64,
    "input_tokens": pl.Int64,
    "output_count": pl.Int64,
    "code": pl.Int64,
    "msg": pl.Utf8,
}


def sniff(doc: Any) -> bool:
    """True for an LLMPerf individual-responses list."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and isinstance(doc[0], dict)
        and all(key in doc[0] for key in _REQUIRED)
    )


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    doc = load_json(path)
    if isinstance(doc, list) and not doc:
        raise InputError(f"{path}: no requests: the list is empty")
    if not sniff(doc):
        raise FormatMismatch(
            f"{path}: not an LLMPerf individual-responses file: expected a JSON list of "
            f"objects with 'ttft_s' and 'end_to_end_latency_s' ({describe_json(doc)})"
        )
    fields = Fields(path, "LLMPerf")
    notes = Notes()
    columns: dict[str, list[Any]] = {name: [] for name in _SCHEMA}
    for index, record in enumerate(doc):
        where = f"record {index}"
        record = fields.record(record, where)
        ttft = fields.number(record, "ttft_s", where, minimum=0)
        e2e = fields.number(record, "end_to_end_latency_s", where, minimum=0)
        if ttft is not None and e2e is not None and e2e > 0 and ttft > e2e:
            raise fields.error(
                where,
                f"field 'ttft_s' ({ttft} s) is after 'end_to_end_latency_s' ({e2e} s)",
            )
        columns["ttft_s"].append(ttft)
        columns["e2e_s"].append(e2e)
        columns["itl_s"].append(
            fields.number(record, "inter_token_latency_s", where, required=False)
        )
        columns["input_tokens"].append(
            fields.integer(record, "number_input_tokens", where, required=False)
        )
        columns["output_count"].append(
            fields.integer(record, "number_output_tokens", where, required=False)
        )
        columns["code"].append(fields.integer(record, "error_code", where, required=False))
        message = fields.get(record, "error_msg")
        columns["msg"].append(str(message) if message not in (None, "") else None)

    frame = pl.DataFrame(columns, schema=_SCHEMA, strict=False).with_row_index("index")
    frame = with_ns(
        frame,
        {"ttft_s": "ttft_s", "e2e_s": "end_to_end_latency_s", "itl_s": "inter_token_latency_s"},
        _NS_PER_S,
        lambda index: f"{path}: record {index}",
    )
    failed = pl.col("code").is_not_null()
    served = pl.col("e2e_s") > 0
    requests = frame.with_columns(
        request_id=pl.col("index").cast(pl.Utf8),
        arrival_ns=pl.lit(0, dtype=pl.Int64),
        first_ns=pl.when(pl.col("ttft_s") > 0).then(pl.col("ttft_ns")),
        end_ns=pl.col("e2e_ns"),
    ).with_columns(
        ticks_ns=pl.when(pl.col("first_ns").is_not_null()).then(pl.concat_list("first_ns")),
        terminal=pl.when(failed).then(pl.lit("error")).otherwise(pl.lit("completion")),
        terminal_ns=pl.max_horizontal(
            pl.when(served).then(pl.col("end_ns")).otherwise(pl.lit(0, dtype=pl.Int64)),
            pl.col("first_ns"),
        ),
        terminal_known=served,
        prompt_tokens=pl.col("input_tokens"),
        output_tokens=pl.when(served).then(pl.col("output_count")),
        error_code=pl.col("code"),
        error=pl.when(failed).then(
            pl.col("msg").fill_null(pl.format("error code {}", pl.col("code")))
        ),
        tool_inter_token_latency_ns=pl.when(served).then(pl.col("itl_ns")),
    )

    notes.add(
        "LLMPerf records no send times: every arrival is set to 0, so times are relative to "
        "each request's own send; throughput and concurrency are unavailable"
    )
    notes.add(
        "LLMPerf records no per-token times: this is a request-level trace with one tick (the "
        "first token) per request; TTFT, e2e and TPOT are available, the ITL distribution is "
        "not"
    )
    bad_success = requests.filter(~failed & ~served).height
    if bad_success:
        notes.add(
            f"{count_phrase(bad_success, 'successful row')} carry a zero end-to-end latency; "
            "their completion is placed at their send (terminal_known=False)"
        )
    codes = (
        requests.filter(failed)
        .group_by("code")
        .agg(pl.len(), unserved=(~served).sum())
        .sort("code")
    )
    for code, count, unserved in codes.iter_rows():
        detail = (
            "with zero latencies (never served: no first token, the error at the send, "
            "terminal_known=False)"
            if unserved == count
            else "that keep their latencies"
            if unserved == 0
            else f"({unserved} with zero latencies)"
        )
        notes.add(
            f"{count_phrase(count, 'row')} with error_code {code} {detail}; they end with an "
            "'error' (errored, not cancelled) and are left out of latency statistics, as "
            "LLMPerf does"
        )

    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        tool_summary=_summary(path),
        ticks_available=False,
        arrival_known=False,
        attributes=_ATTRIBUTES,
    )


def _summary(path: Path) -> dict[str, Any] | None:
    """LLMPerf's ``*_summary.json`` for this file, when it can be found."""
    stem = strip_suffixes(path, ".gz", ".json")
    candidates = []
    if stem.endswith("_individual_responses"):
        candidates.append(
            path.with_name(stem.removesuffix("_individual_responses") + "_summary.json")
        )
    if path.parent.name == "individual":
        candidates.append(path.parent.parent / "summary" / (stem + ".json"))
    for candidate in candidates:
        if candidate.is_file():
            try:
                doc = load_json(candidate)
            except InputError:
                return None
            return doc if isinstance(doc, dict) else None
    return None
