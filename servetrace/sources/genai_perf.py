"""GenAI-Perf / perf_analyzer per-request export: ``profile_export.json``.

The file is one JSON object: ``experiments[]``, each with ``experiment`` (``mode``,
``value``: e.g. concurrency 8) and ``requests[]``; a request has ``timestamp`` (the send,
epoch **ns**), ``response_timestamps`` (ns, one per server-sent-event chunk) and
``response_outputs`` (the chunks' text, same order). GenAI-Perf's aggregates are in
``profile_export_genai_perf.json`` beside it.

Mapping: arrival = ``timestamp``; ticks = the timestamps of the chunks that carry text
(or reasoning); the role-only, finish, usage and ``[DONE]`` chunks are not tokens;
completion = the last response timestamp (the stream's end, so ``delivery_tail`` is the
time from the last token to ``[DONE]``; GenAI-Perf's request_latency is our ``response``,
which ends at the last content chunk). Each tick carries ``tokens=1``. ``output_tokens``
is the stream's ``usage.completion_tokens`` when the server sent usage, else null:
GenAI-Perf counts output tokens by running a tokenizer over the text, which an importer
cannot repeat, so the count then defaults to the number of content chunks.
A request with responses but no content chunk ends with ``error`` (errored, not
cancelled) at its last response, one with no response at all has no terminal event (in flight).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS
from servetrace.sources import chunks
from servetrace.sources import response_body as body
from servetrace.sources.chunks import sse_payload
from servetrace.sources.events import ImportResult, Notes, count_phrase, import_result
from servetrace.sources.fields import Fields
from servetrace.sources.reading import (
    holds_blocks,
    load_document,
    sibling,
    strip_suffixes,
    tool_aggregates,
)

FORMAT = "genai-perf"
_ATTRIBUTES = ("experiment", "error_type")
_OUTPUTS = pl.List(pl.Struct({"response": pl.Utf8(), "text_output": pl.Utf8()}))


def sniff(doc: Any) -> bool:
    """True for a perf_analyzer / GenAI-Perf profile export."""
    return holds_blocks(doc, "experiments", "requests")


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    doc = load_document(
        path, sniff, "a GenAI-Perf profile export", "a JSON object with 'experiments[].requests[]'"
    )
    fields = Fields(path, "GenAI-Perf")
    notes = Notes()

    ids: list[str] = []
    sends: list[int] = []
    stamps: list[list[Any]] = []
    outputs: list[list[Any]] = []
    experiment: list[str | None] = []
    wheres: list[str] = []
    for e_index, block in enumerate(doc["experiments"]):
        e_where = f"experiments[{e_index}]"
        block = fields.record(block, e_where)
        label = _experiment_label(block.get("experiment"))
        block_requests = fields.array(block, "requests", e_where) or []
        for r_index, request in enumerate(block_requests):
            where = f"{e_where}.requests[{r_index}]"
            request = fields.record(request, where)
            send = fields.integer(request, "timestamp", where)
            times = fields.array(request, "response_timestamps", where, required=False) or []
            texts = fields.array(request, "response_outputs", where, required=False) or []
            if len(texts) != len(times):
                raise fields.error(
                    where,
                    f"'response_outputs' has {len(texts)} entries but 'response_timestamps' "
                    f"has {len(times)}",
                )
            ids.append(str(len(ids)))
            sends.append(send)  # type: ignore[arg-type]
            stamps.append(times)
            outputs.append(texts)
            experiment.append(label)
            wheres.append(where)
    if not ids:
        raise InputError(f"{path}: no requests in 'experiments[].requests[]'")

    stamp_column = pl.Series("response_timestamps", stamps, dtype=pl.List(pl.Int64), strict=False)
    bad = (
        stamp_column.list.eval(pl.element().is_null() | (pl.element().abs() >= MAX_ABS_NS))
        .list.any()
        .arg_true()
    )
    if len(bad):
        index = int(bad[0])
        raise fields.error(
            wheres[index],
            "field 'response_timestamps' must hold integers (ns since the epoch) within "
            "±4.6e18 (±146 years)",
        )
    frame = pl.DataFrame(
        {
            "request_id": ids,
            "arrival_ns": pl.Series(sends, dtype=pl.Int64),
            "experiment": experiment,
            "stamps": stamp_column,
            "stream_end_ns": stamp_column.list.max(),
            "responses": stamp_column.list.len(),
            "texts": fields.struct_lists(
                outputs, _OUTPUTS, "response_outputs", wheres.__getitem__
            ).list.eval(
                pl.coalesce(
                    pl.element().struct.field("response"),
                    pl.element().struct.field("text_output"),
                )
            ),
        }
    )
    parts = (
        frame.select("request_id", time_ns="stamps", payload="texts")
        .explode("time_ns", "payload", keep_nulls=False)
        .with_row_index("_chunk")
        # one response may hold several SSE events ("data: …\n\ndata: …")
        .with_columns(pl.col("payload").str.split("\n"))
        .explode("payload", keep_nulls=True)
        .with_columns(sse_payload(pl.col("payload")))
    )
    per_request = chunks.per_request(parts).rename({"completion_tokens": "output_tokens"})
    requests = (
        body.typed(
            frame.drop("stamps", "texts").join(
                per_request, on="request_id", how="left", maintain_order="left"
            ),
            lambda row: f"{path}: {wheres[row]}",
        )
        .with_columns(
            has_content=pl.col("ticks_ns").list.len().fill_null(0) > 0,
        )
        .with_columns(
            ticks_ns=pl.when(pl.col("has_content")).then(pl.col("ticks_ns")),
            terminal=pl.when(pl.col("has_content"))
            .then(pl.lit("completion"))
            .when(pl.col("responses") > 0)
            .then(pl.lit("error")),
            terminal_ns=pl.col("stream_end_ns"),
            error=pl.when(~pl.col("has_content") & (pl.col("responses") > 0)).then(
                pl.lit("no content in any response")
            ),
        )
        .with_columns(error_type=pl.col("error"))
    )

    no_content = requests.filter(pl.col("terminal") == "error").height
    if no_content:
        notes.add(
            f"{count_phrase(no_content, 'request')} received responses without any content; "
            "each ends with an 'error' (errored, not cancelled) at its last response"
        )
    silent = requests.filter(pl.col("terminal").is_null()).height
    if silent:
        notes.add(
            f"{count_phrase(silent, 'request')} received no response at all; they have no "
            "terminal event (in flight)"
        )
    counted = requests.filter(pl.col("has_content"))["output_tokens"].is_not_null().sum()
    if counted < requests.filter(pl.col("has_content")).height:
        notes.add(
            "the streams carry no usage counts: GenAI-Perf counts output tokens with a "
            "tokenizer, so output_tokens is left unset and defaults to the number of content "
            "chunks; TPOT equals GenAI-Perf's inter_token_latency only when every chunk is "
            "one token"
        )
    said = body.note(requests)
    if said:
        notes.add(said)
    if frame["experiment"].n_unique() > 1:
        notes.add("the file holds several experiments; the 'experiment' column tells them apart")

    summary_file = sibling(path, strip_suffixes(path, ".gz", ".json") + "_genai_perf.json")
    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=len(ids),
        tool_summary=tool_aggregates(summary_file) if summary_file is not None else None,
        ticks_available=True,
        arrival_known=True,
        attributes=(*_ATTRIBUTES, *body.present(requests)),
    )


def _experiment_label(experiment: Any) -> str | None:
    if isinstance(experiment, dict) and "mode" in experiment:
        return f"{experiment['mode']}={experiment.get('value')}"
    return None
