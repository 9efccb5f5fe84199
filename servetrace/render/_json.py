"""Plain JSON values for every report: one place that says how numbers are written, and
how JSON is embedded in an HTML page."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from servetrace.version import SCHEMA_VERSION, __version__

# The keys every JSON report opens with.
VERSIONS = {"servetrace_version": __version__, "schema_version": SCHEMA_VERSION}


def clean(value: Any) -> Any:
    """numpy scalars unwrapped, NaN and ±inf as null, mappings and sequences recursively."""
    kind = type(value)
    if kind is int or kind is str or value is None:  # the common cases, first (--by: 300 reports)
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


# Inside a <script> element the HTML parser sees "<!--", "<script" and "</script" before
# any JSON parser does: one "<!--<script>" in a string puts it in the script
# double-escaped state and the rest of the page becomes script text. With "<", ">" and
# "&" as \u escapes no markup survives; U+2028 and U+2029 are escaped too, as older
# JavaScript engines end a line at them even inside a string. JSON.parse reads all five
# back as the characters they were.
_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(data: Any) -> str:
    """``data`` as JSON text that can sit inside an HTML ``<script>`` element as it is."""
    return json.dumps(data, ensure_ascii=False, default=str).translate(_SCRIPT_ESCAPES)
