"""How to read the user's files: the options every reader and check shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

COUNT_COLUMNS = ("tokens", "prompt_tokens", "output_tokens")


@dataclass(frozen=True)
class IngestOptions:
    """How to read the user's files: column names, time unit, extra event names."""

    columns: Mapping[str, str] = field(default_factory=dict)  # canonical -> file column
    time_unit: str | None = None  # unit of numeric ``ts``; None: ints ns, floats s
    event_map: Mapping[str, str] = field(default_factory=dict)  # file value -> canonical
