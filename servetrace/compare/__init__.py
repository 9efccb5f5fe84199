"""Is B different from A on the same workload: metric catalog, matching, measuring, attribution."""

from servetrace._callable import make_callable

# ``servetrace.compare(...)`` is the library API function ``servetrace.api.compare``.
make_callable(__name__)
