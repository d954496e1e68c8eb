"""The simulated network between nodes: latency with jitter, random loss, partitions and
one-way cuts (asymmetric reachability). Seeded: the same seed gives the same run."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Network:
    latency: float = 0.0002  # one way, seconds (a switch on one segment)
    jitter: float = 0.0001  # uniform extra delay, seconds
    loss: float = 0.0  # probability that any datagram is lost
    seed: int = 0
    cut: set[tuple[str, str]] = field(default_factory=set)  # (from, to) pairs that drop all
    lossy: dict[tuple[str, str], float] = field(default_factory=dict)  # (from, to) -> loss
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def delay(self, source: str, destination: str) -> float | None:
        """When a datagram from ``source`` reaches ``destination``, or ``None`` if lost."""
        if (source, destination) in self.cut:
            return None
        r = self._random.random
        loss = self.lossy.get((source, destination), self.loss)
        if loss and r() < loss:
            return None
        return self.latency + self.jitter * r()

    def partition(self, side: Iterable[str], rest: Iterable[str]) -> None:
        """Cut every path between ``side`` and ``rest``, both ways."""
        a, b = list(side), list(rest)
        self.cut |= {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}

    def heal(self) -> None:
        self.cut.clear()
