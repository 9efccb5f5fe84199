"""Run labels: ``--label``, else the shortest parts of the paths that tell runs apart.

``01_tp8_pp1/serving_…_tp8_pp1_sharegpt_qps_04.json`` among the 16 runs of a sweep
becomes ``01_tp8_pp1/tp8_pp1_sharegpt_qps_04``; among the four runs of one folder,
``qps_04``; four run folders holding ``profile_export.jsonl.gz`` are named by their folders.
Folders and file parts shared by every run are dropped; the file names lose the longest
prefix they all share (at a ``_``/``-`` boundary, keeping the name of a bare value:
``qps_04`` rather than ``04``) and their export suffixes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_SUFFIXES = (".gz", ".json", ".jsonl", ".parquet", ".csv", ".arrow", ".ipc", ".log")
_BARE_VALUE = re.compile(r"^(\d+(\.\d+)?|inf)$", re.IGNORECASE)


def _stem(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def _trim_names(names: list[str]) -> list[str]:
    """Drop the prefix every name shares, at a separator boundary."""
    if len(set(names)) <= 1:
        return names
    prefix = os.path.commonprefix(names)  # noqa: RUF071  (file names, by character)
    cuts = [i + 1 for i, ch in enumerate(prefix) if ch in "_-"]
    if not cuts:
        return names
    cut = cuts[-1]
    rests = [n[cut:] for n in names]
    if len(cuts) > 1 and any(_BARE_VALUE.match(r.split("_")[0] or "") for r in rests):
        cut = cuts[-2]  # keep the value's name: qps_04, not 04
    trimmed = [n[cut:] for n in names]
    return trimmed if all(trimmed) and len(set(trimmed)) == len(set(names)) else names


def make_labels(paths: Sequence[Path], extra: Sequence[str | None] | None = None) -> list[str]:
    """One label per run (``extra``: a suffix such as a GuideLLM benchmark index)."""
    extra = list(extra) if extra is not None else [None] * len(paths)
    if len(paths) == 1:
        name = _stem(paths[0].name) or str(paths[0])
        return [name + (f"#{extra[0]}" if extra[0] is not None else "")]
    parts = [list(Path(p).resolve().parts) for p in paths]
    parts = [[*p[:-1], _stem(p[-1])] for p in parts]
    # drop the leading folders every run shares
    while all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        parts = [p[1:] for p in parts]
    depth = max(len(p) for p in parts)
    padded = [[""] * (depth - len(p)) + p for p in parts]
    keep = [i for i in range(depth) if len({p[i] for p in padded}) > 1]
    if not keep:
        keep = [depth - 1]
    columns = {i: [p[i] for p in padded] for i in keep}
    # A column the others already tell apart adds nothing (run folders' fixed file names).
    for i in sorted(keep, reverse=True):
        rest = [j for j in keep if j != i]
        if rest and len({tuple(columns[j][r] for j in rest) for r in range(len(paths))}) == len(
            paths
        ):
            keep = rest
    last = keep[-1]
    groups: dict[tuple[str, ...], list[int]] = {}
    for row in range(len(paths)):
        groups.setdefault(tuple(columns[i][row] for i in keep[:-1]), []).append(row)
    trimmed = list(columns[last])
    for rows in groups.values():  # trim file names within each folder
        for row, name in zip(rows, _trim_names([columns[last][r] for r in rows]), strict=True):
            trimmed[row] = name
    columns[last] = trimmed
    labels = [
        "/".join(columns[i][row] for i in keep if columns[i][row]) for row in range(len(paths))
    ]
    labels = [
        label + (f"#{suffix}" if suffix is not None else "")
        for label, suffix in zip(labels, extra, strict=True)
    ]
    if len(set(labels)) < len(labels):
        seen: dict[str, int] = {}
        unique = []
        for label in labels:
            seen[label] = seen.get(label, 0) + 1
            unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
        labels = unique
    return labels
