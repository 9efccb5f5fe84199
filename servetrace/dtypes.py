"""The Polars types of the canonical schema.

Apart from ``schema.py`` because the CLI reads the schema's names at start-up (help
texts), and must not load Polars to do it.
"""

from __future__ import annotations

import polars as pl

from servetrace.schema import EVENT_KINDS

# An event's kind as a Polars Enum: its physical order is the lifecycle order, so sorting
# by it breaks timestamp ties as the lifecycle rules expect.
EVENT_DTYPE = pl.Enum(list(EVENT_KINDS))
