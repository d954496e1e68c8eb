"""Waiting on a condition with a deadline: the one polling loop of the lab and the tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class LabTimeout(AssertionError):
    """A condition the lab (or a test) waited for did not come true before the deadline.

    An ``AssertionError``, so a test that times out fails (it does not error), and the lab
    reports it as the scenario's failure."""


def wait_for(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    every: float = 0.02,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``check`` until it returns something truthy and return that; raise
    :class:`LabTimeout` after ``timeout`` seconds (with ``detail()`` appended, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"; last={value!r}" + (f"\n{detail()}" if detail is not None else "")
            raise LabTimeout(f"timed out after {timeout:g} s waiting for {what}{extra}")
        time.sleep(every)


async def wait_for_async(
    check: Callable[[], T | None], *, within: float, what: str, every: float = 0.01
) -> T:
    """:func:`wait_for` for a test that runs an event loop: the loop keeps running (the
    condition usually changes in its callbacks) while ``check`` is polled, for at most
    ``within`` seconds."""
    value: T | None = None
    try:
        async with asyncio.timeout(within):
            while True:
                value = check()
                if value:
                    return value
                await asyncio.sleep(every)
    except TimeoutError:
        raise LabTimeout(
            f"timed out after {within:g} s waiting for {what}; last={value!r}"
        ) from None
