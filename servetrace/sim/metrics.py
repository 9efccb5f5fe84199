"""The server's Prometheus series of a simulated run, as vLLM would have exposed them.

Computed from the event log alone (vectorised, one pass per series), at scrape instants
``0, interval, 2·interval, …`` up to the first one at or after the last event, each value
taken after every event at or before the instant:

- ``vllm:num_requests_waiting`` / ``vllm:num_requests_running``: requests queued (arrived or
  preempted, not admitted) / admitted and not ended, the lifecycle's states;
- counters ``vllm:request_success_total`` (completions, ``finished_reason="length"``: the
  model always stops at its output count), ``vllm:num_preemptions_total``,
  ``vllm:prompt_tokens_total`` (a request's prompt, counted at its first token, as vLLM v1's
  ``IterationStats`` counts it once per request) and ``vllm:generation_tokens_total`` (the
  tokens delivered, Σ ``tokens`` of the output events);
- the latency histograms of ``analysis.server_histograms.HISTOGRAM_CHECKS``, with vLLM's
  buckets and observed when vLLM observes them (names and definitions pinned there):
  ``vllm:time_to_first_token_seconds`` (first token − arrival) at the first token;
  ``vllm:e2e_request_latency_seconds`` (completion − arrival),
  ``vllm:request_queue_time_seconds`` (first admission − arrival),
  ``vllm:request_prefill_time_seconds`` (first token − first admission) and
  ``vllm:request_decode_time_seconds`` (last − first token) at a completion;
  ``vllm:inter_token_latency_seconds`` (each gap between a request's output events) at
  the later event: one event is one engine step in the simulator.

``engine="sglang"`` or ``"trtllm"`` writes that engine's families instead
(``analysis.server_engines``), each observed by its own rule from the same event log:
SGLang's prompt and generation counters and TensorRT-LLM's at a completion, SGLang's queue
time at the first admission and its ITL once per token (a tick's gap ÷ its tokens),
TensorRT-LLM's histograms all at a completion; the gauges are the states at the scrape
(the engines' sparse refreshes are not simulated), a family the engine lacks is not
written.

Written as one Prometheus text exposition (format 0.0.4) whose samples carry the format's
integer **millisecond** timestamps on the trace clock (ms since the first arrival), each
family's samples grouped under its ``# TYPE`` line (``sources.server_metrics.prometheus_text``
reads it back).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.server_engines import ENGINES
from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS, HistogramCheck

# Each histogram the simulator writes: (HELP, buckets), under its first (current) name.
HISTOGRAMS = {c.families[0]: (c.help, c.buckets_s) for c in HISTOGRAM_CHECKS}
LABELS = 'model_name="sim",engine="0"'
HELP = {
    "vllm:num_requests_waiting": ("gauge", "Number of requests waiting to be processed."),
    "vllm:num_requests_running": ("gauge", "Number of requests in model execution batches."),
    "vllm:num_preemptions_total": ("counter", "Cumulative number of preemption from the engine."),
    "vllm:prompt_tokens_total": ("counter", "Number of prefill tokens processed."),
    "vllm:generation_tokens_total": ("counter", "Number of generation tokens processed."),
    "vllm:request_success_total": ("counter", "Count of successfully processed requests."),
}
# Each engine's gauges and counters as written: (kind, HELP) in order, the labels of every
# series and the one success series' own.
ENGINE_HELP = {
    "vllm": HELP,
    "sglang": {
        "sglang:num_queue_reqs": ("gauge", "The number of requests in the waiting queue."),
        "sglang:num_running_reqs": ("gauge", "The number of running requests."),
        "sglang:num_retracted_requests_total": ("counter", "Total number of retracted requests."),
        "sglang:prompt_tokens_total": ("counter", "Number of prefill tokens processed."),
        "sglang:generation_tokens_total": ("counter", "Number of generation tokens processed."),
        "sglang:num_requests_total": ("counter", "Number of requests processed."),
    },
    "trtllm": {
        "trtllm_num_requests_waiting": ("gauge", "Number of queued requests"),
        "trtllm_num_requests_running": ("gauge", "Number of active requests"),
        "trtllm_prompt_tokens_total": (
            "counter",
            "Cumulative number of prompt (input) tokens processed.",
        ),
        "trtllm_generation_tokens_total": (
            "counter",
            "Cumulative number of generation (output) tokens produced.",
        ),
        "trtllm_request_success_total": ("counter", "Count of successfully processed requests."),
    },
}
ENGINE_LABELS = {
    "vllm": (LABELS, ',finished_reason="length"'),
    "sglang": ('engine_type="unified",model_name="sim"', ""),
    "trtllm": ('engine_type="undefined",model_name="sim"', ',finished_reason="length"'),
}
TTFT = "vllm:time_to_first_token_seconds"
_QUEUED, _RUNNING = ("arrival", "preemption"), ("admission", "first_token", "token")


def scrape_instants(events: pl.DataFrame, interval_ns: int) -> np.ndarray:
    last = int(events["ts"].to_numpy().max()) if events.height else 0
    return np.arange(0, -(-last // interval_ns) + 1, dtype=np.int64) * interval_ns


def _cumulative(ts: np.ndarray, weight: np.ndarray, instants: np.ndarray) -> np.ndarray:
    """Σ weight of the rows with ts ≤ each instant."""
    order = np.argsort(ts, kind="stable")
    csum = np.concatenate(([0.0], np.cumsum(weight[order].astype(np.float64))))
    return csum[np.searchsorted(ts[order], instants, side="right")]


def histograms(engine: str = "vllm") -> dict[str, tuple[str, tuple[float, ...]]]:
    """The histograms the simulator writes for ``engine``: family → (HELP, buckets)."""
    checks = ENGINES[engine].histograms
    return {c.families[0]: (c.help, c.buckets_s) for c in checks if c.absent is None}


def series(events: pl.DataFrame, interval_ns: int, engine: str = "vllm") -> dict[str, np.ndarray]:
    """Every series of ``engine`` at the scrape instants (``"t"``: the instants in ns)."""
    rows = ENGINES[engine]
    t = scrape_instants(events, interval_ns)
    ev = events.with_row_index("_order").sort("request_id", "ts", "_order")
    state = (
        pl.when(pl.col("event").is_in(_QUEUED))
        .then(1)
        .when(pl.col("event").is_in(_RUNNING))
        .then(2)
        .when(pl.col("event") == "release")
        .then(None)
        .otherwise(0)
    )
    ev = ev.with_columns(state.alias("s")).with_columns(
        pl.col("s").forward_fill().over("request_id")
    )
    ev = ev.with_columns(pl.col("s").shift(1).over("request_id").fill_null(0).alias("p"))
    ts = ev["ts"].to_numpy()
    s, p = ev["s"].to_numpy(), ev["p"].to_numpy()
    out: dict[str, np.ndarray] = {"t": t}
    out[rows.waiting] = _cumulative(ts, (s == 1) * 1 - (p == 1) * 1, t)
    out[rows.running] = _cumulative(ts, (s == 2) * 1 - (p == 2) * 1, t)
    name = ev["event"].to_numpy()

    def count(kind: str, weight: np.ndarray | None = None) -> np.ndarray:
        mask = name == kind
        w = np.ones(int(mask.sum())) if weight is None else weight[mask]
        return _cumulative(ts[mask], w, t)

    counters = {name: row.family for name, row in rows.counters.items()}
    out[str(counters["success_counter"])] = count("completion")
    if counters["preemption_counter"] is not None:
        out[counters["preemption_counter"]] = count("preemption")
    ticks = np.isin(name, ("first_token", "token"))
    tokens = ev["tokens"].fill_null(1).to_numpy() if "tokens" in ev.columns else np.ones(len(ts))
    ev = ev.with_columns(pl.Series("_k", tokens))
    at = pl.col("event")
    per = (
        ev.group_by("request_id")
        .agg(
            pl.col("ts").filter(at == "arrival").first().alias("arrival"),
            pl.col("ts").filter(at == "admission").first().alias("admitted"),
            pl.col("ts").filter(at == "first_token").first().alias("first"),
            pl.col("ts").filter(at.is_in(("first_token", "token"))).last().alias("last"),
            pl.col("ts").filter(at == "completion").first().alias("done"),
            pl.col("prompt_tokens").filter(at == "arrival").first().alias("prompt"),
            pl.col("_k").filter(at.is_in(("first_token", "token"))).sum().alias("out"),
        )
        .drop_nulls("arrival")
    )
    # A request admitted and cancelled before its first token was still admitted.
    admitted = per.drop_nulls("admitted")
    per = per.drop_nulls("first")
    done = per.drop_nulls("done")
    # When the engine counts a request: its first token, completion or first admission.
    moments = {"first_token": (per, "first"), "completion": (done, "done")}
    moments["admission"] = (admitted, "admitted")
    for finding, column in (
        ("prompt_tokens_counter", "prompt"),
        ("generation_tokens_counter", "out"),
    ):
        row = rows.counters[finding]
        if row.observed_at == "tick":  # every output event's tokens, when delivered
            out[str(row.family)] = _cumulative(ts[ticks], tokens[ticks], t)
        else:
            got, when = moments[row.observed_at]
            out[str(row.family)] = _cumulative(
                got[when].to_numpy(), got[column].fill_null(0).to_numpy(), t
            )
    for check in rows.histograms:
        if check.absent is None:
            _histogram(out, check, ev, moments, t)
    return out


def _histogram(
    out: dict[str, np.ndarray],
    check: HistogramCheck,
    ev: pl.DataFrame,
    moments: dict[str, tuple[pl.DataFrame, str]],
    t: np.ndarray,
) -> None:
    """``check``'s buckets, sum and count at the instants ``t``, observed as its engine does."""
    family = check.families[0]
    if check.metric == "itl":
        # Gaps between a request's consecutive output events, at the later one; per token
        # (SGLang) a gap before a tick of k tokens is k observations of gap / k.
        gaps = ev.filter(pl.col("event").is_in(("first_token", "token"))).select(
            "ts", pl.col("ts").diff().over("request_id").alias("gap"), "_k"
        )
        gaps = gaps.drop_nulls("gap")
        when, value = gaps["ts"].to_numpy(), gaps["gap"].to_numpy()
        if check.per == "token":
            k = gaps["_k"].to_numpy().astype(np.int64)
            when, value = np.repeat(when, k), np.repeat(value / np.maximum(k, 1), k)
    else:
        got, column = moments[check.observed_at]
        start, end = {
            "ttft": ("arrival", "first"),
            "e2e": ("arrival", "done"),
            "queue_wait": ("arrival", "admitted"),
            "prefill": ("admitted", "first"),
            "decode": ("first", "last"),
        }[check.metric]
        when, value = got[column].to_numpy(), (got[end] - got[start]).to_numpy()
    seconds = np.asarray(value) / 1e9
    for le in check.buckets_s:
        out[f"{family}_bucket:{le!r}"] = _cumulative(when, (seconds <= le) * 1.0, t)
    out[f"{family}_bucket:inf"] = _cumulative(when, np.ones(len(when)), t)
    out[f"{family}_sum"] = _cumulative(when, seconds, t)
    out[f"{family}_count"] = out[f"{family}_bucket:inf"]


