"""CI gate: rule grammar, configuration, evaluation (numbers only)."""

from servetrace._callable import make_callable

# ``servetrace.check(...)`` is the library API function ``servetrace.api.check``.
make_callable(__name__)
