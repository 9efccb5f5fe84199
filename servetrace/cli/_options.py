"""Options several commands share, declared once, and the one validator of numeric flags.

Every numeric option of every command goes through ``in_range``: NaN, ±inf and values
outside the option's domain are a usage error (exit 2) naming the flag, before any file is
read: a NaN threshold would otherwise compare false with everything and silently disable
what it guards.

Light by design: ``servetrace --help`` builds every command's options from this module,
so it imports no Polars and no engine module (the parsers load when a command runs).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from servetrace.cli._app import F, with_parameters
from servetrace.errors import UsageError
from servetrace.render._csv import write_text_raw
from servetrace.render.naming import Naming
from servetrace.settings import IMPORT_FORMATS
from servetrace.sources.steps.formats import STEP_FORMATS
from servetrace.units import NS_PER_MS

if TYPE_CHECKING:
    from servetrace.analysis.summary import GoodputTarget

INT64_MAX = 2**63 - 1
SEED_MAX = 2**64 - 1  # numpy's SeedSequence takes any non-negative int; keep it to 64 bits
# A duration in ms (or a count) must stay an int64 once converted to ns.
MAX_MS = INT64_MAX / NS_PER_MS


def in_range(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Callable[[typer.Context, typer.CallbackParam, Any], Any]:
    """A Typer callback that accepts a finite number within [low, high] (or open ends)."""

    def describe() -> str:
        if low is not None and high is not None:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            return f"in {left}{low:g}, {high:g}{right}"
        if low is not None:
            return f"{'>' if low_open else '>='} {low:g}"
        if high is not None:
            return f"{'<' if high_open else '<='} {high:g}"
        return "finite"

    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        number = float(value)
        too_low = low is not None and (number <= low if low_open else number < low)
        too_high = high is not None and (number >= high if high_open else number > high)
        if math.isnan(number) or math.isinf(number) or too_low or too_high:
            raise typer.BadParameter(f"{value} is not a finite number {describe()}")
        return value

    return check


NON_NEGATIVE = in_range(0)
POSITIVE = in_range(0, low_open=True)
FRACTION = in_range(0, 1)  # a share or a probability
DURATION_MS = in_range(0, MAX_MS)  # a tolerance or delay in ms, ns-representable
COUNT = in_range(1, INT64_MAX)
SEED = in_range(0, SEED_MAX)
MAX_RESAMPLES = 10_000_000  # beyond this a run takes hours; no CI is that precise
RESAMPLES = in_range(100, MAX_RESAMPLES)  # fewer than 100 cannot give a 95 % interval

ColumnOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="COLUMN=YOURS",
        help="Map a canonical column to yours, e.g. 'ts=time_ms'; repeatable.",
    ),
]
TimeUnitOpt = Annotated[
    str | None,
    typer.Option(
        metavar="UNIT",
        help="Unit of numeric timestamps: ns, us, ms or s (default: ints ns, floats s).",
    ),
]
EventMapOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="YOURS=KIND",
        help="Map your event name to a kind, e.g. 'enqueue=arrival'; repeatable.",
    ),
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="FORMAT",
        help="Read another tool's export: "
        + ", ".join(IMPORT_FORMATS[:-1])
        + f", or {IMPORT_FORMATS[-1]} (one row per request, columns named with --column "
        "arrival=... ttft=... e2e=...) (default: canonical trace, or detected from content).",
    ),
]
GoodputOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="TARGET", help="Per-request SLO target, e.g. 'ttft<=200ms'; repeat for several."
    ),
]
# Options analyze, validate and merge share (one trace's report), declared once.
CsvRawTextOpt = Annotated[
    bool,
    typer.Option(
        "--csv-raw-text",
        help="Write CSV text cells as they are. By default a text cell starting with =, +, "
        "-, @, tab or CR gets a leading ' so a spreadsheet does not run it as a formula "
        "(numbers are never changed; Parquet, Arrow and JSON Lines never are).",
        callback=write_text_raw,
    ),
]
ByOpt = Annotated[
    str | None, typer.Option(metavar="COLUMN", help="One summary per value of this column.")
]
StrictOpt = Annotated[bool, typer.Option(help="Exit 1 if any request breaks a rule.")]
NamingOpt = Annotated[Naming, typer.Option(help="Show metrics under the names this tool uses.")]
FormulaAbsTolOpt = Annotated[
    float | None,
    typer.Option(
        metavar="MS",
        help="Formula check: absolute tolerance, ms (default 1).",
        callback=DURATION_MS,
    ),
]
FormulaRelTolOpt = Annotated[
    float | None,
    typer.Option(
        metavar="FRACTION",
        help="Formula check: tolerance relative to response time (default 0.01).",
        callback=NON_NEGATIVE,
    ),
]
# analyze --steps: the engine's step records joined to the trace's token ticks.
StepsOpt = Annotated[
    Path | None,
    typer.Option(
        "--steps",
        metavar="STEPS",
        help="Engine step records (one row per forward pass) of the same run: adds where "
        "the ITL stalls come from (each gap joined to the steps that cover it).",
    ),
]
# timeline --steps: the same records, drawn.
TimelineStepsOpt = Annotated[
    Path | None,
    typer.Option(
        "--steps",
        metavar="STEPS",
        help="Engine step records (one row per forward pass) of the same run: a lane of "
        "steps and counters (batch size, prefill tokens, KV usage) per replica.",
    ),
]
StepsFromOpt = Annotated[
    str | None,
    typer.Option(
        "--steps-from",
        metavar="FORMAT",
        help="Format of --steps: " + ", ".join(STEP_FORMATS) + " (default: detected).",
    ),
]
StallsOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--stalls-out",
        metavar="FILE",
        help="With --steps: one row per ITL gap (request_id, gap_start_ns, gap_end_ns, steps, "
        "prefill_tokens, decode_tokens, excess_ns, cause), .csv or .parquet.",
    ),
]
ServerMetricsOpt = Annotated[
    str | None,
    typer.Option(
        "--server-metrics",
        metavar="FILE",
        help="The engine's Prometheus series (text exposition file or folder of scrapes, "
        "query_range JSON, AIPerf server_metrics_export.jsonl): put on the trace's time "
        "axis and checked against it (section 'server metrics vs the trace').",
    ),
]
ServerMetricsFromOpt = Annotated[
    str | None,
    typer.Option(
        "--server-metrics-from",
        metavar="FORMAT",
        help="Format of --server-metrics: prometheus, query_range or aiperf (default: detected).",
    ),
]
ClockOffsetOpt = Annotated[
    float | None,
    typer.Option(
        "--clock-offset-ms",
        metavar="MS",
        help="Server clock − trace clock, when it cannot be estimated from the running gauge.",
        callback=in_range(-MAX_MS, MAX_MS),
    ),
]
TracesArg = Annotated[
    list[str],
    typer.Argument(
        metavar="TRACE...",
        help="Trace file(s), glob(s) or directory(ies) of parts; read as one trace.",
    ),
]


# The flags that say how to read the inputs, the same in every command that reads traces.
_READING_PARAMETERS = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
    for name, option in (
        ("column", ColumnOpt),
        ("time_unit", TimeUnitOpt),
        ("event_map", EventMapOpt),
        ("from_format", FromOpt),
    )
)


def reading_options(command: F) -> F:
    """Give a command ``--column``, ``--time-unit``, ``--event-map`` and ``--from``.

    The command declares one parameter ``reading: dict[str, Any]`` instead and receives
    those flags as keyword arguments of the library API (``servetrace.analyze(...,
    **reading)``).
    """
    if "reading" not in inspect.signature(command).parameters:
        raise TypeError(f"{command.__name__} takes no 'reading' parameter")
    return with_parameters(
        command,
        _READING_PARAMETERS,
        lambda given: {"reading": reading(**given)},
        replaces=("reading",),
    )


def reading(
    column: list[str] | None,
    time_unit: str | None,
    event_map: list[str] | None,
    from_format: str | None,
) -> dict[str, Any]:
    """The shared reading flags as keyword arguments of the library API."""
    from servetrace.sources.canonical import parse_mapping

    return {
        "columns": parse_mapping(column or [], "--column"),
        "time_unit": time_unit,
        "event_map": parse_mapping(event_map or [], "--event-map"),
        "from_format": from_format,
    }


def ns_of_ms(ms: float | None) -> int | None:
    """A duration option given in ms, as the library takes it: Int64 ns (None stays None)."""
    return None if ms is None else round(ms * NS_PER_MS)


SAME_RUN_STEPS = "give the engine's step records of the same run: --steps STEPS"


def steps_needed(steps: object, *given: tuple[str, object], hint: str = SAME_RUN_STEPS) -> None:
    """Options about the step records (``--steps-from``, ``--stalls-out``) need ``--steps``."""
    if steps is None:
        for flag, value in given:
            if value is not None:
                raise UsageError(f"{flag} needs --steps", hint=hint)


def goodput_targets(texts: list[str] | None) -> tuple[GoodputTarget, ...]:
    from servetrace.rules.grammar import parse_goodput_target

    return tuple(parse_goodput_target(text) for text in texts or [])
