"""Per-object check results kept between validations of one source (issue 19).

Standalone mode validates its whole manifest directory at every reload; at 100k Services
each Service's own rules (its request's shape, whether its pool fits it) were most of a
one-Service edit. The directory reader hands the same :class:`KeptChecks` to every
validation: a Service that is the very same object as last time, checked against the very
same pools, Namespaces and unparsed objects (the context), keeps its results. The rules
across Services (IP sharing) still run over all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class KeptChecks:
    """Results by object identity, valid while the context stays the same (the same
    objects, or equal ones)."""

    def __init__(self) -> None:
        self._context: tuple[Sequence[object], ...] | None = None
        self._held: dict[int, tuple[object, Any]] = {}
        self._used: dict[int, tuple[object, Any]] = {}

    def begin(self, *context: Sequence[object]) -> None:
        """Start a validation; results computed in another context are dropped."""
        if self._context is None or not _same(self._context, context):
            self._held = {}
        self._context = context
        self._used = {}

    def get(self, obj: object) -> Any | None:
        hit = self._held.get(id(obj))
        if hit is None or hit[0] is not obj:
            return None
        self._used[id(obj)] = hit
        return hit[1]

    def put(self, obj: object, result: Any) -> None:
        self._used[id(obj)] = (obj, result)

    def end(self) -> None:
        """Keep only what this validation used (objects gone are let go)."""
        self._held, self._used = self._used, {}


def _same(a: tuple[Sequence[object], ...], b: tuple[Sequence[object], ...]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(p is q or p == q for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )
