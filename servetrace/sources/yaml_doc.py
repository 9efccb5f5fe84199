"""YAML documents (BLIS trace headers, llm-d benchmark reports), read with PyYAML's safe
loader: the one place servetrace parses YAML, with errors naming the file and the line.

PyYAML is an optional dependency (``servetrace[yaml]``); without it a YAML input is one
line saying how to install it, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources.reading import read_text

YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml_name(path: Path) -> bool:
    """True when the name says YAML (``.yaml``, ``.yml``, also with ``.gz``)."""
    name = path.name.lower().removesuffix(".gz")
    return name.endswith(YAML_SUFFIXES)


def load_yaml(path: Path, what: str) -> Any:
    """The document in ``path`` (gzip allowed); ``what`` names it in errors."""
    try:
        import yaml
    except ImportError:
        raise InputError(
            f"{path}: reading {what} (YAML) needs PyYAML",
            hint="pip install 'servetrace[yaml]'",
        ) from None
    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(f"{path}: not valid YAML{at}: {problem}; expected {what}") from None
