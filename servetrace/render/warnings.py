"""Warnings of several runs, each said once: the same fact about many runs is one line
naming how many and which, not a line per run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Runs named in a grouped warning before the rest are counted.
NAMED = 3


def grouped_warnings(notes: Iterable[tuple[str, str, Sequence[str]]]) -> list[str]:
    """``(run label, message, the run's file names)`` → lines, first-seen order.

    A message that starts with one of its run's file names (``file: …``, as the importers
    write them) is compared without it: the label already says which run it is about.
    """
    runs_of: dict[str, list[str]] = {}
    for label, message, files in notes:
        text = _without_file(message, files)
        labels = runs_of.setdefault(text, [])
        if label not in labels:
            labels.append(label)
    lines = []
    for text, labels in runs_of.items():
        if len(labels) == 1:
            lines.append(f"{labels[0]}: {text}" if labels[0] else text)
            continue
        named = ", ".join(labels[:NAMED]) + (", …" if len(labels) > NAMED else "")
        lines.append(f"{len(labels)} runs ({named}): {text}")
    return lines


def _without_file(message: str, files: Sequence[str]) -> str:
    for name in sorted(files, key=len, reverse=True):
        if message.startswith(f"{name}: "):
            return message[len(name) + 2 :]
    return message
