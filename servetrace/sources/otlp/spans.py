"""OTLP JSON spans, decoded: the Collector file export read into ``Span`` values, and the
typed attribute access both dialects use (``seconds``, ``count``, ``finish_reasons``).

Knows nothing of the dialects: ``dispatch`` picks one for the spans read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS
from servetrace.sources._engine import sniff_head
from servetrace.sources.reading import (
    FormatMismatch,
    describe_json,
    iter_json_lines,
    json_lines,
    read_bytes,
)

FORMAT = "otlp"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "unset", 1: "ok", 2: "error"}


@dataclass(frozen=True)
class Span:
    """One span, flattened: its attribute values decoded from their OTLP types."""

    where: str  # "file.json: line 3: span 2" — where an error points
    name: str
    kind: str
    trace_id: str
    span_id: str
    start_ns: int
    end_ns: int | None
    status: str
    status_message: str | None
    attributes: dict[str, Any]
    resource: dict[str, Any]


def sniff_record(obj: Any) -> bool:
    """True for one line of a Collector file export of traces."""
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def sniff_file(path: Path) -> bool:
    """True when the file's first JSON value is an OTLP traces export (never raises; reads
    the head of the file only)."""
    return sniff_head(path, sniff_record, r'\s*\{\s*"resourceSpans"\s*:')


def read_spans(path: Path) -> list[Span]:
    """Every span of one export file, with errors naming the line and span."""
    data = read_bytes(path)
    if data.startswith(_ZSTD_MAGIC):
        raise InputError(
            f"{path}: zstd-compressed (the file exporter's 'compression: zstd')",
            hint="decompress it first: zstd -d FILE",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: not UTF-8 text (byte {error.start}): the file exporter's "
            "'format: proto' is not read, use 'format: json'"
        ) from None
    spans: list[Span] = []
    for number, obj in iter_json_lines(path, text):
        where = f"{path}: line {number}"
        if not sniff_record(obj):
            if not spans and number == _first_line(text):
                raise FormatMismatch(
                    f"{where}: not an OTLP JSON traces export: expected 'resourceSpans' "
                    f"({describe_json(obj)})"
                )
            raise InputError(f"{where}: expected an object with 'resourceSpans' (an OTLP export)")
        for r_index, resource_spans in enumerate(obj["resourceSpans"]):
            r_where = f"{where}: resourceSpans[{r_index}]"
            _require(resource_spans, Mapping, r_where, "resourceSpans[]")
            resource = _attributes(
                (resource_spans.get("resource") or {}).get("attributes"), r_where + ".resource"
            )
            scopes = resource_spans.get(
                "scopeSpans", resource_spans.get("instrumentationLibrarySpans", [])
            )
            _require(scopes, list, r_where, "scopeSpans")
            for s_index, scope in enumerate(scopes):
                s_where = f"{r_where}.scopeSpans[{s_index}]"
                _require(scope, Mapping, s_where, "scopeSpans[]")
                raw_spans = scope.get("spans", [])
                _require(raw_spans, list, s_where, "spans")
                for index, raw in enumerate(raw_spans):
                    spans.append(_span(raw, f"{s_where}.spans[{index}]", resource))
    return spans


def _first_line(text: str) -> int:
    for number, line in enumerate(json_lines(text), start=1):
        if line.strip():
            return number
    return 1


def _span(raw: Any, where: str, resource: dict[str, Any]) -> Span:
    _require(raw, Mapping, where, "span")
    start = _unix_ns(raw.get("startTimeUnixNano"), where, "startTimeUnixNano", required=True)
    assert start is not None
    end = _unix_ns(raw.get("endTimeUnixNano"), where, "endTimeUnixNano", required=False)
    kind = raw.get("kind", 0)
    if isinstance(kind, str):
        kind_name = kind.removeprefix("SPAN_KIND_").lower()
    elif isinstance(kind, int):
        kind_name = _KINDS.get(kind, str(kind))
    else:
        raise InputError(f"{where}: field 'kind' must be a number or a SPAN_KIND_ name")
    status = raw.get("status") or {}
    _require(status, Mapping, where, "status")
    code = status.get("code", 0)
    status_name = (
        code.removeprefix("STATUS_CODE_").lower()
        if isinstance(code, str)
        else _STATUS.get(code, str(code))
    )
    return Span(
        where=where,
        name=str(raw.get("name", "")),
        kind=kind_name,
        trace_id=str(raw.get("traceId", "")),
        span_id=str(raw.get("spanId", "")),
        start_ns=start,
        end_ns=end,
        status=status_name,
        status_message=status.get("message") or None,
        attributes=_attributes(raw.get("attributes"), where),
        resource=resource,
    )


def _unix_ns(value: Any, where: str, field: str, *, required: bool) -> int | None:
    """A ``fixed64`` time: a decimal string (proto3 JSON) or, from some writers, a number."""
    if value is None or value == "" or value == "0" or value == 0:
        if required:
            raise InputError(f"{where}: missing field '{field}' (the span's start, Unix ns)")
        return None
    if isinstance(value, bool):
        raise InputError(f"{where}: field '{field}' must be Unix ns, got {value!r}")
    if isinstance(value, str) and value.isdigit():
        ns = int(value)
    elif isinstance(value, int):
        ns = value
    else:
        raise InputError(
            f"{where}: field '{field}' must be Unix ns as a decimal string, got {value!r}"
        )
    # fixed64 holds up to 1.8e19; a time must stay within the canonical range, in which
    # any later difference or sum still fits Int64.
    if abs(ns) >= MAX_ABS_NS:
        raise InputError(
            f"{where}: field '{field}' is {ns:.4g} ns, beyond the ±4.6e18 ns (±146 years "
            "around 1970) a time may span"
        )
    return ns


def _attributes(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    _require(raw, list, where, "attributes")
    decoded: dict[str, Any] = {}
    for index, item in enumerate(raw):
        a_where = f"{where}: attributes[{index}]"
        # dict, not Mapping: json gives dicts, and the ABC check costs per attribute.
        if type(item) is not dict or type(item.get("key")) is not str:
            raise InputError(f"{a_where}: expected {{'key': ..., 'value': ...}}")
        decoded[item["key"]] = any_value(item.get("value"), f"{a_where} ({item['key']})")
    return decoded


def any_value(value: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` as a Python value (``intValue`` arrives as a string)."""
    if value is None or value == {}:
        return None
    if type(value) is not dict:
        raise InputError(f"{where}: an attribute value must be a typed object, got {value!r}")
    if "stringValue" in value:
        return str(value["stringValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            raise InputError(
                f"{where}: intValue must be an integer, got {value['intValue']!r}"
            ) from None
    if "doubleValue" in value:
        number = value["doubleValue"]
        try:
            return float(number)  # "NaN", "Infinity" are valid proto3 JSON doubles
        except (TypeError, ValueError):
            raise InputError(f"{where}: doubleValue must be a number, got {number!r}") from None
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        items = _values(value, "arrayValue", where)
        return [any_value(item, where) for item in items]
    if "kvlistValue" in value:
        pairs = _values(value, "kvlistValue", where)
        if not all(type(p) is dict for p in pairs):
            raise InputError(f"{where}: kvlistValue.values must hold {{'key', 'value'}} objects")
        return {p.get("key"): any_value(p.get("value"), where) for p in pairs}
    if "bytesValue" in value:
        return str(value["bytesValue"])
    raise InputError(f"{where}: unknown attribute value type ({', '.join(map(str, value))})")


def _values(value: dict[str, Any], kind: str, where: str) -> list[Any]:
    """The ``values`` list of an ``arrayValue`` / ``kvlistValue`` (an object, may be empty)."""
    body = value[kind]
    if body is None:
        return []
    if type(body) is not dict or type(body.get("values", [])) is not list:
        raise InputError(
            f"{where}: {kind} must be an object with a 'values' list, got {body!r:.60}"
        )
    values: list[Any] = body.get("values", [])
    return values


def _require(value: Any, kind: type, where: str, field: str) -> None:
    if not isinstance(value, kind):
        what = "a list" if kind is list else "an object"
        raise InputError(f"{where}: field '{field}' must be {what}")


# --------------------------------------------------------------------------------------
# Helpers for the dialects
# --------------------------------------------------------------------------------------


def seconds(span: Span, *names: str, required: bool = False, minimum: float = 0.0) -> float | None:
    """The first present attribute among ``names`` as finite seconds (>= ``minimum``)."""
    for name in names:
        value = span.attributes.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(
                f"{span.where}: attribute '{name}' must be a number of seconds, got {value!r}"
            )
        if not math.isfinite(value) or value < minimum:
            raise InputError(
                f"{span.where}: attribute '{name}' must be a finite time >= {minimum:g} s, "
                f"got {value}"
            )
        return float(value)
    if required:
        raise InputError(f"{span.where}: missing attribute '{names[0]}' on this span")
    return None


def count(span: Span, *names: str) -> int | None:
    for name in names:
        value = span.attributes.get(name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 0
            or value != int(value)
        ):
            raise InputError(
                f"{span.where}: attribute '{name}' must be a token count, got {value!r}"
            )
        return int(value)
    return None


def unmapped(span: Span, known: frozenset[str] | set[str]) -> dict[str, object]:
    """The span's attributes a dialect does not map, and its resource's (``resource.``…):
    kept as request attributes, so nothing the export holds is lost."""
    return {
        **{k: v for k, v in span.attributes.items() if k not in known},
        **{f"resource.{k}": v for k, v in span.resource.items()},
    }


def finish_reasons(span: Span, *names: str) -> str | None:
    """The first present attribute among ``names``, its reasons joined by commas."""
    for name in names:
        value = span.attributes.get(name)
        if value is None:
            continue
        reasons = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        return ",".join(reasons) if reasons else None
    return None
