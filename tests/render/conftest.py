"""Fixtures of the render tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.render.browser import launch_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (skipped where Playwright or Chromium is missing)."""
    yield from launch_browser()
