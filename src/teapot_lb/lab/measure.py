"""Pure measurement: probe attempts in, percentiles, outages and spreads out.

Times are ``time.monotonic()`` seconds, as recorded by :mod:`teapot_lb.lab.client`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Attempt:
    """One HTTP request from the client: when it started and ended, who answered."""

    start: float
    end: float
    target: str
    node: str | None  # the node name in the reply; None when the request failed
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.node is not None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def failure_reasons(attempts: Iterable[Attempt], since: float) -> dict[str, int]:
    """Failed requests started at or after ``since``, counted by error."""
    counts = Counter(a.error or "failed" for a in attempts if not a.ok and a.start >= since)
    return dict(sorted(counts.items()))


def spread(attempts: Iterable[Attempt]) -> dict[str, int]:
    """Successful requests per answering node (failures under ``"(failed)"``)."""
    counts = Counter(a.node if a.node is not None else "(failed)" for a in attempts)
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class Outage:
    """How the client fared after an event at ``t0``.

    ``recovered_after`` is the time from ``t0`` to the start of the first good request
    after the last bad one (0 when no request was bad); None when the client was not
    served well again before probing stopped. ``bad`` counts bad requests after ``t0``.
    """

    recovered_after: float | None
    bad: int
    failed: int
    total: int


def outage(
    attempts: Sequence[Attempt],
    t0: float,
    *,
    bad: Callable[[Attempt], bool] = lambda a: not a.ok,
    settle: float = 0.5,
) -> Outage:
    """Measure the outage after ``t0``: requests started before ``t0`` are ignored.

    A recovery counts only when it is followed by ``settle`` seconds of good requests
    (so one lucky request during an ECMP outage does not end it).
    """
    after = sorted((a for a in attempts if a.start >= t0), key=lambda a: a.start)
    bad_starts = [a.start for a in after if bad(a)]
    failed = sum(1 for a in after if not a.ok)
    if not bad_starts:
        return Outage(0.0, 0, failed, len(after))
    last_bad = bad_starts[-1]
    good_after = [a for a in after if a.start > last_bad]
    if not good_after or good_after[-1].start - good_after[0].start < settle:
        return Outage(None, len(bad_starts), failed, len(after))
    return Outage(good_after[0].start - t0, len(bad_starts), failed, len(after))


def settled(
    attempts: Sequence[Attempt],
    t0: float,
    *,
    bad: Callable[[Attempt], bool] = lambda a: not a.ok,
    settle: float = 0.5,
) -> bool:
    """True once the requests after ``t0`` end with ``settle`` seconds without a bad one
    (and at least one bad one was seen, or ``settle`` seconds of good ones)."""
    return outage(attempts, t0, bad=bad, settle=settle).recovered_after is not None and (
        _span(attempts, t0) >= settle
    )


def _span(attempts: Sequence[Attempt], t0: float) -> float:
    starts = [a.start for a in attempts if a.start >= t0]
    return max(starts) - min(starts) if starts else 0.0


def first_success(
    attempts: Sequence[Attempt], t0: float, *, accept: Callable[[Attempt], bool] = lambda a: True
) -> float | None:
    """Time from ``t0`` to the end of the first successful request started after it (of
    those ``accept`` takes: a target, another node than the one that failed)."""
    ends = [a.end for a in attempts if a.start >= t0 and a.ok and accept(a)]
    return min(ends) - t0 if ends else None