def _num(v: float) -> str:
    return repr(float(v))


def exposition(events: pl.DataFrame, interval_ns: int, engine: str = "vllm") -> str:
    """``engine``'s series as one Prometheus text exposition with millisecond timestamps."""
    got = series(events, interval_ns, engine)
    ms = [str(int(x) // 1_000_000) for x in got["t"]]
    lines: list[str] = []
    success = ENGINES[engine].counters["success_counter"].family
    base, reason = ENGINE_LABELS[engine]
    for family, (kind, text) in ENGINE_HELP[engine].items():
        lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}"]
        labels = base + (reason if family == success else "")
        values = zip(got[family], ms, strict=True)
        lines += [f"{family}{{{labels}}} {_num(v)} {m}" for v, m in values]
    for family, (text, buckets) in histograms(engine).items():
        lines += [f"# HELP {family} {text}", f"# TYPE {family} histogram"]
        bounds = [*(repr(b) for b in buckets), "inf"]
        for k, m in enumerate(ms):
            for b in bounds:
                le = "+Inf" if b == "inf" else b
                value = got[f"{family}_bucket:{b}"][k]
                lines.append(f'{family}_bucket{{{base},le="{le}"}} {_num(value)} {m}')
            lines.append(f"{family}_count{{{base}}} {_num(got[f'{family}_count'][k])} {m}")
            lines.append(f"{family}_sum{{{base}}} {_num(got[f'{family}_sum'][k])} {m}")
    return "\n".join(lines) + "\n"
