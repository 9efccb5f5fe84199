"""``servetrace check``: SLO rules and regression budgets, evaluated as a CI gate.

- ``rules``    what a parsed rule is (``SloRule``, ``RegressionRule``): plain values;
- ``grammar``  rules as written (``ttft.p99<=2s``, ``ttft.p99:+10%``, ``ttft<=200ms``),
  parsed with the position of each mistake for the caret message;
- ``config``   the ``[check]`` table of ``servetrace.toml`` / ``pyproject.toml``;
- ``baseline`` a ``servetrace analyze --format json`` report used as a baseline;
- ``outcome``  pass / fail / skip, the reason codes, and why a value can be missing;
- ``evaluate`` the rules on a trace (and baseline): numbers only. Words: ``render.check``.
"""
