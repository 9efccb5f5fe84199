"""Workloads: what arrives when, and how long it is (the simulator's input).

A **workload** is a Polars DataFrame with one row per request, sorted by arrival:

| column | dtype | meaning |
|---|---|---|
| `request_id` | Utf8 | unique within the workload |
| `arrival_ns` | Int64 | arrival time in ns, relative to the first arrival (which is 0) |
| `prompt_tokens` | Int64 ≥ 0 | input length |
| `output_tokens` | Int64 ≥ 1 | output length the request will generate if it completes |

Readers may add columns (Mooncake keeps `prefix_blocks`); the simulator ignores them.

This module makes workloads three ways: a seeded synthetic generator
(`synthetic_workload`), readers for two public real traces (`read_azure_2023`,
`read_mooncake`, dispatched by `read_workload`), and small pure transformations
(`head`, `window`, `scale_rate`). The readers are the only functions here that open
files; every problem with a file is an `InputError` naming the file, the line and the
field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from servetrace.errors import InputError, UsageError
from servetrace.units import NS_PER_DAY as _NS_PER_DAY
from servetrace.units import NS_PER_MS as _NS_PER_MS
from servetrace.units import NS_PER_S as _NS_PER_S

WORKLOAD_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "arrival_ns": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
}
WORKLOAD_COLUMNS: tuple[str, ...] = tuple(WORKLOAD_SCHEMA)

#: Formats `read_workload` understands, with what they are.
WORKLOAD_FORMATS: dict[str, str] = {
    "azure": "Azure LLM inference trace 2023 CSV (TIMESTAMP, ContextTokens, GeneratedTokens)",
    "mooncake": "Mooncake FAST'25 JSONL (timestamp ms, input_length, output_length, hash_ids)",
    "workload": "servetrace workload table, CSV or Parquet "
    "(request_id, arrival_ns, prompt_tokens, output_tokens)",
}

AZURE_COLUMNS: tuple[str, str, str] = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_FIELDS: tuple[str, str, str] = ("timestamp", "input_length", "output_length")
MOONCAKE_BLOCK_TOKENS = 512  # tokens per entry of `hash_ids` (the Mooncake trace README)

# `YYYY-MM-DD HH:MM:SS[.fffffffff]`, the Azure trace's naive timestamps (7 digits there).
_TIMESTAMP_RE = r"^\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*$"


# --------------------------------------------------------------------------- synthetic


@dataclass(frozen=True)
class LengthDistribution:
    """A lognormal token-length distribution, rounded to integers and clipped.

    A length is ``round(exp(N(log(median), sigma)))`` clipped to ``[minimum, maximum]``:
    ``median`` is the median before clipping and ``sigma`` the standard deviation of the
    log-length (0.8-1.0 gives the long right tail of chat traffic; 0 gives a constant).
    """

    median: float
    sigma: float
    minimum: int = 1
    maximum: int = 4096

    def __post_init__(self) -> None:
        if not self.median > 0:
            raise UsageError(f"length median must be > 0 (got {self.median})")
        if self.sigma < 0:
            raise UsageError(f"length sigma must be >= 0 (got {self.sigma})")
        if not 0 <= self.minimum <= self.maximum:
            raise UsageError(
                f"length bounds must satisfy 0 <= minimum <= maximum "
                f"(got {self.minimum}, {self.maximum})"
            )

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` lengths (Int64) from ``rng``."""
        raw = np.exp(rng.normal(math.log(self.median), self.sigma, n))
        return np.clip(np.rint(raw), self.minimum, self.maximum).astype(np.int64)


#: Default prompt lengths: median 512, long tail, at most 3,072 tokens (so that prompt +
#: output fits the 4,096-token context and token budget of the default engine).
DEFAULT_PROMPT = LengthDistribution(median=512, sigma=0.9, minimum=8, maximum=3072)
#: Default output lengths: median 160, at most 1,024 tokens.
DEFAULT_OUTPUT = LengthDistribution(median=160, sigma=0.8, minimum=1, maximum=1024)


