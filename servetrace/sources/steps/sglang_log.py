"""SGLang's scheduler log: the ``Prefill batch`` and ``Decode batch`` lines.

Pinned to sgl-project/sglang ``python/sglang/srt/managers/scheduler_metrics_mixin.py``
at 01bb3c807f7e62c19a31de7548837505488c2b64:

- ``log_prefill_stats``, once per prefill batch, when the batch is formed (before it
  runs): ``Prefill batch[ [forward_ct+1]], #new-seq: <n>, #new-token: <n>,
  #cached-token: <n>, token usage: <0.xx>, #running-req: <n>, #queue-req: <n>, `` (the
  ``[n]`` only with ``SGLANG_LOG_FORWARD_ITERS``; hybrid models write ``full token
  usage: …, swa token usage: …`` or ``mamba usage`` instead of ``token usage``);
- ``log_decode_stats``, once every ``--decode-log-interval`` decode batches (default
  40): ``Decode batch[ [forward_ct]], #running-req: <n>, #token: <n>, token usage:
  <0.xx>, [accept len: …, ]cuda graph: <bool>, gen throughput (token/s): <x>,
  #queue-req: <n>, ``;
- the prefix: SGLang's ``[%Y-%m-%d %H:%M:%S<ranks>] `` with ranks such as `` DP1 TP0``
  (``configure_logger``), one-second resolution, local time without a zone.

Mapping. A prefill line is one step: ``#new-seq`` → ``prefill_requests``,
``#new-token`` → ``prefill_tokens``, ``#cached-token`` → ``cached_tokens``, token usage
→ ``kv_usage``, ``#queue-req`` → ``queued_requests``; it is dated when the batch was
formed (``ts_start``), its end and duration are not logged, and whether running
requests decoded in the same pass (``--enable-mixed-chunk``) is not said (decode
columns null). A decode line stands for the last of the interval's decode steps, not
for each: no prefill, ``#running-req`` → ``decode_requests``, ``#token`` →
``kv_tokens``, dated when it was logged (``ts_end``); the steps between two decode
lines are not in the log and get no rows. ``DP<n>`` → ``replica``; only tensor- and
pipeline-rank 0 lines are read (the other ranks repeat the same batch). Times are the
prefix read as UTC, so no alignment to a trace is tried.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.logtext import log_lines, parse_marked

FORMAT = "sglang-log"
# A prefill line dates its batch when it is formed and a decode line when it is logged:
# one end of each step is unknown (`validate`).
ENDS_KNOWN = False
_MARKER = r"\b(?:Prefill|Decode) batch(?: \[\d+\])?, "
_PATTERN = (
    r"^\[(?P<stamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(?P<ranks>(?: [A-Z]+\d+)*)\] "
    r"(?P<kind>Prefill|Decode) batch(?: \[(?P<step>\d+)\])?, (?P<rest>.*)$"
)
_RULE = (
    "a batch line that is not SGLang's (expected '[YYYY-MM-DD HH:MM:SS TP0] Prefill batch, "
    "#new-seq: …' or '… Decode batch, #running-req: …')"
)
_FIELDS = {
    "new_seq": r"#new-seq: (\d+)",
    "new_token": r"#new-token: (\d+)",
    "cached_token": r"#cached-token: (\d+)",
    "running": r"#running-req: (\d+)",
    "queue": r"#queue-req: (\d+)",
    "kv_tokens": r"#(?:full )?token: (\d+)",
}
_REQUIRED = {
    "Prefill": ("new_seq", "new_token", "cached_token", "running", "queue"),
    "Decode": ("running", "queue"),
}


def read(path: Path, ticks: pl.Series | None) -> StepFile:
    parsed = parse_marked(log_lines(path), _MARKER, _PATTERN, "kind", path, _RULE)
    ranks = pl.col("ranks")
    parsed = parsed.filter(
        ranks.str.extract(r"TP(\d+)").fill_null("0") == "0",
        ranks.str.extract(r"PP(\d+)").fill_null("0") == "0",
    )
    if parsed.height == 0:
        raise InputError(
            f"{path}: no SGLang 'Prefill batch' or 'Decode batch' lines in the file",
            hint="SGLang's scheduler writes them at log level info",
        )
    fields = parsed.with_columns(
        *(
            pl.col("rest").str.extract(rx).cast(pl.Int64()).alias(name)
            for name, rx in _FIELDS.items()
        ),
        kv_usage=pl.coalesce(
            pl.col("rest").str.extract(r"(?:^|, )token usage: (\d+(?:\.\d+)?)"),
            pl.col("rest").str.extract(r"full token usage: (\d+(?:\.\d+)?)"),
        ).cast(pl.Float64()),
        at=pl.col("stamp")
        .str.replace(",", ".", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="ns", strict=False)
        .dt.epoch("ns"),
    )
    for kind, names in _REQUIRED.items():
        missing = fields.filter(
            (pl.col("kind") == kind)
            & pl.any_horizontal(*(pl.col(name).is_null() for name in names))
        )
        if missing.height:
            line, text = missing.row(0)[:2]
            wanted = ", ".join(_FIELDS[name].split(":")[0] for name in names)
            raise InputError(f"{path}: line {line}: a {kind} batch line without {wanted}: {text!r}")
    bad_time = fields.filter(pl.col("at").is_null())
    if bad_time.height:
        raise InputError(
            f"{path}: line {bad_time.row(0)[0]}: the log prefix is not a date and time"
        )
    prefill = pl.col("kind") == "Prefill"
    frame = fields.select(
        step=pl.col("step").cast(pl.Int64()),
        replica=pl.col("ranks").str.extract(r"DP(\d+)"),
        ts_start=pl.when(prefill).then(pl.col("at")),
        ts_end=pl.when(~prefill).then(pl.col("at")),
        prefill_requests=pl.when(prefill).then(pl.col("new_seq")).otherwise(0),
        prefill_tokens=pl.when(prefill).then(pl.col("new_token")).otherwise(0),
        decode_requests=pl.when(~prefill).then(pl.col("running")),
        cached_tokens=pl.when(prefill).then(pl.col("cached_token")),
        kv_tokens=pl.when(~prefill).then(pl.col("kv_tokens")),
        kv_usage=pl.col("kv_usage"),
        queued_requests=pl.col("queue"),
    )
    decodes = int((~fields["kind"].eq("Prefill")).sum())
    notes = [
        "sglang-log: SGLang logs a decode line only every --decode-log-interval decode steps "
        f"(default 40): the {decodes} decode rows are those steps, the steps between them "
        "are not in the log; prefill rows are dated when the batch was formed and their end "
        "is unavailable; decode tokens and durations are not logged (unavailable)",
        "sglang-log: times are the log prefix read as UTC, resolution 1 s; not aligned to a trace",
    ]
    return StepFile(frame, tuple(notes))
