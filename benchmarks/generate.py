"""Generate a synthetic canonical servetrace event log of exactly N events (Parquet).

    python benchmarks/generate.py --events 1e7 -o benchmarks/out/trace_1e7.parquet [--seed 0]

The trace looks like what a serving engine's event logger writes:

* columns ``request_id`` (Int64; ``--string-ids`` writes ``"req-00000042"`` strings),
  ``event`` (**string** by default, as a log writer writes it; Parquet dictionary-encodes
  it on disk, and readers get a plain string column back. ``--event-type dictionary``
  writes an Arrow dictionary column instead, which Polars reads as Categorical),
  ``ts`` (Int64 ns), ``tokens`` (Int64, null except on first_token/token rows),
  ``prompt_tokens`` (Int64, on arrival rows only), ``output_tokens`` (Int64, on
  completion rows only);
* requests arrive as a Poisson process (``--rate`` req/s); each has ``arrival``,
  ``admission`` after a queue wait, ``first_token`` after a prefill that grows with the
  prompt, ~N_out ``token`` events spaced by the request's inter-token latency (gamma
  jitter, rare stalls, ~2 % of chunks carry 2-4 tokens) and ``completion``;
* ~3 % of requests are cancelled (while queued, in prefill or mid-decode), ~2 % are
  preempted once mid-decode (``preemption``, then ``admission`` again after a requeue
  delay and a recompute prefill, then the remaining tokens);
* rows are **sorted by ts**, so requests interleave as in a real log; a request's own
  events are strictly increasing in time, so every request is valid under the
  lifecycle rules. The file is exactly the first N events of an endless log, i.e. a
  time cut: requests still running at the cut are *in flight* (censored, not invalid).

Everything is vectorised with numpy per chunk of ~8k requests (no Python loop per
request or token). Chunks are generated in arrival order; events at or before the last
arrival of a chunk are final (every later request arrives after it) and are written,
the rest is carried into the next chunk. Memory therefore stays ~O(chunk), so 1e8 and
more events fit easily; row groups hold ``--row-group-size`` rows (default 1M), zstd.

The chunking does not depend on N: with the same seed, the 1e6 trace is a prefix of the
1e7 trace.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from servetrace.schema import EVENT_KINDS

# The canonical kinds in lifecycle order (release is not generated).
EVENT_NAMES = EVENT_KINDS[:7]
ARRIVAL, ADMISSION, FIRST_TOKEN, TOKEN, PREEMPTION, COMPLETION, CANCELLATION = range(7)

MS = 1_000_000
US = 1_000
NULL = -1  # sentinel for null in the nullable int columns while in numpy

#: requests per generated chunk (~2M events); fixed so traces of different N share prefixes
CHUNK_REQUESTS = 8192


def parse_count(text: str) -> int:
    value = float(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text}")
    return int(value)


class Generator:
    """Endless stream of requests in arrival order, emitted as ts-sorted event chunks."""

    def __init__(
        self,
        seed: int,
        rate: float,
        cancel_frac: float,
        preempt_frac: float,
        bundle_frac: float,
        mean_output: float,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.rate = rate
        self.cancel_frac = cancel_frac
        self.preempt_frac = preempt_frac
        self.bundle_frac = bundle_frac
        # lognormal output length with the requested mean: median * exp(sigma^2 / 2)
        self.out_sigma = 0.8
        self.out_median = mean_output / np.exp(self.out_sigma**2 / 2)
        self.next_id = 0
        self.clock = 0  # ns, last arrival so far
        self.carry = _empty()
        self.stats = {"requests": 0, "cancelled": 0, "preempted": 0}

    def chunk(self) -> dict[str, np.ndarray]:
        """Generate CHUNK_REQUESTS more requests; return the events that are now final."""
        rng, n = self.rng, CHUNK_REQUESTS
        rid = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        inter = np.maximum(rng.exponential(1e9 / self.rate, n), 1.0).astype(np.int64)
        arrival = self.clock + np.cumsum(inter)
        self.clock = int(arrival[-1])

        prompt = np.clip(rng.lognormal(np.log(600), 0.9, n), 16, 16_000).astype(np.int64)
        n_ticks = np.clip(rng.lognormal(np.log(self.out_median), self.out_sigma, n), 1, 4096)
        n_ticks = n_ticks.astype(np.int64)
        queue_wait = (US + rng.exponential(30 * MS, n)).astype(np.int64)
        prefill = (15 * MS + prompt * 40 * US * rng.gamma(8.0, 1 / 8.0, n)).astype(np.int64)
        base_itl = rng.lognormal(np.log(25 * MS), 0.25, n)
        admission = arrival + queue_wait
        first_tick = admission + prefill

        # Fates: cancelled (queued / prefill / decode), preempted once, or plain.
        fate_u = rng.random(n)
        cancelled = fate_u < self.cancel_frac
        preempted = (~cancelled) & (fate_u < self.cancel_frac + self.preempt_frac) & (n_ticks >= 2)
        where_u = rng.random(n)
        c_queued = cancelled & (where_u < 0.25)
        c_decode = cancelled & (where_u >= 0.40) & (n_ticks >= 2)
        c_prefill = cancelled & ~c_queued & ~c_decode
        # ticks actually emitted: 0 if cancelled before the first token, k if mid-decode
        cut = rng.integers(1, np.maximum(n_ticks, 2))  # in [1, n_ticks - 1] when n_ticks >= 2
        emitted = np.where(c_queued | c_prefill, 0, np.where(c_decode, cut, n_ticks))
        self.stats["requests"] += n
        self.stats["cancelled"] += int(cancelled.sum())
        self.stats["preempted"] += int(preempted.sum())

        # ---- ticks: every emitted first_token/token, plus the gap to the next (unemitted)
        # tick of mid-decode cancellations, which places the cancellation inside that gap.
        drawn = emitted + c_decode.astype(np.int64)
        total = int(drawn.sum())
        req = np.repeat(np.arange(n), drawn)
        start = np.cumsum(drawn) - drawn  # index of each request's first tick
        pos = np.arange(total) - start[req]  # tick index within its request
        gaps = base_itl[req] * rng.gamma(6.0, 1 / 6.0, total)
        stall = rng.random(total) < 0.002
        gaps[stall] += rng.exponential(300 * MS, int(stall.sum()))
        gaps = np.maximum(gaps, US).astype(np.int64)
        gaps[pos == 0] = 0
        # Preemption once, after tick k-1 of the request (k in [1, n_ticks-1]).
        k = cut
        p_idx = start[preempted] + k[preempted]  # the tick that comes after re-admission
        pre_delta = (US + rng.random(int(preempted.sum())) * 2 * MS).astype(np.int64)
        requeue = (US + rng.exponential(250 * MS, int(preempted.sum()))).astype(np.int64)
        recompute = (10 * MS + (prompt[preempted] + k[preempted]) * 20 * US).astype(np.int64)
        gaps[p_idx] += pre_delta + requeue + recompute
        cs = np.cumsum(gaps)
        tick_ts = first_tick[req] + (cs - cs[start[req]])
        preempt_ts = tick_ts[p_idx - 1] + pre_delta
        readmit_ts = preempt_ts + requeue

        tokens = np.ones(total, dtype=np.int64)
        bundled = rng.random(total) < self.bundle_frac
        tokens[bundled] += rng.integers(1, 4, int(bundled.sum()))
        tokens[pos == 0] = 1  # the first token is one token

        # Mid-decode cancellations: cancel inside the gap before the tick that never came.
        ghost = start[c_decode] + emitted[c_decode]  # index of the unemitted tick
        c_dec_ts = tick_ts[ghost - 1] + np.maximum(
            (gaps[ghost] * rng.uniform(0.05, 0.95, ghost.size)).astype(np.int64), 1
        )
        keep_tick = np.ones(total, dtype=bool)
        keep_tick[ghost] = False

        out_tok = np.bincount(req[keep_tick], weights=tokens[keep_tick], minlength=n)
        out_tok = out_tok.astype(np.int64)
        last_tick = np.zeros(n, dtype=np.int64)
        has_ticks = emitted > 0
        last_tick[has_ticks] = tick_ts[start[has_ticks] + emitted[has_ticks] - 1]

        parts = []
        # arrivals (carry prompt_tokens)
        parts.append(_rows(rid, ARRIVAL, arrival, prompt_tokens=prompt))
        # first admission (all but cancelled-while-queued)
        adm = ~c_queued
        parts.append(_rows(rid[adm], ADMISSION, admission[adm]))
        # ticks
        t_req = req[keep_tick]
        t_pos = pos[keep_tick]
        parts.append(
            _rows(
                rid[t_req],
                np.where(t_pos == 0, FIRST_TOKEN, TOKEN).astype(np.int8),
                tick_ts[keep_tick],
                tokens=tokens[keep_tick],
            )
        )
        # preemption and re-admission
        parts.append(_rows(rid[preempted], PREEMPTION, preempt_ts))
        parts.append(_rows(rid[preempted], ADMISSION, readmit_ts))
        # completion
        done = ~cancelled
        tail = (US + rng.exponential(0.5 * MS, n)).astype(np.int64)
        parts.append(
            _rows(rid[done], COMPLETION, last_tick[done] + tail[done], output_tokens=out_tok[done])
        )
        # cancellations
        q_ts = arrival[c_queued] + np.maximum(
            (queue_wait[c_queued] * rng.uniform(0.05, 0.95, int(c_queued.sum()))).astype(np.int64),
            1,
        )
        p_ts = admission[c_prefill] + np.maximum(
            (prefill[c_prefill] * rng.uniform(0.05, 0.95, int(c_prefill.sum()))).astype(np.int64), 1
        )
        parts.append(_rows(rid[c_queued], CANCELLATION, q_ts))
        parts.append(_rows(rid[c_prefill], CANCELLATION, p_ts))
        parts.append(_rows(rid[c_decode], CANCELLATION, c_dec_ts))

        events = _concat([self.carry, *parts])
        order = np.argsort(events["ts"], kind="stable")
        events = {name: col[order] for name, col in events.items()}
        # Every later request arrives after self.clock: events at or before it are final.
        n_final = int(np.searchsorted(events["ts"], self.clock, side="right"))
        final = {name: col[:n_final] for name, col in events.items()}
        self.carry = {name: col[n_final:] for name, col in events.items()}
        return final


def _empty() -> dict[str, np.ndarray]:
    return {
        "request_id": np.empty(0, np.int64),
        "event": np.empty(0, np.int8),
        "ts": np.empty(0, np.int64),
        "tokens": np.empty(0, np.int64),
        "prompt_tokens": np.empty(0, np.int64),
        "output_tokens": np.empty(0, np.int64),
    }


def _rows(
    rid: np.ndarray,
    event: int | np.ndarray,
    ts: np.ndarray,
    *,
    tokens=None,
    prompt_tokens=None,
    output_tokens=None,
) -> dict[str, np.ndarray]:
    n = rid.size

    def col(values):
        return np.full(n, NULL, np.int64) if values is None else values.astype(np.int64)

    ev = np.full(n, event, np.int8) if np.isscalar(event) else event
    return {
        "request_id": rid,
        "event": ev,
        "ts": ts.astype(np.int64),
        "tokens": col(tokens),
        "prompt_tokens": col(prompt_tokens),
        "output_tokens": col(output_tokens),
    }


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def _schema(string_ids: bool, event_type: str) -> pa.Schema:
    event = pa.string() if event_type == "string" else pa.dictionary(pa.int8(), pa.string())
    return pa.schema(
        [
            ("request_id", pa.string() if string_ids else pa.int64()),
            ("event", event),
            ("ts", pa.int64()),
            ("tokens", pa.int64()),
            ("prompt_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
        ]
    )


def _table(cols: dict[str, np.ndarray], schema: pa.Schema) -> pa.Table:
    names = pa.array(EVENT_NAMES, pa.string())
    event = pa.DictionaryArray.from_arrays(pa.array(cols["event"], pa.int8()), names)
    if schema.field("event").type == pa.string():
        event = event.cast(pa.string())
    rid = pa.array(cols["request_id"], pa.int64())
    if schema.field("request_id").type == pa.string():
        rid = pc.binary_join_element_wise(
            "req-", pc.utf8_lpad(pc.cast(rid, pa.string()), 8, "0"), ""
        )
    arrays = [rid, event, pa.array(cols["ts"], pa.int64())]
    for name in ("tokens", "prompt_tokens", "output_tokens"):
        values = cols[name]
        arrays.append(pa.array(values, pa.int64(), mask=values == NULL))
    return pa.Table.from_arrays(arrays, schema=schema)


def generate(
    path: Path,
    events: int,
    seed: int = 0,
    rate: float = 20.0,
    row_group_size: int = 1_000_000,
    string_ids: bool = False,
    event_type: str = "string",
    cancel_frac: float = 0.03,
    preempt_frac: float = 0.02,
    bundle_frac: float = 0.02,
    mean_output: float = 250.0,
    compression_level: int | None = None,
    parts: int = 1,
) -> dict:
    gen = Generator(seed, rate, cancel_frac, preempt_frac, bundle_frac, mean_output)
    schema = _schema(string_ids, event_type)
    started = time.perf_counter()
    if parts > 1:
        # One endless log cut into consecutive files of events/parts rows each: a folder
        # of parts is one trace (servetrace reads a directory as one), written in O(chunk).
        path.mkdir(parents=True, exist_ok=True)
        targets = [path / f"part-{i:05d}.parquet" for i in range(parts)]
        sizes = [events // parts + (1 if i < events % parts else 0) for i in range(parts)]
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        targets, sizes = [path], [events]
    written = 0
    pending: list[dict[str, np.ndarray]] = []
    pending_rows = 0
    for target, size in zip(targets, sizes, strict=True):
        tmp = target.with_name(target.name + ".tmp")
        done = 0
        with pq.ParquetWriter(
            tmp, schema, compression="zstd", compression_level=compression_level
        ) as writer:
            while done < size:
                if pending_rows < min(row_group_size, size - done):
                    final = gen.chunk()
                    pending.append(final)
                    pending_rows += final["ts"].size
                    continue
                buf = _concat(pending)
                take = min(row_group_size, size - done)
                writer.write_table(
                    _table({k: v[:take] for k, v in buf.items()}, schema),
                    row_group_size=row_group_size,
                )
                done += take
                rest = {k: v[take:] for k, v in buf.items()}
                pending = [rest]
                pending_rows = rest["ts"].size
        tmp.replace(target)
        written += done
    info = {
        "path": str(path),
        "events": written,
        "seed": seed,
        "rate_per_s": rate,
        "requests_generated": gen.stats["requests"],
        "cancelled_generated": gen.stats["cancelled"],
        "preempted_generated": gen.stats["preempted"],
        "event_type": event_type,
        "request_id_type": "string" if string_ids else "int64",
        "row_group_size": row_group_size,
        "parts": len(targets),
        "bytes": sum(t.stat().st_size for t in targets),
        "bytes_per_event": sum(t.stat().st_size for t in targets) / written,
        "seconds": time.perf_counter() - started,
    }
    info["row_groups"] = sum(pq.ParquetFile(t).metadata.num_row_groups for t in targets)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--events",
        type=parse_count,
        required=True,
        help="number of events (rows), e.g. 1e6, 1e7, 1e8",
    )
    parser.add_argument("-o", "--output", type=Path, required=True, help="Parquet file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0, help="Poisson arrivals per second")
    parser.add_argument("--row-group-size", type=parse_count, default=1_000_000)
    parser.add_argument(
        "--string-ids",
        action="store_true",
        help="request_id as strings 'req-00000042' instead of Int64",
    )
    parser.add_argument(
        "--event-type",
        choices=("string", "dictionary"),
        default="string",
        help="Arrow type of the event column (both are dictionary-encoded in the Parquet file)",
    )
    parser.add_argument(
        "--mean-output",
        type=float,
        default=250.0,
        help="mean output tokens per request (lognormal)",
    )
    parser.add_argument("--cancel-fraction", type=float, default=0.03)
    parser.add_argument("--preempt-fraction", type=float, default=0.02)
    parser.add_argument(
        "--bundle-fraction",
        type=float,
        default=0.02,
        help="share of token chunks carrying 2-4 tokens",
    )
    parser.add_argument(
        "--parts",
        type=int,
        default=1,
        help="write a folder of this many consecutive files (one trace) instead of one file",
    )
    args = parser.parse_args(argv)
    info = generate(
        args.output,
        args.events,
        seed=args.seed,
        rate=args.rate,
        row_group_size=args.row_group_size,
        string_ids=args.string_ids,
        event_type=args.event_type,
        cancel_frac=args.cancel_fraction,
        preempt_frac=args.preempt_fraction,
        bundle_frac=args.bundle_fraction,
        mean_output=args.mean_output,
        parts=args.parts,
    )
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
