"""Translation proportional to the change: the config kept as one part per tenant
(:class:`~teapot_lb.gateway.translate.Part`), and a change re-vets and rebuilds only the
tenants it touches.

A tenant's part reads its own namespace only (its objects, their slices and Secrets, its
Gateway-mode TenantLoadBalancers), except for these, each followed here:

- vetting's hostname and exclusive-port claims (the oldest object keeps a name, whatever
  the tenant): an index of who claims what, and a tenant is vetted against its own
  objects plus, per name or port it claims, the oldest claimant of another tenant (all
  :func:`~teapot_lb.tenancy.l7vet.vet_object` reads of the others). When an object's
  claims change, every tenant claiming one of those names or ports is vetted again;
- dedicated addresses (:func:`~teapot_lb.tenancy.l7address.assign` takes every tenant's
  requests, oldest first): decided again at every translation from the requests kept
  (few), and a tenant whose own addresses or refusals changed is rebuilt;
- the Tenants, the gateway's addresses and the certificate check: when they change,
  everything is translated again;
- the AddressPools (a request is served inside its tenant's allocation): when they
  change, every tenant with requests is built again.

The merge (:class:`~teapot_lb.gateway.translate.Merged`) is kept too: a part built again
replaces that part's pieces only. It joins the parts in namespace order, as
:func:`~teapot_lb.gateway.translate.translate` does: the result is exactly what that gives
from scratch (property-tested).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.translate import (
    Merged,
    ObjectResult,
    Part,
    Translation,
    Vetted,
    build_part,
    by_namespace,
    dedicated_wanted,
    object_order,
    tenant_namespaces,
    vet_tenant,
    with_endpoints,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.common import ObjectRef, creation_order
from teapot_lb.model.gateway_api import Gateway
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.l7address import AddressRefusal, assign
from teapot_lb.tenancy.l7cert import certificate_problem
from teapot_lb.tenancy.l7vet import (
    CertificateCheck,
    L7Object,
    L7World,
    claimed_hostnames,
    exclusive_ports,
    served_here,
)

Claim = str | tuple[int, str]
"""A hostname, or an exclusive (port, protocol)."""

Secrets = Mapping[str, Mapping[str, bytes]]
CreationOrder = tuple[datetime, str, str]


def claims_of(obj: L7Object) -> set[Claim]:
    """The hostnames and exclusive ports `obj` asks for (what vetting's claims index holds)."""
    out: set[Claim] = {host for _, host in claimed_hostnames(obj) if host}
    if isinstance(obj, Gateway):
        out.update(exclusive_ports(obj))
    return out


@dataclass
class _Namespace:
    """One namespace's inputs as last put, and what was made of them."""

    objects: tuple[L7Object, ...] = ()
    requests: tuple[TenantLoadBalancer, ...] = ()
    slices: tuple[KubeObject, ...] = ()
    secrets: Secrets = field(default_factory=dict)
    ordered: tuple[L7Object, ...] = ()
    claims: set[Claim] = field(default_factory=set)
    vetted: tuple[Vetted, ...] = ()
    dedicated: tuple[dict[ObjectRef, IPAddress], dict[ObjectRef, AddressRefusal]] = (
        {},
        {},
    )
    part: Part | None = None


@dataclass(frozen=True)
class _Globals:
    tenants: tuple[Tenant, ...]
    addresses: tuple[IPAddress, ...]
    check_certificate: CertificateCheck
    secrets_known: bool


class TranslationCache:
    """The last translation, kept per tenant. Feed it with :meth:`put` (a namespace's
    objects, slices and Secrets, only when they may have changed: unchanged input costs a
    comparison) and :meth:`translation`; or :meth:`translate`, which takes the whole world
    as :func:`~teapot_lb.gateway.translate.translate` does and finds what changed."""

    def __init__(self) -> None:
        self._globals: _Globals | None = None
        self._clear()
        self._dropped: set[str] = set()
        """Namespaces whose part a reset dropped since the last :meth:`translation`."""

    def _clear(self) -> None:
        self._owners: dict[str, Tenant | None] = {}
        self._spaces: dict[str, _Namespace] = {}
        self._claims: dict[Claim, dict[ObjectRef, tuple[CreationOrder, str, L7Object]]] = {}
        self._asking: dict[str, tuple[Vetted, ...]] = {}
        """Per namespace its objects asking for a dedicated address (or holding one)."""
        self._stale: set[str] = set()
        """Namespaces to vet and build again."""
        self._unbuilt: set[str] = set()
        """Namespaces to build again (their endpoints changed)."""
        self._merged = Merged(self._globals.addresses if self._globals else ())
        self._pools: Mapping[str, AddressPool] = {}
        self.rebuilt: set[str] = set()
        """The namespaces whose part the last :meth:`translation` built again."""
        self.vetted: set[str] = set()
        """The namespaces the last :meth:`translation` vetted again."""
        self.endpoints_only: set[str] = set()
        """Of :attr:`rebuilt`, those whose backends alone were built again (only their
        endpoints changed, and nothing else with them)."""

    # ------------------------------------------------------------------ input

    def reset(
        self,
        tenants: Sequence[Tenant],
        addresses: Sequence[IPAddress],
        *,
        check_certificate: CertificateCheck = certificate_problem,
        secrets_known: bool = True,
    ) -> bool:
        """Set what every part reads; True when that changed and everything was dropped
        (every namespace must be put again)."""
        now = _Globals(tuple(tenants), tuple(addresses), check_certificate, secrets_known)
        if self._globals is not None and self._globals == now:
            return False
        self._dropped |= set(self._merged.namespaces)
        self._globals = now
        self._clear()
        self._owners = tenant_namespaces(now.tenants)
        return True

    def put(
        self,
        namespace: str,
        objects: Iterable[L7Object],
        slices: Iterable[KubeObject],
        secrets: Secrets,
        requests: Iterable[TenantLoadBalancer] = (),
    ) -> None:
        """A namespace's objects now (any order; those the gateway serves are kept), its
        mirrored EndpointSlices and Secrets (by `namespace/name`), and its
        TenantLoadBalancers (any order: a change of one builds the part again, as an
        object's does)."""
        if namespace not in self._owners:
            return  # nobody's namespace: not the gateway's
        held = self._spaces.setdefault(namespace, _Namespace())
        objs, eps = tuple(o for o in objects if served_here(o)), tuple(slices)
        reqs = tuple(sorted(requests, key=creation_order))
        if held.objects == objs and held.secrets == secrets and held.requests == reqs:
            if held.slices != eps:  # endpoints: built again, not vetted
                held.slices = eps
                self._unbuilt.add(namespace)
            return
        self._stale.add(namespace)
        held.slices, held.secrets, held.requests = eps, dict(secrets), reqs
        if held.objects == objs:
            return
        held.objects = objs
        held.ordered = tuple(sorted(objs, key=object_order))
        touched = set(held.claims)
        for claim in held.claims:
            entries = self._claims[claim]
            for obj in [o for _, ns, o in entries.values() if ns == namespace]:
                del entries[obj.ref]
            if not entries:
                del self._claims[claim]
        held.claims = set()
        for obj in held.ordered:
            for claim in claims_of(obj):
                self._claims.setdefault(claim, {})[obj.ref] = (creation_order(obj), namespace, obj)
                held.claims.add(claim)
        touched |= held.claims
        # Whoever claims one of these may win or lose it now: vetted again.
        for claim in touched:
            self._stale.update(ns for _, ns, _ in self._claims.get(claim, {}).values())

    # ------------------------------------------------------------------ output

    def translation(
        self,
        pools: Mapping[str, AddressPool] | None = None,
        held: Mapping[str, frozenset[IPAddress]] | None = None,
    ) -> Translation:
        """The translation of everything put (`pools`, `held`: as in
        :class:`~teapot_lb.tenancy.l7vet.L7World`, read at every call)."""
        assert self._globals is not None, "reset() first"
        addresses = self._globals.addresses
        pools = pools or {}
        if pools != self._pools:  # requests are served inside their tenant's allocation
            self._pools = pools
            self._stale.update(ns for ns, space in self._spaces.items() if space.requests)
        self.vetted = {ns for ns in self._stale if self._owners.get(ns) is not None}
        for namespace in self.vetted:
            space = self._spaces[namespace]
            owner = self._owners[namespace]
            assert owner is not None
            space.vetted = vet_tenant(space.ordered, owner, self._world_of(namespace))
            asking = tuple(v for v in space.vetted if v.want)
            if asking or space.dedicated != ({}, {}):
                self._asking[namespace] = asking
        for namespace in self._stale - self.vetted:
            self._spaces[namespace].vetted = ()  # nobody's (several Tenants claim it)
            if self._spaces[namespace].dedicated != ({}, {}):
                self._asking[namespace] = ()
        self._stale.clear()
        wanted = dedicated_wanted(chain.from_iterable(self._asking.values()))
        dedicated = assign(wanted, pools, held or {}, addresses)
        whole = set(self.vetted)
        endpoints = {ns for ns in self._unbuilt if self._owners.get(ns) is not None} - whole
        self._unbuilt.clear()
        for namespace, asking in list(self._asking.items()):
            space = self._spaces[namespace]
            refs = [v.obj.ref for v in asking]
            if not refs:
                del self._asking[namespace]
            mine = (
                {r: a for r in refs if (a := dedicated.addresses.get(r)) is not None},
                {r: x for r in refs if (x := dedicated.refused.get(r)) is not None},
            )
            if mine != space.dedicated:
                space.dedicated = mine
                if self._owners.get(namespace) is not None:
                    whole.add(namespace)
        rebuild = whole | endpoints
        self.endpoints_only = set()
        for namespace in rebuild:
            space = self._spaces[namespace]
            # Its endpoints alone changed: its backends of those slices built again, if
            # that is all that changes (else the whole part).
            if namespace not in whole and space.part is not None:
                part = with_endpoints(space.part, space.slices)
                if part is not None:
                    space.part = part
                    self.endpoints_only.add(namespace)
                    continue
            space.part = build_part(
                space.vetted, dedicated, space.secrets, space.slices, addresses,
                space.requests, self._owners.get(namespace), pools,
            )  # fmt: skip
        for namespace in rebuild:
            part = self._spaces[namespace].part
            kept = part is not None and bool(part.results or part.listeners or part.load_balancers)
            self._merged.put(namespace, part if kept else None)
        self.rebuilt = rebuild
        # Decided again: the rebuilt namespaces, and those a reset dropped (no results now
        # unless rebuilt: nobody's, or no longer given).
        changed = {ns: self.results_of(ns) for ns in sorted(rebuild | self._dropped)}
        self._dropped = set()
        return self._merged.translation(changed)

    def results_of(self, namespace: str) -> Mapping[ObjectRef, ObjectResult]:
        """The last translation's results of a namespace's objects."""
        space = self._spaces.get(namespace)
        return space.part.results if space is not None and space.part is not None else {}

    def translate(
        self,
        world: L7World,
        slices: Iterable[KubeObject],
        addresses: Sequence[IPAddress],
        requests: Iterable[TenantLoadBalancer] = (),
    ) -> Translation:
        """The same as :func:`~teapot_lb.gateway.translate.translate`, from what is kept:
        every namespace is compared, the changed ones translated again."""
        self.reset(
            world.tenants,
            addresses,
            check_certificate=world.check_certificate,
            secrets_known=world.secrets is not None,
        )
        inputs = by_namespace(world, slices, ordered=False)
        by_ns: dict[str, list[TenantLoadBalancer]] = {}
        for request in requests:
            by_ns.setdefault(request.namespace, []).append(request)
        for namespace in [ns for ns in self._spaces if ns not in inputs and ns not in by_ns]:
            self.put(namespace, (), (), {})
        for namespace in {*inputs, *by_ns}:
            objects, eps, secrets = inputs.get(namespace, ([], [], {}))
            self.put(namespace, objects, eps, secrets, by_ns.get(namespace, ()))
        return self.translation(world.pools, world.held)

    # ------------------------------------------------------------------ internals

    def _world_of(self, namespace: str) -> L7World:
        """What vetting a namespace's objects reads: its objects, and per name or port they
        claim the oldest claimant of another namespace (with its Tenants)."""
        assert self._globals is not None
        space = self._spaces[namespace]
        rivals: dict[ObjectRef, L7Object] = {}
        for claim in space.claims:
            others = [e for e in self._claims[claim].values() if e[1] != namespace]
            if others:
                oldest = min(others, key=lambda e: e[0])
                rivals[oldest[2].ref] = oldest[2]
        spaces = {namespace, *(o.metadata.namespace for o in rivals.values())}
        return L7World(
            [t for t in self._globals.tenants if t.spec.namespace in spaces],
            list(chain(space.ordered, rivals.values())),
            space.secrets if self._globals.secrets_known else None,
            check_certificate=self._globals.check_certificate,
        )


__all__ = ["Claim", "TranslationCache", "claims_of"]
