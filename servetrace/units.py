"""The one place unit constants live: every time inside servetrace is integer ns.

Readers convert into ns once (``TIME_UNITS``), the core computes in ns, and only
``servetrace.render`` converts back for people.
"""

from __future__ import annotations

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S

# Nanoseconds per time unit, as users and files spell them (``--time-unit``, rule limits).
TIME_UNITS: dict[str, int] = {"ns": 1, "us": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}
# The same, with the micro sign spellings rules accept (``500µs``).
TIME_UNIT_SPELLINGS: dict[str, int] = {**TIME_UNITS, "µs": NS_PER_US, "μs": NS_PER_US}
