"""Requests per node over time around a failure, bucketed for the report's charts (pure).

A failover trial probes the Service IP before and after it breaks a node at ``t0``; the
timeline counts, per time bucket (seconds relative to ``t0``), the requests each node
answered and those that failed, from ``before`` seconds ahead of ``t0`` to the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teapot_lb.lab.measure import Attempt


@dataclass(frozen=True)
class Timeline:
    start_s: float  # the first bucket's start, relative to the failure (negative: before)
    bucket_s: float
    served: dict[str, list[int]]  # node -> requests it answered, per bucket
    failed: list[int]  # requests that failed, per bucket

    @property
    def end_s(self) -> float:
        return self.start_s + self.bucket_s * len(self.failed)


def timeline(
    attempts: Sequence[Attempt],
    t0: float,
    *,
    before: float = 0.5,
    buckets: int = 80,
    min_bucket: float = 0.02,
) -> Timeline:
    """The requests started from at most ``before`` seconds ahead of ``t0`` on, in about
    ``buckets`` buckets of equal width (at least ``min_bucket``: a few probes each)."""
    rel = [(a.start - t0, a) for a in attempts if a.start - t0 >= -before]
    # From the first request in the window (probing may start less than `before` ahead).
    start = min((t for t, _ in rel), default=-before)
    span = max((t for t, _ in rel), default=0.0) - start
    width = max(min_bucket, round(span / buckets, 4))
    n = int(span / width) + 1
    served: dict[str, list[int]] = {}
    failed = [0] * n
    for t, a in rel:
        i = min(n - 1, int((t - start) / width))
        if a.node is None:
            failed[i] += 1
        else:
            served.setdefault(a.node, [0] * n)[i] += 1
    return Timeline(start, width, dict(sorted(served.items())), failed)