def synthetic_workload(
    n: int,
    rate_per_s: float,
    seed: int,
    prompt: LengthDistribution = DEFAULT_PROMPT,
    output: LengthDistribution = DEFAULT_OUTPUT,
    *,
    burstiness: float = 1.0,
    id_prefix: str = "r",
) -> pl.DataFrame:
    """Make a seeded synthetic workload of ``n`` requests.

    Inter-arrival gaps are Gamma(shape=``burstiness``, mean=1/``rate_per_s``): shape 1 is
    a Poisson process; below 1 arrivals are burstier (clustered), above 1 more regular
    (the convention of ``vllm bench serve --burstiness``). Gaps are rounded to whole ns
    before summing, so arrivals are exact integers. Prompt and output lengths are drawn
    from the two `LengthDistribution`s, independently of each other.

    Arrivals, prompt lengths and output lengths come from three independent child
    streams of ``numpy.random.SeedSequence(seed)``: the same seed with another rate or
    burstiness keeps every length and changes only the arrival times.

    Request ids are ``id_prefix`` + the zero-padded arrival index (``r0000``, ``r0001``...).
    """
    if n < 0:
        raise UsageError(f"number of requests must be >= 0 (got {n})")
    if not rate_per_s > 0:
        raise UsageError(f"arrival rate must be > 0 requests/s (got {rate_per_s})")
    if not burstiness > 0:
        raise UsageError(
            f"burstiness must be > 0 (got {burstiness})", hint="1 is a Poisson process"
        )
    arrival_rng, prompt_rng, output_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    gaps_ns = np.rint(
        arrival_rng.gamma(burstiness, _NS_PER_S / (rate_per_s * burstiness), n)
    ).astype(np.int64)
    if n:
        gaps_ns[0] = 0  # the first request arrives at 0
    width = max(4, len(str(max(n - 1, 0))))
    return pl.DataFrame(
        {
            "request_id": [f"{id_prefix}{i:0{width}d}" for i in range(n)],
            "arrival_ns": np.cumsum(gaps_ns),
            "prompt_tokens": prompt.sample(prompt_rng, n),
            "output_tokens": output.sample(output_rng, n),
        },
        schema=WORKLOAD_SCHEMA,
    )


# --------------------------------------------------------------------------- transforms


def head(workload: pl.DataFrame, n: int) -> pl.DataFrame:
    """The first ``n`` requests by arrival (arrivals stay relative to the first)."""
    if n < 0:
        raise UsageError(f"number of requests must be >= 0 (got {n})")
    return workload.head(n)


def window(
    workload: pl.DataFrame, start_ns: int, end_ns: int, *, rebase: bool = True
) -> pl.DataFrame:
    """The requests arriving in ``[start_ns, end_ns)``; with ``rebase`` the first is at 0."""
    if end_ns < start_ns:
        raise UsageError(f"time window ends before it starts ({start_ns} .. {end_ns} ns)")
    out = workload.filter(pl.col("arrival_ns").is_between(start_ns, end_ns, closed="left"))
    if rebase and out.height:
        out = out.with_columns(pl.col("arrival_ns") - pl.col("arrival_ns").min())
    return out


def scale_rate(workload: pl.DataFrame, factor: float) -> pl.DataFrame:
    """Compress (``factor`` > 1) or stretch (< 1) arrivals: the rate is multiplied by it.

    ``arrival_ns / factor``, rounded to the nearest ns; lengths and ids are unchanged.
    """
    if not factor > 0 or not math.isfinite(factor):
        raise UsageError(f"rate factor must be a positive number (got {factor})")
    return workload.with_columns(
        (pl.col("arrival_ns").cast(pl.Float64) / factor).round().cast(pl.Int64)
    )


