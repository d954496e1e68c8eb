"""What the translation decides: per object its result (refusals, conditions, notes,
address), and the config with every result."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.config import GatewayConfig
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api import ParentReference
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.tenancy.l7vet import L7Object, L7Refusal


@dataclass(frozen=True)
class Condition:
    """A Gateway API condition (type, status True/False, reason, message)."""

    type: str
    status: bool
    reason: str
    message: str = ""


@dataclass
class ParentResult:
    """A route's result for one of its parentRefs."""

    parent: ParentReference
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class ListenerResult:
    name: str
    attached: int = 0
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class ObjectResult:
    """What the gateway decided about one object: refusals (vetting), and the status
    parts of its kind; `notes`: references that did not resolve, endpoints not served."""

    obj: L7Object
    tenant: str = ""
    refusals: list[L7Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parents: list[ParentResult] = field(default_factory=list)
    listeners: dict[str, ListenerResult] = field(default_factory=dict)
    dropped: list[L7Refusal] = field(default_factory=list)
    """Parts of an accepted object not served (an Ingress rule without host): the rest is."""
    unresolved: list[L7Refusal] = field(default_factory=list)
    """An HTTPRoute's backendRefs that do not resolve (a Service that does not exist, or
    has no such port; another namespace's; not a Service): the route is served, their
    requests answered 500, ResolvedRefs=False with the first one's reason."""
    address: IPAddress | None = None
    """An Ingress's or Gateway's dedicated address (None: the shared addresses)."""

    @property
    def accepted(self) -> bool:
        return not self.refusals

    def problems(self) -> list[tuple[str, str]]:
        """Everything not served as asked, as (reason, text naming the field): the
        refusals, the parts dropped, the parents that did not take a route, the references
        that did not resolve, and the notes (`--check` lines, Events)."""
        out = [
            (r.rule.value, f"{r.field}: {r.message}" if r.field else r.message)
            for r in (*self.refusals, *self.dropped)
        ]
        for pr in self.parents:
            for c in pr.conditions:
                if not c.status:
                    out.append((c.reason, f"parentRefs[{pr.parent.name}]: {c.message}"))
        out += [(r.rule.value, f"{r.field}: {r.message}") for r in self.unresolved]
        out += [("Note", n) for n in self.notes]
        return out


@dataclass(frozen=True)
class PortRefusal:
    """A port of a TenantLoadBalancer the gateway does not serve: the field, the reason
    (CamelCase: the request's `Programmed` reason), and why."""

    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass
class LoadBalancerResult:
    """What the gateway decided about a Gateway-mode TenantLoadBalancer (provider
    `proxy`): the sockets it serves (`address:port/PROTOCOL`), the ports it refused, and
    notes (backend nodes outside the tenant's node networks, none ready)."""

    request: TenantLoadBalancer
    tenant: str = ""
    served: list[str] = field(default_factory=list)
    refusals: list[PortRefusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    backends: int = 0
    """Endpoints (node addresses at nodePorts) of its served ports, all together."""
    addresses: list[IPAddress] = field(default_factory=list)
    """Its assigned addresses at least one of its ports is served on (what is announced
    for it: :mod:`teapot_lb.gateway.control.l7services`)."""


Changed = Mapping[str, Mapping[ObjectRef, ObjectResult]]
"""The results of the namespaces a translation decided again, by namespace."""


class Results(Mapping[ObjectRef, ObjectResult]):
    """Every object's result, read through its namespace's results (each part's own,
    never changed once built): a translation holds these without copying every result,
    and keeps them as they were when a part is built again."""

    def __init__(self, by_namespace: Mapping[str, Mapping[ObjectRef, ObjectResult]]) -> None:
        self._by_namespace = by_namespace
        self._size = sum(map(len, by_namespace.values()))

    def __getitem__(self, ref: ObjectRef) -> ObjectResult:
        return self._by_namespace.get(ref.namespace or "", {})[ref]

    def __iter__(self) -> Iterator[ObjectRef]:
        return chain.from_iterable(self._by_namespace.values())

    def __len__(self) -> int:
        return self._size


@dataclass
class Translation:
    """The config the gateway serves and every object's result."""

    config: GatewayConfig
    results: Mapping[ObjectRef, ObjectResult]
    addresses: tuple[IPAddress, ...]
    changed: Changed = field(default_factory=dict)
    """What changed since the translation before (of the same
    :class:`~teapot_lb.gateway.translation_cache.TranslationCache`; from scratch: since
    none): each namespace translated again with its objects' results now, empty for a
    namespace whose objects are no longer translated (nobody's). The other namespaces'
    results are as they were, so whoever counts results counts these only."""
    load_balancers: dict[ObjectRef, LoadBalancerResult] = field(default_factory=dict)
    """Every Gateway-mode TenantLoadBalancer's result (those of the namespaces in
    :attr:`changed` decided again, the others' as they were)."""
    placed: frozenset[tuple[IPAddress, str]] = frozenset()
    """The dedicated addresses given, with their objects' tenants (what is announced for
    them: :mod:`teapot_lb.gateway.control.l7services`), kept per part, not walked."""


__all__ = [
    "Changed",
    "Condition",
    "ListenerResult",
    "LoadBalancerResult",
    "ObjectResult",
    "ParentResult",
    "PortRefusal",
    "Results",
    "Translation",
]
