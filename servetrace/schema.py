"""The canonical event schema, version 1 (DESIGN §2): the single source of names.

Everything else imports event kinds, column names, aliases and units from here, and the
CLI help and the tables of docs/reference.md are generated from these definitions. Plain
Python: the CLI reads it at start-up (the Polars types are in ``servetrace.dtypes``).
"""

from __future__ import annotations

from dataclasses import dataclass

# Lifecycle order: events of one request with equal timestamps are taken in this order.
EVENT_KINDS: tuple[str, ...] = (
    "arrival",
    "admission",
    "first_token",
    "token",
    "preemption",
    "completion",
    "cancellation",
    "error",
    "release",
)
# ``error``: the request failed (HTTP 429, timeout, engine error), with ``error_code`` /
# ``error_type`` attributes; additive to schema v1. Not a cancellation.
TERMINAL_EVENTS: tuple[str, ...] = ("completion", "cancellation", "error")
TICK_EVENTS: tuple[str, ...] = ("first_token", "token")

# Well-known spellings from engines and clients, mapped onto the canonical kinds.
EVENT_ALIASES: dict[str, str] = {
    "arrived": "arrival",
    "arrive": "arrival",
    "request_arrival": "arrival",
    "enqueued": "arrival",
    "queued": "arrival",
    "received": "arrival",
    "sent": "arrival",
    "send": "arrival",
    "request_sent": "arrival",
    "scheduled": "admission",
    "schedule": "admission",
    "admitted": "admission",
    "admit": "admission",
    "started": "admission",
    "running": "admission",
    "first_token_time": "first_token",
    "firsttoken": "first_token",
    "ttft": "first_token",
    "first_chunk": "first_token",
    "tok": "token",
    "chunk": "token",
    "output_token": "token",
    "decode": "token",
    "preempted": "preemption",
    "preempt": "preemption",
    "evicted": "preemption",
    "swapped_out": "preemption",
    "finished": "completion",
    "finish": "completion",
    "completed": "completion",
    "complete": "completion",
    "done": "completion",
    "end": "completion",
    "aborted": "cancellation",
    "abort": "cancellation",
    "canceled": "cancellation",
    "cancelled": "cancellation",
    "cancel": "cancellation",
    "errored": "error",
    "failed": "error",
    "freed": "release",
    "released": "release",
    "free": "release",
}

# Range of every time at ingest: |ts| < 2^62 ns (±146 years around 1970), so the difference
# of any two times, or a time plus a duration, still fits Int64 and never wraps around.
MAX_ABS_NS = 2**62
# Every token count per row below 2^32: a sum over fewer than 2^31 rows cannot wrap.
MAX_COUNT = 2**32


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    required: bool
    description: str


COLUMNS: tuple[Column, ...] = (
    Column("request_id", "string or integer", True, "identifies one request within the trace"),
    Column("event", "string", True, "one of: " + ", ".join(EVENT_KINDS)),
    Column(
        "ts",
        "integer, float or timestamp",
        True,
        "when it happened: integers are ns, floats are s, unless --time-unit",
    ),
    Column(
        "tokens",
        "integer >= 1",
        False,
        "output tokens carried by a first_token/token event (a streamed chunk); default 1",
    ),
    Column("prompt_tokens", "integer >= 0", False, "on arrival: input length"),
    Column(
        "output_tokens",
        "integer >= 0",
        False,
        "on completion: authoritative output count; default: sum of tokens over ticks",
    ),
)
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
OPTIONAL_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if not c.required)
CANONICAL_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS)

# Attribute column that importers set to say where the times were measured.
SOURCE_COLUMN = "source"
SOURCE_CLIENT = "client"
SOURCE_SERVER = "server"
