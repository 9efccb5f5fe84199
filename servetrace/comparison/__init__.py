"""Is B different from A on the same workload? Numbers only; ``servetrace.render`` words them.

- ``catalog``: what compare and check can name (``metric.stat``) and how to read a value;
- ``workload``: is it a controlled comparison, and how do the requests pair;
- ``population``: which requests (and gaps) each side's statistics describe;
- ``measure``: each ``(metric, stat)`` as a ratio with interval and verdict (also
  behind the regression budgets of ``check``);
- ``attribution``: where the e2e difference comes from, who gained, what was traded;
- ``caveats``: when not to trust the result;
- ``compare``: ``compare()``, all of the above for one candidate.
"""
