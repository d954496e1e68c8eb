"""Why a tenant's request or object is refused: the rule it broke (an enum whose value is
the condition's and Event's reason), the field, and what is wrong.

One shape for every vetting: load-balancer requests (:class:`teapot_lb.tenancy.vet.Rule`)
and gateway objects (:class:`teapot_lb.tenancy.l7vet.L7Rule`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from teapot_lb.model.common import ObjectRef
from teapot_lb.model.problem import Problem, problem

RuleT = TypeVar("RuleT", bound=StrEnum)


@dataclass(frozen=True)
class Refusal(Generic[RuleT]):
    """Why something is refused: the rule, the field, and what is wrong."""

    rule: RuleT
    field: str
    message: str

    def problem(self, ref: ObjectRef) -> Problem:
        """The refusal as a problem of `ref` (webhook, validation): the rule in brackets."""
        return problem(ref, self.field, f"{self.message} [{self.rule}]")

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


# How the API server words an admission webhook's denial (k8s.io/apiserver webhookerrors).
_DENIED = "denied the request: "
# One problem of our webhook's denial: `Kind/ns/name: field: message [Rule]`, `; `-joined.
_RULED = re.compile(r"(.+?) \[([A-Za-z]+)\](?:; |$)")
_REF = re.compile(r"^[A-Za-z]+/[^:\s]+: ")


def refusal_of_denial(code: int, message: str, invalid: str) -> tuple[str, str] | None:
    """(reason, message) when the API server refused to store an object because of what it
    says: an admission webhook's denial (ours: the first rule broken, and the same
    `field: message` text the vetting gives where the object exists) or a 400 / 422 (the
    schema; reason `invalid`). None for any other failure (unreachable, RBAC, a conflict),
    which is retried."""
    if _DENIED in message:
        text = message.split(_DENIED, 1)[1]
    elif code in (400, 422):
        text = message
    else:
        return None
    parts = _RULED.findall(text)
    if parts and sum(len(p) + len(r) + 5 for p, r in parts) - 2 == len(text):
        return parts[0][1], "; ".join(_REF.sub("", p) for p, _ in parts)
    return invalid, text