def validate_workload(workload: pl.DataFrame, source: str = "workload") -> pl.DataFrame:
    """Check a workload frame and return it typed and sorted by arrival (stable).

    Raises `InputError` naming ``source`` and the field when a column is missing, a
    value is null, negative or not an integer, an output length is 0, or an id repeats.
    Arrivals are rebased so that the first is at 0.
    """
    missing = [c for c in WORKLOAD_COLUMNS if c not in workload.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))} "
            f"(found: {', '.join(workload.columns) or 'none'})",
            hint="a workload has columns " + ", ".join(WORKLOAD_COLUMNS),
        )
    out = workload
    for name in WORKLOAD_COLUMNS[1:]:
        dtype = out.schema[name]
        if not dtype.is_integer():
            raise InputError(f"{source}: column '{name}' must be integer (found {dtype})")
    for name in WORKLOAD_COLUMNS:
        nulls = out[name].null_count()
        if nulls:
            raise InputError(f"{source}: column '{name}' has {nulls} null value(s)")
    out = out.with_columns(
        pl.col("request_id").cast(pl.String),
        pl.col("arrival_ns", "prompt_tokens", "output_tokens").cast(pl.Int64),
    )
    for name, low in (("arrival_ns", 0), ("prompt_tokens", 0), ("output_tokens", 1)):
        bad = out.filter(pl.col(name) < low)
        if bad.height:
            raise InputError(
                f"{source}: {bad.height} request(s) have '{name}' < {low} "
                f"(first: request {bad['request_id'][0]!r}, {name}={bad[name][0]})"
            )
    dup = out["request_id"].is_duplicated()
    if dup.any():
        first = out["request_id"].filter(dup)[0]
        raise InputError(f"{source}: request id {first!r} appears more than once")
    out = out.sort("arrival_ns", maintain_order=True)
    if out.height:
        out = out.with_columns(pl.col("arrival_ns") - pl.col("arrival_ns").first())
    return out


# --------------------------------------------------------------------------- readers


def read_workload(path: str | Path, fmt: str | None = None) -> pl.DataFrame:
    """Read a workload file; ``fmt`` is one of `WORKLOAD_FORMATS` or None to detect it.

    Detection: ``.jsonl``/``.ndjson``/``.json`` or a first character ``{`` is Mooncake;
    ``.parquet`` is a servetrace workload table; a CSV is Azure when its header has
    ``TIMESTAMP`` or ``ContextTokens``, a workload table when it has ``arrival_ns``.
    Raises `InputError` (naming the file, and the line and field when it is the data)
    when the file is missing, unreadable, of unknown format or malformed.
    """
    p = Path(path)
    _check_readable(p)
    kind = fmt.lower() if fmt is not None else _detect_format(p)
    if kind == "azure":
        return read_azure_2023(p)
    if kind == "mooncake":
        return read_mooncake(p)
    if kind == "workload":
        return _read_workload_table(p)
    raise UsageError(
        f"unknown workload format {fmt!r}",
        hint="choose one of: " + ", ".join(WORKLOAD_FORMATS),
    )


