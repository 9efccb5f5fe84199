"""The metadata both AIPerf exports carry on every record (``profile_export.jsonl`` and
``profile_export_raw.jsonl``): the request id, start, end and cancellation times, and the
error. One definition of each field, so the two readers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servetrace.sources.fields import Fields

#: AIPerf's error code for a request the client cancelled.
CANCELLED = 499


def record_id(fields: Fields, obj: Any, index: int, where: str) -> str:
    """``metadata.x_request_id``, else the record's position in the file."""
    return fields.string(obj, "metadata.x_request_id", where, required=False) or str(index)


def start_ns(fields: Fields, obj: Any, where: str) -> int | None:
    """The request start in Unix epoch ns: ``request_start_ns`` since AIPerf 0.2,
    ``timestamp_ns`` before."""
    return fields.first_integer(
        where, (obj, "metadata.request_start_ns"), (obj, "metadata.timestamp_ns")
    )


def end_ns(fields: Fields, obj: Any, where: str) -> int | None:
    return fields.integer(obj, "metadata.request_end_ns", where, required=False)


def cancel_ns(fields: Fields, obj: Any, where: str) -> int | None:
    return fields.integer(obj, "metadata.cancellation_time_ns", where, required=False)


def error_fields(fields: Fields, obj: Any, where: str) -> tuple[int | None, str | None]:
    """``(error.code, "type: message")`` of a failed record; ``(None, None)`` without one."""
    error = fields.mapping(obj, "error", where, required=False)
    if not error:
        return None, None
    return fields.integer(error, "code", where + ": error", required=False), _error_text(error)


def was_cancelled(fields: Fields, obj: Any, error_code: int | None) -> bool:
    """Cancelled by the client: ``metadata.was_cancelled``, or the error code 499."""
    return fields.get(obj, "metadata.was_cancelled") is True or error_code == CANCELLED


def _error_text(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    message = error.get("message")
    parts = [str(part) for part in (kind, message) if part]
    return ": ".join(parts) if parts else f"error {error.get('code')}"
