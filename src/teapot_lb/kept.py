"""Results kept by object identity from one pass over many objects to the next (issue 19).

Standalone mode reads its whole manifest directory at every reload; at 100k Services the
per-object work (stamping creation times, giving each Service its assigned status,
checking each Service's own rules) was most of a one-Service edit. The reader keeps the
objects of unchanged files, so the same object comes again: a :class:`Kept` hands back
what was made from it last time, and drops what no pass asked for (objects gone).

A result may also depend on a context (the pools a Service is checked against): when the
context of a pass differs from the last one's (other objects, and not equal ones), every
result is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")


class Kept(Generic[T]):
    """Results by object identity, from the last pass, while the context stays the same.

    One pass: :meth:`begin`, then :meth:`get` (and :meth:`put` for what was not found)
    per object, then :meth:`end`."""

    def __init__(self) -> None:
        self._context: tuple[Sequence[object], ...] | None = None
        # Results by id of their object, and the objects themselves (kept alive, so that
        # an id is never another object's while its result is held): a pair per object
        # weighed more than its dict entry (100k Services).
        self._held: dict[int, T] = {}
        self._objects: list[object] = []
        self._used: dict[int, T] = {}
        self._using: list[object] = []

    def begin(self, *context: Sequence[object]) -> None:
        """Start a pass; results of another context are dropped."""
        if self._context is None or not _same(self._context, context):
            self._held, self._objects = {}, []
        self._context = context
        self._used, self._using = {}, []

    def get(self, obj: object) -> T | None:
        """What was kept for this very object (None: nothing)."""
        hit = self._held.get(id(obj))
        if hit is not None and id(obj) not in self._used:
            self._used[id(obj)] = hit
            self._using.append(obj)
        return hit

    def put(self, obj: object, result: T) -> None:
        if id(obj) not in self._used:
            self._using.append(obj)
        self._used[id(obj)] = result

    def end(self) -> None:
        """Keep only what this pass used (objects gone are let go)."""
        self._held, self._objects = self._used, self._using
        self._used, self._using = {}, []


def _same(a: tuple[Sequence[object], ...], b: tuple[Sequence[object], ...]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(p is q or p == q for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


def by_name(
    objects: Mapping[str, K], known: dict[str, tuple[K, T]], make: Callable[[K], T]
) -> dict[str, T]:
    """`make(obj)` for each object by name, kept in `known` (by the caller, between calls)
    while the name holds the very same object: a pass makes only those that changed
    (each Node's addresses, at 1,000 Nodes per speaker step). Names gone are let go."""
    out: dict[str, T] = {}
    for name, obj in objects.items():
        hit = known.get(name)
        if hit is None or hit[0] is not obj:
            hit = known[name] = (obj, make(obj))
        out[name] = hit[1]
    for gone in known.keys() - out.keys():
        del known[gone]
    return out