def read_azure_2023(path: str | Path) -> pl.DataFrame:
    """Read an Azure LLM inference trace 2023 CSV (Splitwise, Patel et al., ISCA 2024).

    Columns: ``TIMESTAMP`` (naive ``YYYY-MM-DD HH:MM:SS.fffffff``, 100 ns ticks),
    ``ContextTokens`` → ``prompt_tokens``, ``GeneratedTokens`` → ``output_tokens``. The
    timestamp is parsed with integer arithmetic (date, h, m, s and the fraction padded
    to 9 digits), never through float seconds, so every tick is exact. Request ids are
    ``r`` + the zero-based data-row index, zero-padded (row 0 is line 2 of the file).
    A missing final newline is fine (the published files have none).
    """
    p = Path(path)
    _check_readable(p)
    try:
        raw = pl.read_csv(p, infer_schema=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not a readable CSV ({_first_line(exc)})") from None
    missing = [c for c in AZURE_COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(
            f"{p}: missing column(s) {', '.join(map(repr, missing))} "
            f"(found: {', '.join(raw.columns) or 'none'})",
            hint="an Azure LLM inference trace has the header "
            "TIMESTAMP,ContextTokens,GeneratedTokens",
        )
    if raw.height == 0:
        raise InputError(f"{p}: no requests (the file has a header only)")

    ts = _parse_naive_timestamp_ns(pl.col("TIMESTAMP"))
    parsed = raw.select(
        ts.alias("ts_ns"),
        _parse_count(pl.col("ContextTokens")).alias("prompt_tokens"),
        _parse_count(pl.col("GeneratedTokens")).alias("output_tokens"),
    )
    for src, dst, what in (
        ("TIMESTAMP", "ts_ns", "a timestamp like 2023-11-16 18:15:46.6805900"),
        ("ContextTokens", "prompt_tokens", "a whole number of tokens >= 0"),
        ("GeneratedTokens", "output_tokens", "a whole number of tokens >= 0"),
    ):
        bad = parsed[dst].is_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            count = int(bad.sum())
            raise InputError(
                f"{p}: line {row + 2}: field '{src}' is not {what} (got {raw[src][row]!r})",
                hint=(f"{count} rows in all have this problem; " if count > 1 else "")
                + "TIMESTAMP is 'YYYY-MM-DD HH:MM:SS.fffffff' (no time zone); the token "
                "counts are integers",
            )
    out = pl.DataFrame(
        {
            "request_id": _row_ids(raw.height),
            "arrival_ns": parsed["ts_ns"],
            "prompt_tokens": parsed["prompt_tokens"],
            "output_tokens": parsed["output_tokens"],
        },
        schema=WORKLOAD_SCHEMA,
    )
    return validate_workload(out, str(p))


def read_mooncake(path: str | Path) -> pl.DataFrame:
    """Read a Mooncake (Kimi, FAST'25) trace: JSON Lines, one request per line.

    Fields: ``timestamp`` (int ms, relative) → ``arrival_ns`` (exact, times 10^6),
    ``input_length`` → ``prompt_tokens``, ``output_length`` → ``output_tokens``, and the
    optional ``hash_ids`` (prefix-block ids, 512 tokens each) kept as the List(Int64)
    column ``prefix_blocks`` so that prefix sharing stays visible. Tied timestamps are
    common (the conversation trace is quantised to ~1 s) and are kept, in file order.
    Request ids are ``r`` + the zero-based record index, zero-padded.
    """
    p = Path(path)
    _check_readable(p)
    try:
        raw = pl.read_ndjson(p, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        raise _mooncake_diagnose(p) from None
    ok = raw.height > 0 and all(
        f in raw.columns and raw.schema[f].is_integer() and raw[f].null_count() == 0
        for f in MOONCAKE_FIELDS
    )
    if ok and "hash_ids" in raw.columns:
        dtype = raw.schema["hash_ids"]
        ok = isinstance(dtype, pl.List) and (dtype.inner.is_integer() or dtype.inner == pl.Null)
    if ok:
        ok = not raw.select(
            pl.any_horizontal([(pl.col(f) < 0).any() for f in MOONCAKE_FIELDS])
        ).item()
    if not ok:
        raise _mooncake_diagnose(p)
    columns: dict[str, pl.Series] = {
        "request_id": pl.Series(_row_ids(raw.height), dtype=pl.String),
        "arrival_ns": raw["timestamp"].cast(pl.Int64) * _NS_PER_MS,
        "prompt_tokens": raw["input_length"].cast(pl.Int64),
        "output_tokens": raw["output_length"].cast(pl.Int64),
    }
    if "hash_ids" in raw.columns:
        columns["prefix_blocks"] = raw["hash_ids"].cast(pl.List(pl.Int64))
    return validate_workload(pl.DataFrame(columns), str(p))


# --------------------------------------------------------------------------- helpers


def _check_readable(p: Path) -> None:
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a workload file")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _row_ids(n: int) -> list[str]:
    width = max(4, len(str(max(n - 1, 0))))
    return [f"r{i:0{width}d}" for i in range(n)]


def _parse_count(col: pl.Expr) -> pl.Expr:
    """A non-negative integer from a string column; null when it is anything else."""
    value = col.str.strip_chars().cast(pl.Int64, strict=False)
    return pl.when(value >= 0).then(value)


def _parse_naive_timestamp_ns(col: pl.Expr) -> pl.Expr:
    """Exact Int64 ns since 1970 from ``YYYY-MM-DD HH:MM:SS[.f…]`` strings; null if not."""
    parts = col.str.extract_groups(_TIMESTAMP_RE)
    day = parts.struct.field("1").str.strptime(pl.Date, "%Y-%m-%d", strict=False).cast(pl.Int64)
    hour = parts.struct.field("2").cast(pl.Int64)
    minute = parts.struct.field("3").cast(pl.Int64)
    second = parts.struct.field("4").cast(pl.Int64)
    frac_ns = parts.struct.field("5").fill_null("0").str.pad_end(9, "0").cast(pl.Int64)
    total = (
        day * _NS_PER_DAY
        + hour * 3600 * _NS_PER_S
        + minute * 60 * _NS_PER_S
        + second * _NS_PER_S
        + frac_ns
    )
    valid = (hour < 24) & (minute < 60) & (second < 60)
    return pl.when(valid).then(total)


def _mooncake_diagnose(p: Path) -> InputError:
    """Scan a Mooncake file line by line and describe its first problem."""
    records = 0
    try:
        with p.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    return InputError(
                        f"{p}: line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})",
                        hint="a Mooncake trace has one JSON object per line",
                    )
                if not isinstance(obj, dict):
                    return InputError(
                        f"{p}: line {lineno}: expected a JSON object, got {type(obj).__name__}",
                        hint="a Mooncake trace has one JSON object per line",
                    )
                records += 1
                for field in MOONCAKE_FIELDS:
                    if field not in obj:
                        return InputError(
                            f"{p}: line {lineno}: missing field '{field}' "
                            f"(found: {', '.join(obj) or 'none'})",
                            hint="a Mooncake record has timestamp, input_length, "
                            "output_length and hash_ids",
                        )
                    value = obj[field]
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        unit = "milliseconds" if field == "timestamp" else "tokens"
                        return InputError(
                            f"{p}: line {lineno}: field '{field}' must be a whole number "
                            f"of {unit} >= 0 (got {value!r})"
                        )
                ids = obj.get("hash_ids")
                if ids is not None and not (
                    isinstance(ids, list)
                    and all(isinstance(h, int) and not isinstance(h, bool) for h in ids)
                ):
                    return InputError(
                        f"{p}: line {lineno}: field 'hash_ids' must be a list of integers"
                    )
    except UnicodeDecodeError:
        return InputError(f"{p}: not a text file (it is not valid UTF-8)")
    except OSError as exc:
        return InputError(f"{p}: cannot be read ({exc.strerror})")
    if records == 0:
        return InputError(f"{p}: no requests (the file is empty)")
    return InputError(f"{p}: not a readable Mooncake trace")


def _detect_format(p: Path) -> str:
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "mooncake"
    if suffix == ".parquet":
        return "workload"
    try:
        with p.open("rb") as fh:
            start = fh.read(4096)
    except OSError as exc:
        raise InputError(f"{p}: cannot be read ({exc.strerror})") from None
    text = start.lstrip().decode("utf-8", errors="replace")
    if text.startswith("{"):
        return "mooncake"
    if start.startswith(b"PAR1"):
        return "workload"
    header = [h.strip().strip('"') for h in text.splitlines()[0].split(",")] if text else []
    if "TIMESTAMP" in header or "ContextTokens" in header:
        return "azure"
    if "arrival_ns" in header:
        return "workload"
    raise InputError(
        f"{p}: cannot tell the workload format (header: {', '.join(header) or 'empty'})",
        hint="pass the format explicitly, one of: " + ", ".join(WORKLOAD_FORMATS),
    )


def _read_workload_table(p: Path) -> pl.DataFrame:
    try:
        if p.suffix.lower() == ".parquet" or p.read_bytes()[:4] == b"PAR1":
            raw = pl.read_parquet(p)
        else:
            raw = pl.read_csv(
                p,
                schema_overrides={
                    "request_id": pl.String,
                    "arrival_ns": pl.Int64,
                    "prompt_tokens": pl.Int64,
                    "output_tokens": pl.Int64,
                },
            )
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{p}: not a readable workload table ({_first_line(exc)})",
            hint="a workload has integer columns arrival_ns, prompt_tokens, output_tokens",
        ) from None
    return validate_workload(raw, str(p))
