"""Rules for label selectors wherever they appear."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from teapot_lb.model.common import LabelSelector, ObjectRef, SelectorOperator
from teapot_lb.model.problem import Problem, problem

_NEEDS_VALUES = (SelectorOperator.IN, SelectorOperator.NOT_IN)


def selector_problems(
    ref: ObjectRef, field: str, selectors: Sequence[LabelSelector]
) -> Iterator[Problem]:
    """In/NotIn need values; Exists/DoesNotExist take none (as the API server requires)."""
    for i, selector in enumerate(selectors):
        for j, req in enumerate(selector.match_expressions):
            at = f"{field}[{i}].matchExpressions[{j}]"
            if req.operator in _NEEDS_VALUES and not req.values:
                yield problem(
                    ref, f"{at}.values", f"operator {req.operator} needs at least one value"
                )
            elif req.operator not in _NEEDS_VALUES and req.values:
                yield problem(ref, f"{at}.values", f"operator {req.operator} takes no values")
