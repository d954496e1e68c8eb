"""Waiting on conditions with deadlines (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], object], within: float = 10.0, what: str = "") -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() >= deadline:
            raise AssertionError(f"not true within {within}s: {what or predicate}")
        await asyncio.sleep(0.01)
