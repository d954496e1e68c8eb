"""A test's event loop for a sans-I/O core's timer orders (:mod:`teapot_lb.timers`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from teapot_lb.timers import ArmTimer, CancelTimer


class TimerClock:
    """Carries out ArmTimer/CancelTimer orders on simulated time and, as time advances,
    fires the timers in time order through ``fire(timer, now)``; ``fired`` logs when."""

    def __init__(self, fire: Callable[[Any, float], list[Any]], now: float = 0.0) -> None:
        self.fire = fire
        self.now = now
        self.timers: dict[Hashable, float] = {}
        self.fired: list[tuple[float, Hashable]] = []

    def apply(self, outputs: Iterable[Any]) -> list[Any]:
        outputs = list(outputs)
        for o in outputs:
            if isinstance(o, ArmTimer):
                self.timers[o.timer] = self.now + o.seconds
            elif isinstance(o, CancelTimer):
                self.timers.pop(o.timer, None)
        return outputs

    def next_due(self) -> float | None:
        return min(self.timers.values(), default=None)

    def advance(self, to: float) -> list[Any]:
        """Fire every timer due by ``to``; returns what they produced."""
        out: list[Any] = []
        while (due := self.next_due()) is not None and due <= to + 1e-9:
            timer = min(self.timers, key=self.timers.__getitem__)
            del self.timers[timer]
            self.now = due
            self.fired.append((round(due, 6), timer))
            out += self.apply(self.fire(timer, due))
        self.now = max(self.now, to)
        return out

    def run_out(self) -> list[Any]:
        """Fire timers until none is left."""
        out: list[Any] = []
        while (due := self.next_due()) is not None:
            out += self.advance(due)
        return out
