"""``servetrace.compare`` and ``servetrace.check`` are packages *and* API functions.

The issue's layout names two packages after two API functions. Python binds a subpackage
as an attribute of its parent once it is imported, so a plain function
``servetrace.compare`` would be replaced by the package the moment anything imports
``servetrace.compare.measure``. Instead those two packages are made callable: calling
the package calls ``servetrace.api.<name>``; ``servetrace.compare.measure`` and
``import servetrace.check.grammar`` keep working as modules.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class CallablePackage(types.ModuleType):
    """A package that, called, runs the library API function of the same name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from servetrace import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


def make_callable(package: str) -> None:
    """Make the (already imported) package ``package`` callable as its API function."""
    sys.modules[package].__class__ = CallablePackage
