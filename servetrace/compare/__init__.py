"""Is B different from A on the same workload? Numbers only; ``servetrace.render`` words them.

- ``catalog``: what compare and check can name (``metric.stat``) and how to read a value;
- ``workload``: is it a controlled comparison, and how do the requests pair;
- ``population``: which requests (and gaps) each side's statistics describe;
- ``measure``: each ``(metric, stat)`` as a ratio with interval and verdict (also
  behind the regression budgets of ``check``);
- ``attribution``: where the e2e difference comes from, who gained, what was traded;
- ``caveats``: when not to trust the result;
- ``comparison``: ``compare()``, all of the above for one candidate.
"""

from servetrace._callable import make_callable

# ``servetrace.compare(...)`` is the library API function ``servetrace.api.compare``.
make_callable(__name__)
