"""``servetrace check``: SLO rules and regression budgets, evaluated as a CI gate.

- ``rules``    what a parsed rule is (``SloRule``, ``RegressionRule``): plain values;
- ``grammar``  rules as written (``ttft.p99<=2s``, ``ttft.p99:+10%``, ``ttft<=200ms``),
  parsed with the position of each mistake for the caret message;
- ``config``   the ``[check]`` table of ``servetrace.toml`` / ``pyproject.toml``;
- ``baseline`` a ``servetrace analyze --format json`` report used as a baseline;
- ``outcome``  pass / fail / skip, the reason codes, and why a value can be missing;
- ``observe``  a rule's statistic on a trace or baseline, or the reason it has none;
- ``result``   ``RuleResult`` / ``CheckResult``: numbers only;
- ``evaluate`` the rules on a trace (and baseline): numbers only. Words:
  ``render.check_words`` (lines) and ``render.check`` (formats).
"""
