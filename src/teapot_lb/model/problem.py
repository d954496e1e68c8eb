"""Problem: something wrong with an object, said so a user can act on it."""

from __future__ import annotations

from dataclasses import dataclass

from teapot_lb.model.common import ObjectRef

FILE = "File"  # the kind of problems with a whole file (unreadable, not YAML)


@dataclass(frozen=True)
class Problem:
    """Which object, which field (dotted camelCase path, '' for the whole object), and why.

    `related` names other objects the problem involves (the other pool of an overlap);
    `source` says where the object was read from, when it came from a file.
    """

    kind: str
    name: str
    namespace: str | None
    field: str
    message: str
    related: tuple[ObjectRef, ...] = ()
    source: str | None = None

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.namespace, self.name)

    def involves(self, ref: ObjectRef) -> bool:
        return self.ref == ref or ref in self.related

    def __str__(self) -> str:
        if self.kind == FILE:
            return f"{self.name}: {self.message}"
        where = f"{self.ref}: {self.field}: " if self.field else f"{self.ref}: "
        return where + self.message + (f"  [{self.source}]" if self.source else "")


def problem(ref: ObjectRef, field: str, message: str, *related: ObjectRef) -> Problem:
    """Shorthand: a Problem about the object `ref`."""
    return Problem(ref.kind, ref.name, ref.namespace, field, message, tuple(related))
