"""From canonical events to per-request metrics and a summary: lifecycle, metrics, engines."""
