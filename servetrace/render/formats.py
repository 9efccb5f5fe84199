"""The output formats each command offers (light: the CLI builds its options from them)."""

from __future__ import annotations

from enum import Enum


class SummaryFormat(str, Enum):
    """Output formats of ``analyze``, ``capacity`` and ``merge``."""

    table = "table"
    json = "json"
    markdown = "markdown"
    csv = "csv"


class ValidateFormat(str, Enum):
    """Output formats of ``servetrace validate``: its report is a list of findings."""

    table = "table"
    json = "json"


class CheckFormat(str, Enum):
    """Output formats of ``servetrace check``."""

    table = "table"
    json = "json"
    markdown = "markdown"
    junit = "junit"


class CompareFormat(str, Enum):
    """Output formats of ``servetrace compare``."""

    table = "table"
    json = "json"
    markdown = "markdown"


class SimulateFormat(str, Enum):
    """Output formats of ``servetrace simulate``: a line on stderr, or a JSON report."""

    text = "text"
    json = "json"
