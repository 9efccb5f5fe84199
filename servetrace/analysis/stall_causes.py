"""What a stalled inter-token gap is blamed on, and why a gap could not be joined
(docs/design.md §10): names only, for rules and help texts."""

from __future__ import annotations

CAUSES = ("prefill", "paused_for_prefill", "skipped", "between_steps", "large_batch", "other")
# Why a gap is covered by no step.
UNJOINED_REASONS = {
    "replica_without_steps": "the request's replica has no steps",
    "outside_steps": "the gap lies before the first or after the last step of its replica",
    "zero_length": "two ticks at one instant (no step can end between them)",
    "no_step_ends_in_gap": "no step of its replica ends between its two ticks",
}
