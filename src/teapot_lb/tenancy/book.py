"""The manager's decisions (pure): one allocator per tenant, and for one request its
status, its Event and its wanted routes.

`TenantBook.decide(view, key, now)` is the whole reconcile of a TenantLoadBalancer: vet it
(:mod:`.vet`), allocate from its tenant's slice of the pools (:mod:`.allocation`), and
compute the routes route mode wants (:mod:`.routes`). The Kubernetes adapter
(:mod:`.kube_manager`) and standalone mode only read objects and write what it returns.

State is only what requests hold (their IPs, in their status); :meth:`TenantBook.rebuild`
takes it back from the requests after a restart or a change of leader. The tenants'
dedicated gateway addresses (:mod:`.l7address`, in the view as the gateway announces
them) are held too, under keys of their own: no request is given one, and they count in
the tenant's `quotas.addresses`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, NamedTuple

from teapot_lb import ipam
from teapot_lb.addresses import IPAddress, IPFamily, parse_ip
from teapot_lb.model.common import Condition, ConditionStatus, dump
from teapot_lb.model.event import Event, EventType
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.tenancy import (
    ACCEPTED,
    PROGRAMMED,
    PROGRAMMED_FOR_TENANT,
    PROVIDER_OF_MODE,
    PROXY_PROVIDER,
    REASON_ACCEPTED,
    REASON_DEGRADED,
    REASON_NO_READY_BACKENDS,
    REASON_NOT_ACCEPTED,
    REASON_NOT_ANNOUNCED,
    REASON_PENDING,
    REASON_PROGRAMMED,
    ROUTE_PROVIDER,
    Tenant,
    TenantLoadBalancer,
    TenantLoadBalancerStatus,
    TenantStatus,
    TenantUsage,
)
from teapot_lb.tenancy.allocation import request_of, tenant_pools
from teapot_lb.tenancy.routes import TenantRoute, wanted_routes
from teapot_lb.tenancy.vet import NamespaceOwners, Refusal, Rule, Usage, vet


@dataclass(frozen=True)
class ManagementView:
    """What the manager reads: Tenants by name, requests by namespace/name, AddressPools
    (of its configuration namespace) by name, and the problems of requests that do not
    parse (by key)."""

    tenants: Mapping[str, Tenant] = field(default_factory=dict)
    requests: Mapping[str, TenantLoadBalancer] = field(default_factory=dict)
    pools: Mapping[str, AddressPool] = field(default_factory=dict)
    unparsed: Mapping[str, list[Problem]] = field(default_factory=dict)
    gateway_addresses: Mapping[str, frozenset[IPAddress]] = field(default_factory=dict)
    """Per Tenant name, its dedicated gateway addresses."""
    owners: NamespaceOwners | None = None
    """The Tenants by namespace, kept by whoever keeps `tenants` (the manager, as they
    change); None: indexed from `tenants` at the first question."""

    def tenant_of(self, namespace: str) -> Tenant | Refusal[Rule]:
        """The one Tenant whose namespace this is (:func:`~.vet.tenant_of`), by lookup."""
        return self._owners.of(namespace)

    @cached_property
    def _owners(self) -> NamespaceOwners:
        return self.owners if self.owners is not None else NamespaceOwners(self.tenants.values())


_GATEWAY = ":gateway"  # the namespace of a dedicated gateway address's key (no real one)


ProviderVet = Callable[[TenantLoadBalancer, Tenant, str], list[Refusal[Rule]]]
"""Why the named provider will not build the request (it does not run here, or its own
`refuse`): given by the manager, which knows the providers (a layer above this one)."""


class Programmed(NamedTuple):
    """A request's `Programmed` condition as decided, what its tenant is told of it, and
    the operator's detail.

    The request lives in the tenant's namespace, which the tenant's agent reads (and
    Kubernetes RBAC cannot hide a field): its conditions and Events carry only words that
    are safe for the tenant; the operator's detail goes where no agent reads
    (:attr:`Outcome.operator_event`)."""

    ok: bool
    reason: str
    message: str
    """The condition's message, read by the tenant too: its own addresses, nodes, ports."""
    told: str | None = None
    """The tenant's words (the condition ProgrammedForTenant, relayed to its Service by
    the agent): None, nothing to tell."""
    detail: str | None = None
    """The operator's words where they say more than `message` (a provider's endpoint,
    object ids, error text; an AddressPool; the IPAM's message): never on the request."""


