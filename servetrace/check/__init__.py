"""CI gate: rule grammar, configuration, evaluation (numbers only)."""
