"""Exponential backoff with jitter (pure: the random source is an argument)."""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    """Delays ``initial * factor**n``, capped at ``maximum``, each stretched by up to
    ``jitter`` (a fraction) so that many clients failing together do not retry together."""

    def __init__(
        self,
        initial: float = 0.2,
        maximum: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.5,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or jitter < 0:
            raise ValueError("backoff needs 0 < initial <= maximum, factor >= 1, jitter >= 0")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self.failures = 0

    def next(self) -> float:
        """The delay before the next attempt; counts one more failure."""
        base = min(self.maximum, self.initial * self.factor**self.failures)
        self.failures += 1
        return base * (1.0 + self.jitter * self._rand())

    def reset(self) -> None:
        self.failures = 0
