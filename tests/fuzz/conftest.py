"""Hypothesis profiles for the differential fuzzer.

``ci`` (the default): a fixed, small number of derandomized examples, a few seconds in
all, the same cases on every run. ``long``: 10,000 cases in all (2,000 for each of the
five fuzz tests: three over event logs, two over the server importers), for a local run
before a release::

    HYPOTHESIS_PROFILE=long nice -n 10 python -m pytest -p no:cacheprovider tests/fuzz

``hunt``: 500 examples, no shrinking, to find failures quickly. The profile applies to
the fuzz tests only (they read it through ``FUZZ``), so the rest of the suite keeps its
own settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    "print_blob": True,
}
# No example database in CI: derandomized runs repeat the same cases anyway, and nothing
# is written into the checkout.
settings.register_profile("ci", max_examples=10, derandomize=True, database=None, **_COMMON)
FUZZ_TESTS = 5
settings.register_profile("long", max_examples=-(-10_000 // FUZZ_TESTS), **_COMMON)
# While hunting a failure: many cases, the first failing one reported as found (no
# minutes spent shrinking a case that runs the command line several times).
settings.register_profile(
    "hunt", max_examples=500, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON
)

FUZZ = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