ProviderProgress = Callable[[str, TenantLoadBalancer, str], Programmed | None]
"""An external provider's word on a request it builds, None before its first."""


def _kept(request: TenantLoadBalancer, ips: Iterable[IPAddress]) -> Programmed | None:
    """The request's `Programmed` as it stands, while its provider has not answered in this
    process yet (a restarted manager): kept when it was decided for this very generation
    of the request and these addresses, so a restart does not flap it to Pending (and
    write a status) for a load balancer that is built."""
    status = request.status
    if status is None or status.addresses != [str(ip) for ip in ips]:
        return None
    generation = request.metadata.generation
    found = {c.type: c for c in status.conditions}
    now = found.get(PROGRAMMED)
    if now is None or generation is None or now.observed_generation != generation:
        return None
    told = found.get(PROGRAMMED_FOR_TENANT)
    return Programmed(
        now.status is ConditionStatus.TRUE,
        now.reason,
        now.message,
        told.message if told is not None else None,
    )


def builtin_providers_only(
    request: TenantLoadBalancer, tenant: Tenant, provider: str
) -> list[Refusal[Rule]]:
    """The vetting of a book with no external providers (standalone mode)."""
    if provider in PROVIDER_OF_MODE.values():
        return []
    return [unavailable(provider, sorted(PROVIDER_OF_MODE.values()))]


def unavailable(provider: str, running: Iterable[str]) -> Refusal[Rule]:
    return Refusal(
        Rule.PROVIDER_UNAVAILABLE,
        "spec.provider",
        f"provider {provider} does not run in this manager (running: {', '.join(running)}); "
        "the operator adds it with teapot-lb manager --provider",
    )


@dataclass(frozen=True)
class Outcome:
    """The decision for one request: its complete desired `status` (None: the request is
    gone), an Event to record on it, its tenant (None when it has none) and its routes.

    `operator_event`: the same change in the operator's words (:attr:`Programmed.detail`,
    prefixed with the request's key), for an object no agent reads (the manager records
    it on the cluster-scoped Tenant); None when `event` says it all. Both come with a
    change of the status, so a restarted manager, whose decisions equal the statuses
    written, records neither again."""

    key: str
    status: dict[str, Any] | None
    event: Event | None = None
    tenant: str | None = None
    routes: tuple[TenantRoute, ...] = ()
    refusals: tuple[Refusal[Rule], ...] = ()
    operator_event: Event | None = None


def condition(
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    previous: Iterable[Condition],
    now: datetime,
    generation: int | None,
) -> Condition:
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    old = next((c for c in previous if c.type == kind), None)
    since = old.last_transition_time if old is not None and old.status is status else now
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message[:32768],
        last_transition_time=since,
        observed_generation=generation,
    )


