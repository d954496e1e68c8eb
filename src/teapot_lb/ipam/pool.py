"""Address pools as the IPAM sees them, and who may draw from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from teapot_lb.addresses import AddressRange as AddressRange
from teapot_lb.ipam.request import IPFamily, ServiceRequest


class LabelMatcher(Protocol):
    """A label selector (matchLabels / matchExpressions), evaluated elsewhere."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...


@dataclass(frozen=True, slots=True)
class Pool:
    """One address pool: its ranges and the scope of Services that may draw from it.

    `priority`: lower number first; unset comes after every set priority. Ties go by name.
    An empty `namespaces` and empty `namespace_selectors` admit every namespace; otherwise a
    namespace is admitted when it is listed or matches any selector. An empty
    `service_selectors` admits every Service; otherwise one must match the Service's labels.
    """

    name: str
    ranges: tuple[AddressRange, ...]
    auto_assign: bool = True
    avoid_buggy_ips: bool = False
    namespaces: frozenset[str] = frozenset()
    namespace_selectors: tuple[LabelMatcher, ...] = ()
    service_selectors: tuple[LabelMatcher, ...] = ()
    priority: int | None = None

    def __post_init__(self) -> None:
        for first, last in self.ranges:
            # Invalid pools are rejected by validation before they get here; this is a guard.
            if first.version != last.version or int(first) > int(last):
                raise ValueError(f"pool {self.name}: bad range {first}-{last}")

    @property
    def order(self) -> tuple[bool, int, str]:
        """Sort key for pool choice: set priorities first, lower first, then name."""
        return (self.priority is None, self.priority or 0, self.name)

    def families(self) -> frozenset[IPFamily]:
        return frozenset(IPFamily.of(first) for first, _ in self.ranges)

    def scope_refusal(self, request: ServiceRequest) -> str | None:
        """Why `request` may not draw from this pool, or None when it may."""
        if self.namespaces or self.namespace_selectors:
            admitted = request.namespace in self.namespaces or any(
                s.matches(request.namespace_labels) for s in self.namespace_selectors
            )
            if not admitted:
                return f"pool {self.name} does not admit namespace {request.namespace}"
        if self.service_selectors and not any(
            s.matches(request.labels) for s in self.service_selectors
        ):
            return f"pool {self.name}: no serviceSelector matches the labels of {request.key}"
        return None
