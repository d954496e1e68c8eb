"""`teapot-lb manager` against the management cluster's API server.

Informers on Tenants, TenantLoadBalancers (every namespace) and the AddressPools of the
configuration namespace fill typed maps and only enqueue keys. While this replica holds
the Lease, one :class:`~teapot_lb.kube.reconciler.ReconcileLoop` reconciles requests
(:meth:`~teapot_lb.tenancy.book.TenantBook.decide`, then status, Event, metrics) and
Tenants' statuses (usage against quota). On taking the lease the book is rebuilt from
the IPs requests hold, so a new leader never hands out an IP twice.

Every request is vetted here whether or not the webhook saw it: a request written while
the webhook was down is refused all the same, with its reason in its status and an Event.
A request the webhook denied never exists here: its agent records the denial as an Event
in the tenant's namespace (:data:`~teapot_lb.tenancy.request.DENIALS_SELECTOR`), which the
Tenant's status counts with the requests refused here (by the Event's namespace, so a
tenant can move only its own count), and which is deleted when the Tenant changes, so
that its agents ask again.
A request lives in its tenant's namespace, which the tenant's agent reads whole (status,
conditions, the Events there): what is written there is in the tenant's words; the
operator's detail (a provider's endpoint and error text, the IPAM's message) is an Event
on the cluster-scoped Tenant (:data:`OPERATOR_EVENTS_NAMESPACE`), naming the request.
The TenantNodes the tenants' agents publish are vetted against their Tenant's
nodeNetworks (:mod:`.node_status`): the refused addresses in their status, and counted.
With `gateway_services`, the Services that announce the tenants' dedicated gateway
addresses (:mod:`.l7services`, in the configuration namespace) are read too: the book
holds those addresses and counts them in the tenants' quotas. Those that announce a
Gateway-mode request's address are not read as a claim: the request holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

from teapot_lb import log
from teapot_lb.addresses import IPAddress, parse_ip
from teapot_lb.gateway.control.l7refused import RefusedObjects
from teapot_lb.gateway.control.l7services import LABEL_ADDRESS_OF, carried_requests
from teapot_lb.gateway.translate import Translation
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.leader import LeaderElector, LeaseConfig, lead_when_elected
from teapot_lb.kube.reconciler import ReconcileLoop, Result
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    EVENTS,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    TENANT_NODES,
    TENANTS,
    KubeObject,
    Resource,
)
from teapot_lb.kube.status import patch_status
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.manager.providers import Providers
from teapot_lb.model import ApiObject, dump, parse_object
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.event import Event
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.service import ANNOTATION_IPS
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantNodes
from teapot_lb.providers.base import Provider
from teapot_lb.providers.proxy import Copy
from teapot_lb.tenancy.book import (
    ManagementView,
    Outcome,
    TenantBook,
    tenant_status,
    waits_for_address,
)
from teapot_lb.tenancy.node_status import tenant_nodes_status
from teapot_lb.tenancy.request import DENIALS_SELECTOR, REQUEST_KIND
from teapot_lb.tenancy.routes import TenantRoute
from teapot_lb.tenancy.vet import NamespaceOwners

COMPONENT = "teapot-lb-manager"
OPERATOR_EVENTS_NAMESPACE = "default"
"""Where Events about a cluster-scoped object go (the API server's rule), so where the
operator's words about a tenant's requests are (on its Tenant); no agent's Role is there."""


@dataclass(frozen=True)
class RequestKey:
    key: str  # namespace/name of a TenantLoadBalancer


@dataclass(frozen=True)
class TenantStatusKey:
    name: str


@dataclass(frozen=True)
class DenialsKey:
    """A Tenant changed: clear the denials its agents recorded in `namespace`."""

    namespace: str


@dataclass(frozen=True)
class TenantsKey:
    """Tenants or pools changed: follow the allocations, reconcile whom it moved."""


@dataclass(frozen=True)
class NodesKey:
    key: str  # namespace/name of a TenantNodes


@dataclass(frozen=True)
class ProviderKey:
    """What an external provider built for a request: ensure it, or delete it."""

    key: str  # namespace/name of a TenantLoadBalancer


@dataclass(frozen=True)
class SweepKey:
    """Have an external provider delete what no request wants (on leading, then every
    `provider_sweep_s`)."""

    provider: str


TENANTS_KEY = TenantsKey()
ManagerKey = (
    RequestKey | TenantStatusKey | TenantsKey | NodesKey | DenialsKey | ProviderKey | SweepKey
)


@dataclass(frozen=True)
class ManagerConfig:
    config_namespace: str = "teapot-lb-system"
    lease: LeaseConfig | None = None
    workers: int = 32
    event_senders: int = 4
    tenant_status_delay_s: float = 0.5
    gateway_services: bool = False
    providers: Mapping[str, Provider] = field(default_factory=dict)
    """The external providers run here, by name (`--provider`); route and proxy always."""
    provider_resync_s: float = 60.0
    """How often an Active load balancer is ensured again (one deleted behind our back
    is built again)."""
    provider_sweep_s: float = 300.0
    provider_retry_base_s: float = 1.0
    provider_retry_cap_s: float = 60.0
    provider_call_timeout_s: float = 120.0


class KubeManager:
    def __init__(
        self,
        client: KubeClient,
        config: ManagerConfig | None = None,
        *,
        metrics: ManagerMetrics | None = None,
        watch_timeout_s: float = 300.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.config = config or ManagerConfig()
        self.metrics = metrics or ManagerMetrics()
        self.providers = Providers(
            self.config.providers,
            self.metrics,
            call_timeout_s=self.config.provider_call_timeout_s,
            retry_base_s=self.config.provider_retry_base_s,
            retry_cap_s=self.config.provider_retry_cap_s,
            gateway_services=self.config.gateway_services,
        )
        self.book = TenantBook(self.providers.vet, self.providers.progress)
        # Events in a tenant's namespace (its agent reads them) name no process of the
        # operator's: the replica (its pod name) is on the operator's Events only.
        self.recorder = EventRecorder(client, COMPONENT)
        self.operator_recorder = EventRecorder(
            client, COMPONENT, instance=self.config.lease.identity if self.config.lease else ""
        )
        self._clock = clock
        self.tenants: dict[str, Tenant] = {}
        self.requests: dict[str, TenantLoadBalancer] = {}
        self.pools: dict[str, AddressPool] = {}
        self.unparsed: dict[str, list[Problem]] = {}
        self.tenant_nodes: dict[str, TenantNodes] = {}
        self.gateway_addresses: dict[str, tuple[str, IPAddress]] = {}  # Service key -> ...
        self._raw: dict[str, KubeObject] = {}
        # Agents' denials (Events by key), and the requests each names, by namespace.
        self._denials: dict[str, KubeObject] = {}
        # What a change reads by namespace, kept as objects change (so that a Tenant's
        # status or a request's decision does not walk every object of every tenant).
        self._owners = NamespaceOwners()
        self._requests_in: dict[str, set[str]] = {}  # namespace -> keys in self._raw
        self._denials_in: dict[str, set[str]] = {}  # namespace -> keys in self._denials
        # The objects the gateway's vetting refused (its reconcile in this process), by
        # tenant: counted in the Tenant's status with the rest.
        self._gateway_refused = RefusedObjects()
        self._view: ManagementView | None = None
        self._request_informer = self._informer(
            TENANT_LOAD_BALANCERS, None, self._on_request, watch_timeout_s
        )
        self.informers = [
            self._informer(TENANTS, None, self._on_tenant, watch_timeout_s),
            self._request_informer,
            self._informer(TENANT_NODES, None, self._on_nodes, watch_timeout_s),
            self._informer(
                ADDRESS_POOLS, self.config.config_namespace, self._on_pool, watch_timeout_s
            ),
            self._informer(
                EVENTS, None, self._on_denial, watch_timeout_s, field_selector=DENIALS_SELECTOR
            ),
        ]
        if self.config.gateway_services:
            informer = Informer(
                client,
                SERVICES,
                namespace=self.config.config_namespace,
                label_selector=LABEL_ADDRESS_OF,
                watch_timeout_s=watch_timeout_s,
            )
            informer.add_handler(self._on_gateway_service)
            self.informers.append(informer)
        self.elector = (
            LeaderElector(client, self.config.lease, on_change=self._on_leadership)
            if self.config.lease
            else None
        )
        self.loop: ReconcileLoop[ManagerKey] | None = None
        self._events: asyncio.Queue[tuple[EventRecorder, KubeObject, Event]] = asyncio.Queue()
        self._log = log.get("manager")

    # ------------------------------------------------------------------ cache

    def _informer(
        self,
        resource: Resource,
        namespace: str | None,
        handler: Callable[[EventType, str, KubeObject], None],
        watch_timeout_s: float,
        *,
        field_selector: str | None = None,
    ) -> Informer:
        informer = Informer(
            self.client,
            resource,
            namespace=namespace,
            field_selector=field_selector,
            watch_timeout_s=watch_timeout_s,
        )
        informer.add_handler(handler)
        return informer

    def _parse(self, obj: KubeObject) -> tuple[ApiObject | None, list[Problem]]:
        parsed, problems = parse_object(obj)
        return (parsed, problems) if not problems else (None, problems)

    def _on_tenant(self, event: EventType, key: str, obj: KubeObject) -> None:
        parsed, _ = self._parse(obj)
        before = self.tenants.pop(key, None)
        self._owners.drop(key)
        if event is not EventType.DELETED and isinstance(parsed, Tenant):
            self.tenants[key] = parsed
            self._owners.put(parsed)
        after = self.tenants.get(key)
        # Our own status writes change only the status: nothing to reconcile again.
        if (before.spec if before else None) != (after.spec if after else None):
            self._enqueue(TENANTS_KEY)
            self._enqueue(TenantStatusKey(key), delay=self.config.tenant_status_delay_s)
            for namespace in {t.spec.namespace for t in (before, after) if t is not None}:
                self._enqueue(DenialsKey(namespace))

    def gateway_translated(self, result: Translation) -> None:
        """The gateway vetted the tenants' objects again: the Tenants whose refused
        objects changed get their status written again (counted from the namespaces the
        translation decided again only), and the Gateway-mode requests whose result
        changed are decided again."""
        for name in sorted(self._gateway_refused.update(result.changed)):
            self._enqueue(TenantStatusKey(name), delay=self.config.tenant_status_delay_s)
        for key in self.providers.gateway_translated(result):
            self._enqueue(RequestKey(key))  # provider proxy: served or not, as translated

    def _on_denial(self, event: EventType, key: str, obj: KubeObject) -> None:
        namespace = key.partition("/")[0]
        self._denials.pop(key, None)
        _unindex(self._denials_in, namespace, key)
        if event is not EventType.DELETED:
            self._denials[key] = obj
            self._denials_in.setdefault(namespace, set()).add(key)
        for name in self._owners.names(namespace):
            self._enqueue(TenantStatusKey(name), delay=self.config.tenant_status_delay_s)

    def _on_pool(self, event: EventType, key: str, obj: KubeObject) -> None:
        parsed, _ = self._parse(obj)
        name = str(obj["metadata"]["name"])
        before = self.pools.pop(name, None)
        if event is not EventType.DELETED and isinstance(parsed, AddressPool):
            self.pools[name] = parsed
        after = self.pools.get(name)
        # The controller writes pool statuses; only a spec change moves allocations.
        if (before.spec if before else None) != (after.spec if after else None):
            self._enqueue(TENANTS_KEY)

    def _on_request(self, event: EventType, key: str, obj: KubeObject) -> None:
        namespace = key.partition("/")[0]
        self.requests.pop(key, None)
        self.unparsed.pop(key, None)
        self._raw.pop(key, None)
        _unindex(self._requests_in, namespace, key)
        if event is not EventType.DELETED:
            self._raw[key] = obj
            self._requests_in.setdefault(namespace, set()).add(key)
            parsed, problems = self._parse(obj)
            if isinstance(parsed, TenantLoadBalancer):
                self.requests[key] = parsed
            else:
                self.unparsed[key] = problems
        self._enqueue(RequestKey(key))

    def _on_gateway_service(self, event: EventType, key: str, obj: KubeObject) -> None:
        """A Service announcing a gateway address: a dedicated address is held for its
        tenant; one carrying requests' address (:func:`.l7services.carried_requests`) is
        no claim at all (the address is the requests', held once, by them), and one
        naming a request that does not hold the address is a stale copy: said, ignored."""
        before = self.gateway_addresses.pop(key, None)
        meta = obj.get("metadata", {})
        tenant = (meta.get("labels") or {}).get(LABEL_ADDRESS_OF)
        text = (meta.get("annotations") or {}).get(ANNOTATION_IPS, "")
        ip = _ip_or_none(text)
        carried = carried_requests(obj) if event is not EventType.DELETED else ()
        copy = (ip, carried) if ip is not None and tenant and carried else None
        for request_key in self.providers.proxy.copy_seen(key, copy):
            self._enqueue(RequestKey(request_key))  # announced now, or no longer
        if event is not EventType.DELETED and tenant and ip is not None and not carried:
            self.gateway_addresses[key] = (tenant, ip)
        if copy is not None and self._request_informer.has_synced:
            self._say_stale(key, copy)  # (before the requests are read: when leading)
        after = self.gateway_addresses.get(key)
        if before != after:
            self._view = None
            for held in (before, after):
                if held is not None:
                    self._enqueue(TenantStatusKey(held[0]), delay=self.config.tenant_status_delay_s)

    def _say_stale(self, service: str, copy: Copy) -> None:
        """Warn of each request a copy names that does not hold its address (its status,
        as the book rebuilds from): a stale copy, ignored (it is no claim anyway)."""
        ip, carried = copy
        for key in carried:
            request = self.requests.get(key)
            held = request.status.addresses if request is not None and request.status else []
            if not any(_ip_or_none(text) == ip for text in held):
                self._log.warning(
                    "gateway service stale: its request does not hold the address; ignored",
                    service=service, address=str(ip), request=key,
                )  # fmt: skip

    def _on_nodes(self, event: EventType, key: str, obj: KubeObject) -> None:
        parsed, problems = self._parse(obj)
        self.tenant_nodes.pop(key, None)
        if event is not EventType.DELETED:
            if isinstance(parsed, TenantNodes):
                self.tenant_nodes[key] = parsed
            else:
                self._log.warning("tenant nodes unreadable", key=key, problems=problems)
        self._enqueue(NodesKey(key))

    def view(self) -> ManagementView:
        """What the book decides on. It copies nothing: the maps are this cache's, read
        through as they are now (a copy of every request per request event made a change
        cost O(requests)); only the gateway addresses by tenant are derived, again when
        they change. A caller reads it before its first await, as a reconcile does."""
        if self._view is None:
            gateway: dict[str, set[IPAddress]] = {}
            for tenant, ip in self.gateway_addresses.values():
                gateway.setdefault(tenant, set()).add(ip)
            self._view = ManagementView(
                MappingProxyType(self.tenants),
                MappingProxyType(self.requests),
                MappingProxyType(self.pools),
                MappingProxyType(self.unparsed),
                {t: frozenset(ips) for t, ips in gateway.items()},
                self._owners,
            )
        return self._view

    def objects(self) -> list[ApiObject]:
        """What the webhook vets a change against: pools, Tenants and requests."""
        return [*self.pools.values(), *self.tenants.values(), *self.requests.values()]

    def routes(self) -> list[TenantRoute]:
        """Route mode's wanted routes now (the BGP speaker's input; see docs/teapot.md)."""
        return self.book.routes()

    def readiness(self) -> list[str]:
        """Why the manager is not ready, naming what it read where, and what sets that."""
        return unready(
            self.informers,
            "the manager reads Tenants, TenantLoadBalancers and the agents' Events in every"
            f" namespace, AddressPools in {self.config.config_namespace!r} (--config-namespace),"
            " through --kubeconfig or the pod's ServiceAccount (deploy/teapot/management.yaml)",
        )

    @property
    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def _enqueue(self, key: ManagerKey, *, delay: float = 0.0) -> None:
        loop = self.loop
        if loop is None:
            return
        if delay:
            loop.queue.add_after(key, delay)
        else:
            loop.queue.add(key)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(informer.run())
            group.create_task(self._campaign())

    async def _campaign(self) -> None:
        for informer in self.informers:
            await informer.wait_synced()
        await lead_when_elected(self.elector, self._lead)

    def _on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)

    async def _lead(self) -> None:
        self.metrics.leader.set(1)
        loop: ReconcileLoop[ManagerKey] = ReconcileLoop(
            "manager",
            self._reconcile,
            workers=self.config.workers,
            queue=WorkQueue(
                base_delay_s=0.1,
                max_delay_s=30.0,
                group=self._namespace_of,
                on_deferred=lambda ns: self.metrics.deferred.labels(ns).inc(),
                on_coalesced=lambda ns: self.metrics.coalesced.labels(ns).inc(),
            ),
            on_result=self._on_result,
        )
        view = self.view()
        self.book.rebuild(view)
        for service, copy in self.providers.proxy.copies().items():
            self._say_stale(service, copy)
        self.loop = loop
        self._log.info("leading: book rebuilt", tenants=len(view.tenants), requests=len(self._raw))
        for key in sorted(self._raw):
            loop.queue.add(RequestKey(key))
        for name in self.tenants:
            loop.queue.add(TenantStatusKey(name))
        # Published before this term (or before the loop existed): vetted now, or a
        # TenantNodes that never changes again would never get its verdict.
        for nodes_key in sorted(self.tenant_nodes):
            loop.queue.add(NodesKey(nodes_key))
        # Ensured again by the requests' reconciles; what no request wants, swept.
        self.providers.new_term()
        for name in sorted(self.providers.running):
            loop.queue.add(SweepKey(name))
        self._events = asyncio.Queue()  # Events of an earlier term are not sent late
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(loop.work())
                for _ in range(self.config.event_senders):
                    group.create_task(self._send_events())
        finally:
            loop.queue.shut_down()
            self.loop = None
            self.metrics.leader.set(0)

    def _namespace_of(self, key: ManagerKey) -> str:
        """The tenant namespace a key is about: one tenant's churn waits its turn behind
        the others' keys (kube.workqueue's groups); '' for the cloud-wide key."""
        match key:
            case RequestKey(key=k) | NodesKey(key=k):
                return k.partition("/")[0]
            case DenialsKey(namespace=namespace):
                return namespace
            case TenantStatusKey(name=name):
                tenant = self.tenants.get(name)
                return tenant.spec.namespace if tenant is not None else ""
        return ""

    def _on_result(self, key: ManagerKey, seconds: float, error: BaseException | None) -> None:
        if error is not None:
            self.metrics.reconcile_errors.inc()
        self.metrics.reconcile_duration.observe(seconds)

    # ------------------------------------------------------------------ reconcile

    async def _reconcile(self, key: ManagerKey) -> Result | None:
        match key:
            case TenantsKey():
                for moved in self.book.sync(self.view()):
                    self._enqueue(RequestKey(moved))
                for request_key in self._raw:
                    self._enqueue(RequestKey(request_key))
                for nodes_key in self.tenant_nodes:
                    self._enqueue(NodesKey(nodes_key))
            case NodesKey(key=nodes_key):
                await self._vet_nodes(nodes_key)
            case TenantStatusKey(name=name):
                await self._write_tenant_status(name)
            case DenialsKey(namespace=namespace):
                await self._clear_denials(namespace)
            case RequestKey(key=request_key):
                before = self.book.holder_tenant(request_key)
                held = self.book.assigned(request_key)
                outcome = self.book.decide(self.view(), request_key, self._clock())
                if set(held) - set(self.book.assigned(request_key)):
                    self._addresses_freed(request_key)
                self.metrics.routes.set(self.book.route_count())
                for tenant in {before, outcome.tenant} - {None}:
                    assert tenant is not None
                    self._enqueue(TenantStatusKey(tenant), delay=self.config.tenant_status_delay_s)
                await self._apply(outcome)
                if self.providers.wants_turn(request_key, self.view(), self.book):
                    self._enqueue(ProviderKey(request_key))
            case ProviderKey(key=request_key):
                turn = await self.providers.reconcile(request_key, self.view(), self.book)
                if turn.changed:
                    self._enqueue(RequestKey(request_key))  # its Programmed condition
                delay = turn.delay
                if delay is None and self.providers.building(request_key):
                    delay = self.config.provider_resync_s
                return Result(requeue_after=delay)
            case SweepKey(provider=name):
                await self.providers.sweep(name, self.view())
                return Result(requeue_after=self.config.provider_sweep_s)
        return None

    def _addresses_freed(self, by: str) -> None:
        """`by` gave addresses back: its namespace's requests that waited for one are
        decided again (nothing else would wake them: they did not change)."""
        namespace = by.partition("/")[0]
        for key in self._requests_in.get(namespace, ()):
            request = self.requests.get(key)
            if key != by and request is not None and waits_for_address(request):
                self._enqueue(RequestKey(key))

    async def _apply(self, outcome: Outcome) -> None:
        raw = self._raw.get(outcome.key)
        if outcome.status is None or raw is None:
            return
        if outcome.refusals:
            rule = outcome.refusals[0].rule.value
            self.metrics.refusals.labels(outcome.tenant or "", rule).inc()
        namespace, name = outcome.key.split("/", 1)
        if outcome.status != raw.get("status"):
            if not self.is_leader:
                return
            try:
                written = await patch_status(
                    self.client,
                    TENANT_LOAD_BALANCERS,
                    name,
                    namespace,
                    outcome.status,
                    was=raw.get("status"),
                )
            except NotFound:
                return
            if self._raw.get(outcome.key) is raw:
                self._raw[outcome.key] = written
            if outcome.event is not None:
                # Sent apart from the reconcile: a status write is one round trip, not two.
                self._events.put_nowait((self.recorder, written, outcome.event))
            if outcome.operator_event is not None and outcome.tenant is not None:
                self._tell_operator(outcome.tenant, outcome.operator_event)

    def _tell_operator(self, name: str, event: Event) -> None:
        """An Event in the operator's words about Tenant `name`: the Tenant is cluster-scoped,
        so its Events are in namespace `default` (`kubectl describe tenant`), which no
        agent reads unless a Tenant was given that very namespace: then it is not recorded
        (the log has it), and the operator is told why."""
        tenant = self.tenants.get(name)
        if tenant is None:
            return
        if self._owners.names(OPERATOR_EVENTS_NAMESPACE):
            self._log.warning(
                "operator detail not recorded: a Tenant's namespace is where it would go",
                namespace=OPERATOR_EVENTS_NAMESPACE, tenant=name, reason=event.reason,
                message=event.message,
            )  # fmt: skip
            return
        involved: KubeObject = {
            "apiVersion": tenant.api_version,
            "kind": tenant.kind,
            "metadata": {"name": name, "uid": tenant.metadata.uid or ""},
        }
        self._events.put_nowait((self.operator_recorder, involved, event))

    async def _vet_nodes(self, key: str) -> None:
        nodes = self.tenant_nodes.get(key)
        if nodes is None:
            return
        owner = self._owners.of(nodes.namespace)
        tenant = owner if isinstance(owner, Tenant) else None
        status, gone = tenant_nodes_status(tenant, nodes, self._clock())
        self.metrics.node_addresses_refused.labels(
            tenant.name if tenant else "", nodes.namespace, nodes.name
        ).set(len(gone))
        current = dump(nodes.status) if nodes.status else None
        if status == current or not self.is_leader:
            return
        for r in gone:
            self._log.warning(
                "tenant node address refused", key=key, node=r.node, address=str(r.address),
                reason=r.reason,
            )  # fmt: skip
        with contextlib.suppress(NotFound):
            await patch_status(self.client, TENANT_NODES, nodes.name, nodes.namespace, status)

    async def _send_events(self) -> None:
        while True:
            recorder, involved, event = await self._events.get()
            if self.is_leader:
                await recorder.record(involved, event.type.value, event.reason, event.message)

    async def _write_tenant_status(self, name: str) -> None:
        tenant = self.tenants.get(name)
        if tenant is None:
            return
        self.book.reserve(self.view())
        usage = self.book.usage(name)
        refused = self.refused(name, tenant.spec.namespace)
        self.metrics.addresses.labels(name).set(usage.addresses)
        self.metrics.load_balancers.labels(name).set(usage.load_balancers)
        self.metrics.refused.labels(name).set(refused)
        status = tenant_status(tenant, usage, refused, self._clock())
        current = dump(tenant.status) if tenant.status else None
        if status == current or not self.is_leader:
            return
        with contextlib.suppress(NotFound):
            await patch_status(self.client, TENANTS, name, None, status)

    def refused(self, name: str, namespace: str) -> int:
        """What Tenant `name` (of `namespace`) counts as refused: requests refused here,
        the requests and gateway mirrors the API server refused to store (denials recorded
        by the agents in the tenant's namespace: their latest change refused), and the
        objects the gateway's vetting refused. Read from the namespace's objects only."""
        return len(
            {
                key
                for key in self._requests_in.get(namespace, ())
                if self.book.holder_tenant(key) != name
            }
            | {
                _denied_object(namespace, self._denials[key])
                for key in self._denials_in.get(namespace, ())
            }
            | self._gateway_refused.of(name)
        )

    async def _clear_denials(self, namespace: str) -> None:
        if not self.is_leader:
            return
        for key in sorted(self._denials_in.get(namespace, ())):
            with contextlib.suppress(NotFound):
                await self.client.delete(EVENTS, key.partition("/")[2], namespace)


def _unindex(index: dict[str, set[str]], namespace: str, key: str) -> None:
    keys = index.get(namespace)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[namespace]


def _ip_or_none(text: str) -> IPAddress | None:
    try:
        return parse_ip(text)
    except ValueError:
        return None


def _denied_object(namespace: str, event: KubeObject) -> str:
    """What an agent's denial is about, keyed as the other refusals it is counted with: a
    request as its key, a gateway mirror as the gateway's vetting names it."""
    involved = event.get("involvedObject") or {}
    kind, name = involved.get("kind"), involved.get("name")
    if kind == REQUEST_KIND:
        return f"{namespace}/{name}"
    return str(ObjectRef(str(kind), namespace, str(name)))


__all__ = ["OPERATOR_EVENTS_NAMESPACE", "KubeManager", "ManagerConfig"]
