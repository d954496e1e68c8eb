"""Why a tenant's request or object is refused: the rule it broke (an enum whose value is
the condition's and Event's reason), the field, and what is wrong.

One shape for every vetting: load-balancer requests (:class:`teapot_lb.tenancy.vet.Rule`)
and gateway objects (:class:`teapot_lb.tenancy.l7vet.L7Rule`).
"""

from __future__ import annotations

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