class _RoutesByRequest(MutableMapping[str, tuple[TenantRoute, ...]]):
    """The routes each request wants, with their total kept as they change (the routes
    gauge is set after every decision: counting them all each time cost O(requests))."""

    def __init__(self) -> None:
        self._routes: dict[str, tuple[TenantRoute, ...]] = {}
        self.count = 0

    def __getitem__(self, key: str) -> tuple[TenantRoute, ...]:
        return self._routes[key]

    def __setitem__(self, key: str, routes: tuple[TenantRoute, ...]) -> None:
        self.count += len(routes) - len(self._routes.get(key, ()))
        self._routes[key] = routes

    def __delitem__(self, key: str) -> None:
        self.count -= len(self._routes.pop(key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)


class TenantBook:
    """One IPAM allocator per tenant over its allocation, and what each request holds."""

    def __init__(
        self,
        vet_provider: ProviderVet = builtin_providers_only,
        progress: ProviderProgress | None = None,
    ) -> None:
        self._vet_provider = vet_provider
        self._progress = progress
        self._reset()

    def _reset(self) -> None:
        self._allocators: dict[str, ipam.Allocator] = {}
        self._configs: dict[str, tuple[ipam.Pool, ...]] = {}
        self._owner: dict[str, str] = {}  # request key -> tenant holding it
        self._held: dict[str, set[str]] = {}  # tenant -> request keys it holds
        self._ports: dict[str, int] = {}
        self._sharing: dict[str, str | None] = {}
        self._routes = _RoutesByRequest()
        self._gateway: dict[str, tuple[str, IPAddress]] = {}  # key -> (tenant, address)
        # What usage counts, kept as holdings change (usage is asked at every decision:
        # a walk of the tenant's requests made a request cost O(the tenant's requests)).
        self._counted: dict[str, tuple[str, tuple[IPAddress, ...]]] = {}  # key -> its IPs
        self._ip_refs: dict[str, Counter[IPAddress]] = {}  # tenant -> IPs, by holders
        self._port_total: dict[str, int] = {}
        # The gateway addresses reserve settled, all held (None: work may be left).
        self._reserved: Mapping[str, frozenset[IPAddress]] | None = None

    # ------------------------------------------------------------------ state

    def sync(self, view: ManagementView) -> list[str]:
        """Follow the Tenants' allocations (and their pools); returns the requests whose
        IPs changed or whose tenant is gone, to reconcile again."""
        requeue: list[str] = []
        for name in list(self._allocators):
            if name not in view.tenants:
                requeue += self._drop_tenant(name)
        for name, tenant in view.tenants.items():
            pools = tuple(tenant_pools(tenant, view.pools))
            allocator = self._allocators.get(name)
            if allocator is None:
                self._allocators[name] = ipam.Allocator(pools)
            elif self._configs.get(name) != pools:
                requeue += [change.key for change in allocator.reconfigure(pools)]
                self._recount(name)
            self._configs[name] = pools
        self._reserved = None  # allocators came, went or moved what they hold
        self.reserve(view)
        return [k for k in requeue if k not in self._gateway]

    def reserve(self, view: ManagementView) -> None:
        """Hold the tenants' dedicated gateway addresses (and let go of those gone). One a
        request holds already stays the request's: the gateway gives that one up.

        Asked at every decision, it does nothing while the view's addresses are the ones
        it last held all of (and no allocator changed since)."""
        if view.gateway_addresses is self._reserved:
            return
        wanted = {
            f"{_GATEWAY}/{tenant}/{ip}": (tenant, ip)
            for tenant, ips in view.gateway_addresses.items()
            if tenant in self._allocators
            for ip in ips
        }
        for key, (tenant, _) in list(self._gateway.items()):
            allocator = self._allocators.get(tenant)
            if key not in wanted or allocator is None or allocator.assignment(key) is None:
                if allocator is not None:
                    allocator.release(key)
                del self._gateway[key]
                self._uncount(key)
        for key, (tenant, ip) in wanted.items():
            if key in self._gateway:
                continue
            request = ipam.ServiceRequest(
                namespace=_GATEWAY,
                name=f"{tenant}/{ip}",
                ip_families=(IPFamily.of(ip),),
                requested_ips=(ip,),
                key=key,
            )
            if isinstance(self._allocators[tenant].assign(request), ipam.Assigned):
                self._gateway[key] = (tenant, ip)
                self._count(key, tenant, (ip,))
        # One still held by a request is tried again at the next decision.
        settled = all(key in self._gateway for key in wanted)
        self._reserved = view.gateway_addresses if settled else None

    def rebuild(self, view: ManagementView) -> None:
        """Forget everything and take it from the requests' statuses (on taking the lease),
        so no new request is handed an IP an existing one holds."""
        self._reset()
        self.sync(view)
        by_tenant: dict[str, list[ipam.Holding]] = {}
        for key, request in sorted(view.requests.items()):
            owner = view.tenant_of(request.namespace)
            held = request.status.addresses if request.status else []
            if isinstance(owner, Refusal) or not held:
                continue
            try:
                ips = tuple(parse_ip(ip) for ip in held)
            except ValueError:
                continue
            by_tenant.setdefault(owner.name, []).append(ipam.Holding(request_of(request), ips))
            self._hold(key, owner.name, request)
        for name, holdings in by_tenant.items():
            self._allocators[name].rebuild(holdings)
        self._gateway, self._reserved = {}, None
        self.reserve(view)
        for key in [k for k, t in self._owner.items() if self._allocators[t].assignment(k) is None]:
            self._forget(key)
        self._counted, self._ip_refs = {}, {}
        for name in self._allocators:
            self._recount(name)

    def _hold(self, key: str, tenant: str, request: TenantLoadBalancer) -> None:
        self._forget(key)
        self._owner[key] = tenant
        self._held.setdefault(tenant, set()).add(key)
        self._ports[key] = len(request.spec.ports)
        self._port_total[tenant] = self._port_total.get(tenant, 0) + len(request.spec.ports)
        self._sharing[key] = request.spec.sharing_key
        allocator = self._allocators.get(tenant)
        assignment = allocator.assignment(key) if allocator is not None else None
        self._count(key, tenant, assignment.ips if assignment is not None else ())

    def _forget(self, key: str) -> None:
        tenant = self._owner.pop(key, None)
        if tenant is not None:
            self._held.get(tenant, set()).discard(key)
            self._port_total[tenant] -= self._ports.get(key, 0)
        self._ports.pop(key, None)
        self._uncount(key)
        self._sharing.pop(key, None)
        self._routes.pop(key, None)

    def release(self, key: str) -> bool:
        """`key` gives back what it holds; True when it held anything."""
        tenant = self._owner.get(key)
        self._routes.pop(key, None)
        if tenant is None:
            return False
        released = self._allocators[tenant].release(key) if tenant in self._allocators else ()
        self._forget(key)
        return bool(released)

    def _drop_tenant(self, name: str) -> list[str]:
        keys = sorted(self._held.get(name, ()))
        for key in keys:
            self.release(key)
        self._allocators.pop(name, None)
        self._configs.pop(name, None)
        return keys

    def _count(self, key: str, tenant: str, ips: Iterable[IPAddress]) -> None:
        """`key` (a request or a gateway address) of `tenant` holds `ips` now."""
        self._uncount(key)
        held = tuple(ips)
        if held:
            self._counted[key] = (tenant, held)
            self._ip_refs.setdefault(tenant, Counter()).update(held)

    def _uncount(self, key: str) -> None:
        counted = self._counted.pop(key, None)
        if counted is None:
            return
        tenant, ips = counted
        refs = self._ip_refs[tenant]
        for ip in ips:
            refs[ip] -= 1
            if not refs[ip]:
                del refs[ip]

    def _recount(self, tenant: str) -> None:
        """Count `tenant`'s holdings again from its allocator (which moved them)."""
        allocator = self._allocators[tenant]
        for key in self._held.get(tenant, ()):
            assignment = allocator.assignment(key)
            self._count(key, tenant, assignment.ips if assignment is not None else ())
        for key, (holder, ip) in self._gateway.items():
            if holder == tenant:
                self._count(key, tenant, (ip,))

    def usage(self, tenant: str, *, without: str | None = None) -> Usage:
        """What a tenant holds (leaving out request `without`): distinct IPs of its
        requests and gateway, its requests, their ports; from the running counts."""
        if tenant not in self._allocators:
            return Usage()
        held = self._held.get(tenant, set())
        refs = self._ip_refs.get(tenant, Counter())
        addresses, ports = len(refs), self._port_total.get(tenant, 0)
        if without is None or without not in held:
            return Usage(addresses, len(held), ports)
        _, ips = self._counted.get(without, (tenant, ()))
        only = sum(1 for ip in ips if refs[ip] == 1)  # nobody else holds these
        return Usage(addresses - only, len(held) - 1, ports - self._ports[without])

    def _shares(self, tenant: str, key: str, sharing_key: str | None) -> bool:
        if sharing_key is None:
            return False
        return any(
            k != key and self._sharing.get(k) == sharing_key for k in self._held.get(tenant, ())
        )

    def routes(self) -> list[TenantRoute]:
        """Every route route mode wants now, over all tenants (for the BGP speaker)."""
        return sorted(r for routes in self._routes.values() for r in routes)

    def route_count(self) -> int:
        return self._routes.count

    def holder_tenant(self, key: str) -> str | None:
        return self._owner.get(key)

    def assigned(self, key: str) -> tuple[IPAddress, ...]:
        """The addresses `key` holds, primary family first (empty: none)."""
        tenant = self._owner.get(key)
        allocator = self._allocators.get(tenant) if tenant is not None else None
        assignment = allocator.assignment(key) if allocator is not None else None
        return tuple(assignment.ips) if assignment is not None else ()

    # ------------------------------------------------------------------ decide

    def decide(self, view: ManagementView, key: str, now: datetime) -> Outcome:
        """Vet and allocate one request; what its status should be and what to tell."""
        request = view.requests.get(key)
        if request is None:
            self.release(key)
            problems = view.unparsed.get(key)
            if problems is None:
                return Outcome(key, None)
            refusal = Refusal(Rule.INVALID_REQUEST, "", "; ".join(str(p) for p in problems))
            return self.refuse(key, None, None, [refusal], now)
        owner = view.tenant_of(request.namespace)
        if isinstance(owner, Refusal):
            self.release(key)
            return self.refuse(key, request, None, [owner], now)
        tenant = owner.name
        if self._owner.get(key) not in (None, tenant):
            self.release(key)  # the namespace moved to another tenant
        if tenant not in self._allocators:
            self.sync(view)
        self.reserve(view)
        spec = request.spec
        others = self.usage(tenant, without=key)
        refusals = vet(
            request,
            owner,
            view.pools,
            others,
            shares=self._shares(tenant, key, spec.sharing_key),
        )
        provider = owner.provider_for(request)
        if not refusals:  # only a request the Tenant may have asks its provider
            refusals = self._vet_provider(request, owner, provider)
        if refusals:
            self.release(key)
            return self.refuse(key, request, tenant, refusals, now)
        result = self._allocators[tenant].assign(request_of(request))
        if isinstance(result, ipam.Refused):
            self.release(key)
            told = _unassigned(result.reason)
            programmed = Programmed(False, result.reason.value, told, told, result.message)
            return self._status(key, request, tenant, now, accepted=True, programmed=programmed)
        self._hold(key, tenant, request)
        builtin = provider in PROVIDER_OF_MODE.values()
        routes = wanted_routes(tenant, request, result.ips) if provider == ROUTE_PROVIDER else ()
        self._routes[key] = routes
        ips = ", ".join(str(ip) for ip in result.ips)
        if not builtin or (provider == PROXY_PROVIDER and self._progress is not None):
            # (proxy: what the gateway's control said of it; without a manager's progress,
            # standalone, the book's word as before)
            waiting = Programmed(
                False, REASON_PENDING, f"{ips} assigned; provider {provider} is building it"
            )
            word = self._progress(key, request, provider) if self._progress else None
            programmed = word or _kept(request, result.ips) or waiting
        elif routes or provider != ROUTE_PROVIDER:
            programmed = Programmed(True, REASON_PROGRAMMED, f"{ips} assigned")
        else:
            programmed = Programmed(
                False,
                REASON_NO_READY_BACKENDS,
                f"{ips} assigned; no backend node holds a ready endpoint, nothing is announced",
            )
        return self._status(
            key,
            request,
            tenant,
            now,
            accepted=True,
            programmed=programmed,
            assigned=result,
            routes=routes,
        )

    def refuse(
        self,
        key: str,
        request: TenantLoadBalancer | None,
        tenant: str | None,
        refusals: list[Refusal[Rule]],
        now: datetime,
    ) -> Outcome:
        """The outcome of refusing a request for `refusals` (it holds nothing after)."""
        self.release(key)
        message = "; ".join(str(r) for r in refusals)
        return self._status(
            key,
            request,
            tenant,
            now,
            accepted=False,
            reason=refusals[0].rule.value,
            message=message,
            programmed=Programmed(False, REASON_NOT_ACCEPTED, "the request was not accepted"),
            refusals=tuple(refusals),
        )

    def _status(
        self,
        key: str,
        request: TenantLoadBalancer | None,
        tenant: str | None,
        now: datetime,
        *,
        accepted: bool,
        programmed: Programmed,
        reason: str = REASON_ACCEPTED,
        message: str = "",
        assigned: ipam.Assigned | None = None,
        routes: tuple[TenantRoute, ...] = (),
        refusals: tuple[Refusal[Rule], ...] = (),
    ) -> Outcome:
        previous = request.status if request is not None and request.status else None
        old = previous.conditions if previous else []
        generation = request.metadata.generation if request is not None else None
        if accepted and not message:
            message = f"vetted for Tenant {tenant}"
        conditions = [
            condition(ACCEPTED, accepted, reason, message, old, now, generation),
            condition(
                PROGRAMMED,
                programmed.ok,
                programmed.reason,
                programmed.message,
                old,
                now,
                generation,
            ),
        ]
        if programmed.told is not None:
            told = (programmed.ok, programmed.reason, programmed.told)
            conditions.append(condition(PROGRAMMED_FOR_TENANT, *told, old, now, generation))
        status = TenantLoadBalancerStatus(
            # (no addressPool: the operator's AddressPool is not the tenant's to read)
            addresses=[str(ip) for ip in assigned.ips] if assigned else [],
            next_hops=sorted({str(h) for r in routes for h in r.next_hops}),
            conditions=conditions,
        )
        event = _event(old, conditions[:2], status)
        detail = programmed.detail
        operator = None
        if event is not None and detail is not None and detail != programmed.message:
            operator = Event(event.type, event.reason, f"{key}: {detail}")
        return Outcome(key, dump(status), event, tenant, routes, refusals, operator)


# What the tenant's Service is told when its request got no address (the IPAM's own
# message names the operator's AddressPools and the management keys of requests).
_SHARED = "the address it asks for is shared (lb.teapot.io/sharing-key) with a load balancer"
_UNASSIGNED: dict[ipam.RefusalReason, str] = {
    ipam.RefusalReason.NO_FREE_ADDRESS: "no free address of its IP families is left in the "
    "tenant's allocation; delete a load balancer no longer needed, or ask the operator for "
    "more addresses",
    ipam.RefusalReason.IP_IN_USE: "the address it asks for is held by another load "
    "balancer of the tenant; give both the same lb.teapot.io/sharing-key to share it, or "
    "ask for another",
    ipam.RefusalReason.PORT_CONFLICT: f"{_SHARED} that uses the same port and protocol",
    ipam.RefusalReason.TRAFFIC_POLICY_MISMATCH: f"{_SHARED} of another externalTrafficPolicy",
    ipam.RefusalReason.SELECTOR_MISMATCH: f"{_SHARED} whose pods are selected otherwise "
    "(externalTrafficPolicy Local: the same selector)",
}


_FREED_MAY_HELP = frozenset(
    {
        ipam.RefusalReason.NO_FREE_ADDRESS,
        ipam.RefusalReason.IP_IN_USE,
        ipam.RefusalReason.PORT_CONFLICT,
        ipam.RefusalReason.TRAFFIC_POLICY_MISMATCH,
    }
)


def waits_for_address(request: TenantLoadBalancer) -> bool:
    """Whether `request` got no address because others held them (the allocation full,
    its IP held, a sharing clash): deciding it again may give it one once another request
    of its tenant frees addresses, as MetalLB retries its pending Services."""
    if request.status is None or request.status.addresses:
        return False
    reasons = {c.reason for c in request.status.conditions if c.type == PROGRAMMED}
    return any(r in reasons for r in _FREED_MAY_HELP)


def _unassigned(reason: ipam.RefusalReason) -> str:
    """Why the tenant's load balancer got no address, in the tenant's words."""
    why = _UNASSIGNED.get(
        reason,
        "its requested addresses or IP families cannot be given from the tenant's "
        "allocation; check them, or ask the operator",
    )
    return f"the load balancer got no address ({reason.value}): {why}"


_UNDER_WAY = frozenset({REASON_PENDING, REASON_NOT_ANNOUNCED})
"""`Programmed=False` reasons of work going as it should (a provider building, an address
about to be announced): a Normal Event, not a Warning on every load balancer made."""


def _event(
    old: list[Condition], new: list[Condition], status: TenantLoadBalancerStatus
) -> Event | None:
    """An Event when a condition turned (or its reason or message changed)."""
    before = {c.type: (c.status, c.reason, c.message) for c in old}
    for condition in new:
        if before.get(condition.type) == (condition.status, condition.reason, condition.message):
            continue
        if condition.status is ConditionStatus.TRUE:
            if condition.type == PROGRAMMED and condition.reason == REASON_DEGRADED:
                return Event(EventType.WARNING, REASON_DEGRADED, condition.message)
            if condition.type == PROGRAMMED:
                return Event(EventType.NORMAL, "Programmed", condition.message)
            continue
        if condition.reason == REASON_NOT_ACCEPTED:
            continue
        if condition.type == PROGRAMMED and condition.reason in _UNDER_WAY:
            return Event(EventType.NORMAL, condition.reason, condition.message)
        return Event(EventType.WARNING, condition.reason, condition.message)
    return None


def tenant_status(tenant: Tenant, usage: Usage, refused: int, now: datetime) -> dict[str, Any]:
    """A Tenant's desired status: usage against quota and a Valid condition."""
    old = tenant.status.conditions if tenant.status else []
    status = TenantStatus(
        usage=TenantUsage(
            addresses=usage.addresses, load_balancers=usage.load_balancers, ports=usage.ports
        ),
        refused=refused,
        conditions=[
            condition(
                "Ready",
                True,
                "Serving",
                f"serving namespace {tenant.spec.namespace}",
                old,
                now,
                tenant.metadata.generation,
            )
        ],
    )
    return dump(status)


__all__ = [
    "ManagementView",
    "Outcome",
    "Programmed",
    "ProviderProgress",
    "ProviderVet",
    "TenantBook",
    "builtin_providers_only",
    "condition",
    "tenant_status",
    "unavailable",
]
