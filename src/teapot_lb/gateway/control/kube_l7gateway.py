"""The gateway's control plane against the management cluster: the tenants' mirrored
Ingresses and Gateway API objects, EndpointSlices and TLS Secrets in; the data plane's
:class:`~teapot_lb.gateway.config.GatewayConfig` out (to `on_config`), and status,
refusal annotations and Events back on the objects.

One level-triggered key: a change translates again the tenants whose namespace it is in
(:class:`~teapot_lb.gateway.translation_cache.TranslationCache`: their objects vetted
again, so an object written while the webhook was down is refused here all the same;
the rest kept), and the status of those tenants' objects is compared and written where
it differs. A change of the Tenants or of the gateway's addresses translates everything.
:meth:`GatewayControl.admission` is the webhook's check for these kinds (the same vetting,
against the same cache).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from teapot_lb import log
from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.config import Certificate, GatewayConfig
from teapot_lb.gateway.control.l7mirror import AGENT, ANNOTATION_REFUSED, MANAGED_BY, ROUTES
from teapot_lb.gateway.control.l7namespaces import ByNamespace
from teapot_lb.gateway.control.l7services import LABEL_ADDRESS_OF, address_services, differs
from teapot_lb.gateway.control.l7status import (
    gateway_status,
    ingress_refusal,
    ingress_status,
    route_status,
)
from teapot_lb.gateway.control.l7turns import this_turn
from teapot_lb.gateway.default_certificate import from_secret
from teapot_lb.gateway.translate import ObjectResult, Translation
from teapot_lb.gateway.translation_cache import TranslationCache
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    ENDPOINT_SLICES,
    GATEWAY_API_GROUP,
    GATEWAYS,
    INGRESSES,
    SECRETS,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    TENANTS,
    KubeObject,
    Resource,
)
from teapot_lb.kube.status import patch_status
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.model import ApiObject, parse_object
from teapot_lb.model.gateway_api import Gateway, HTTPRoute, TCPRoute, TLSRoute, UDPRoute
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.manifest import secret_data
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem, problem
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.l7address import held_addresses
from teapot_lb.tenancy.l7vet import L7Object, L7World, problems_of, vet_object
from teapot_lb.tenancy.request import LABEL_CLUSTER

T = TypeVar("T")
COMPONENT = "teapot-lb-gateway"
KEY = "gateway"
OBJECT_RESOURCES: tuple[Resource, ...] = (INGRESSES, GATEWAYS, *ROUTES)


class GatewayControl:
    """`addresses`: the gateway's IPs (what Ingresses and Gateways are given);
    `on_config`: called with every new config (the data plane's apply); `on_translation`:
    with every vetting's result (the manager counts refusals in Tenants); `statuses`: whether
    to write status and Events now (one replica does when several run: the leader's);
    `config_namespace`: where the AddressPools are (tenants' dedicated addresses come from
    their allocations, and count with what their TenantLoadBalancers hold);
    `address_service`: NAMESPACE/NAME of the shared gateway's LoadBalancer Service, copied
    with each dedicated address, and each address a Gateway-mode request is served on,
    pinned so the speakers announce it (:mod:`.l7services`; None: not written);
    `default_certificate`: the namespace and name of the TLS Secret holding the gateway's
    own certificate (followed; while it is missing or unusable, the gateway's generated one
    is shown, and the log says why)."""

    def __init__(
        self,
        client: KubeClient,
        addresses: Sequence[IPAddress],
        *,
        on_config: Callable[[GatewayConfig], Awaitable[None]] | None = None,
        on_translation: Callable[[Translation], None] | None = None,
        statuses: Callable[[], bool] = lambda: True,
        gateway_api: bool = True,
        config_namespace: str = "teapot-lb-system",
        address_service: str | None = None,
        watch_timeout_s: float = 300.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        registry: CollectorRegistry | None = None,
        default_certificate: tuple[str, str] | None = None,
    ) -> None:
        self.client = client
        self.registry = registry or CollectorRegistry()
        self.objects_gauge = Gauge(
            "teapot_lb_gateway_objects",
            "Tenants' Ingresses and Gateway API objects, served or refused (by first rule).",
            ["tenant", "kind", "state"],
            registry=self.registry,
        )
        self.translate_seconds = Histogram(
            "teapot_lb_gateway_translate_seconds",
            "Time to vet and translate the tenants a change touches into the gateway config.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.deferred = Counter(
            "teapot_lb_gateway_translations_deferred",
            "Turns a tenant's changes waited while other tenants' were served first (it"
            " was translated the turn before: its churn folds into the next turn's).",
            ["tenant"],
            registry=self.registry,
        )
        self.addresses = tuple(addresses)
        self.on_config = on_config
        self.on_translation = on_translation
        self.statuses = statuses
        self._clock = clock
        self.recorder = EventRecorder(client, COMPONENT)
        self.translation: Translation | None = None
        self.config: GatewayConfig | None = None
        self._told: dict[tuple[str, str, str], str] = {}
        self._log = log.get("gateway.control")
        resources = [r for r in OBJECT_RESOURCES if gateway_api or r.group != GATEWAY_API_GROUP]
        self.objects = {r: Informer(client, r, watch_timeout_s=watch_timeout_s) for r in resources}
        self.tenants = Informer(client, TENANTS, watch_timeout_s=watch_timeout_s)
        self.pools = Informer(
            client, ADDRESS_POOLS, namespace=config_namespace, watch_timeout_s=watch_timeout_s
        )
        self.requests = Informer(client, TENANT_LOAD_BALANCERS, watch_timeout_s=watch_timeout_s)
        self.address_service = address_service
        self.services = (
            Informer(
                client,
                SERVICES,
                namespace=address_service.partition("/")[0],
                watch_timeout_s=watch_timeout_s,
            )
            if address_service
            else None
        )
        self.slices = Informer(
            client, ENDPOINT_SLICES, label_selector=f"{MANAGED_BY}={AGENT}",
            watch_timeout_s=watch_timeout_s,
        )  # fmt: skip
        self.secrets = Informer(
            client, SECRETS, label_selector=LABEL_CLUSTER, watch_timeout_s=watch_timeout_s
        )
        self.default_secret = default_certificate
        self._default_problem: str | None = None
        self.default_secrets: list[Informer] = []
        if default_certificate is not None:
            namespace, name = default_certificate
            only = f"metadata.name={name}"
            self.default_secrets.append(
                Informer(client, SECRETS, namespace=namespace, field_selector=only,
                         watch_timeout_s=watch_timeout_s)
            )  # fmt: skip
        # What a change touched: the namespaces of the tenants' objects, slices and
        # Secrets (translated again), and whether the pools or requests changed (the
        # dedicated addresses' inputs, read again).
        self._changed: set[str] = set()
        self._unwritten: set[str] = set()
        self._assigning: set[str] = set()
        # The namespaces the last turn translated and put off (:mod:`.l7turns`).
        self._last_turn: frozenset[str] = frozenset()
        self._put_off: frozenset[str] = frozenset()
        self.views: list[ByNamespace[L7Object]] = [
            ByNamespace(i, _parse, self._changed) for i in self.objects.values()
        ]
        self.slice_view: ByNamespace[KubeObject] = ByNamespace(self.slices, _raw, self._changed)
        self.secret_view = ByNamespace(self.secrets, _secret, self._changed)
        self.tenant_view: ByNamespace[Tenant] = ByNamespace(self.tenants, _parsed_as(Tenant), set())
        self.pool_view = ByNamespace(self.pools, _parsed_as(AddressPool), self._assigning)
        # A request's change is both: its tenant's Gateway-mode requests are served here
        # (translated again), and what requests hold is a dedicated addresses' input.
        self._requested: set[str] = set()
        self.request_view = ByNamespace(
            self.requests, _parsed_as(TenantLoadBalancer), self._requested
        )
        self.cache = TranslationCache()
        self._pools: dict[str, AddressPool] = {}
        self._held: dict[str, frozenset[IPAddress]] = {}
        self._counts: dict[str, dict[tuple[str, str, str], int]] = {}
        self.loop: ReconcileLoop[str] = ReconcileLoop(
            "gateway-control",
            self._reconcile,
            workers=1,
            queue=WorkQueue(base_delay_s=0.1, max_delay_s=30.0),
        )
        for informer in self._informers():
            self.loop.watch(informer, self._key)

    def _informers(self) -> list[Informer]:
        return [
            *self.objects.values(), self.tenants, self.pools, self.requests, self.slices,
            self.secrets, *self.default_secrets,
            *([self.services] if self.services is not None else []),
        ]  # fmt: skip

    def _key(self, event: EventType, key: str, obj: KubeObject) -> list[str]:
        return [KEY]

    def readiness(self) -> list[str]:
        return unready(self._informers())

    async def run(self) -> None:
        await self.loop.run()

    # ------------------------------------------------------------------ the world

    def world(self) -> L7World:
        tenants = self.tenant_view.every()
        objects = [o for view in self.views for o in view.every()]
        secrets = {
            k: d for ns in list(self.secret_view.keys) for k, d in self.secret_view.items(ns)
        }
        pools = {p.name: p for p in self.pool_view.every()}
        held = held_addresses(tenants, self.request_view.every())
        return L7World(tenants, objects, secrets, pools=pools, held=held)

    def admission(self, obj: ApiObject) -> list[Problem]:
        """The webhook's verdict on a create or update of `obj` (empty: admitted)."""
        if not isinstance(obj, Ingress | Gateway | HTTPRoute | TLSRoute | TCPRoute | UDPRoute):
            return []
        waiting = self.readiness()
        if waiting:
            # Only these kinds wait (the webhook answers the others): refuse until the
            # cache can say whose a hostname is.
            why = "the gateway's caches are not synced yet (" + "; ".join(waiting) + "); retry"
            return [problem(obj.ref, "", why)]
        world = self.world()
        others = [o for o in world.objects if o.ref != obj.ref]
        seen = replace(world, objects=[*others, obj])
        return problems_of(obj, vet_object(obj, seen))

    # ------------------------------------------------------------------ reconcile

    def _translate(self) -> Translation:
        """The translation, of the tenants a change touched since the last one."""
        changed = self._changed | self._requested
        self._assigning |= self._requested
        self._changed.clear()
        self._requested.clear()
        tenants = self.tenant_view.every()
        everything = self.cache.reset(tenants, self.addresses)
        if everything:
            views: list[ByNamespace[Any]] = [
                *self.views, self.slice_view, self.secret_view, self.request_view,
            ]  # fmt: skip
            changed = {ns for view in views for ns in view.keys}
        else:
            changed = self._budget(changed, tenants)
        if everything or self._assigning:
            self._assigning.clear()
            self._pools = {p.name: p for p in self.pool_view.every()}
            self._held = held_addresses(tenants, self.request_view.every())
        for namespace in changed:
            objects = [o for view in self.views for o in view.of(namespace)]
            secrets = dict(self.secret_view.items(namespace))
            self.cache.put(
                namespace, objects, self.slice_view.of(namespace), secrets,
                self.request_view.of(namespace),
            )  # fmt: skip
        result = self.cache.translation(self._pools, self._held)
        # Written again: the rebuilt tenants' objects, and those of a namespace where an
        # object changed (its status edited by someone else is put back).
        self._unwritten |= self.cache.rebuilt | changed
        return result

    def _budget(self, changed: set[str], tenants: Sequence[Tenant]) -> set[str]:
        """This turn's namespaces: a tenant translated last turn waits one turn while
        the others' changes go first (:mod:`.l7turns`); its namespace stays changed and
        the key is queued again."""
        turn = this_turn(changed, self._last_turn, self._put_off)
        self._last_turn, self._put_off = turn.now, turn.later
        if turn.later:
            self._changed |= turn.later
            self.loop.queue.add(KEY)
            names = {t.spec.namespace: t.name for t in tenants}
            for namespace in turn.later:
                self.deferred.labels(names.get(namespace, "")).inc()
        return set(turn.now)

    async def _reconcile(self, key: str) -> None:
        with self.translate_seconds.time():
            result = self._translate()
        self.translation = result
        self._count(result)
        if self.on_translation is not None:
            self.on_translation(result)
        config = result.config.model_copy(update={"default_certificate": self._default()})
        if config != self.config:
            if self.on_config is not None:
                await self.on_config(config)
            self.config = config
            self._log.info(
                "config",
                listeners=len(config.listeners),
                backends=len(config.backends),
                http_routes=len(config.http_routes),
            )
        if not self.statuses():
            return
        await self._announce(result)
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        for namespace in sorted(self._unwritten):
            for outcome in self.cache.results_of(namespace).values():
                await self._write(outcome, now)
            self._unwritten.discard(namespace)

    async def _announce(self, result: Translation) -> None:
        """One Service per dedicated address and per address a Gateway-mode request is
        served on (a copy of the shared gateway's), so the speakers announce it; those of
        addresses no longer served are deleted."""
        if self.services is None or self.address_service is None:
            return
        template = self.services.get(self.address_service)
        dedicated = result.placed
        requests = list(result.load_balancers.values())
        if template is None:
            missing = {a for a, _ in dedicated} | {a for r in requests for a in r.addresses}
            if missing:
                self._log.warning(
                    "gateway service missing: dedicated and requests' addresses are not announced",
                    service=self.address_service,
                    addresses=sorted(str(a) for a in missing),
                )
            return
        wanted = address_services(dedicated, template, requests)
        namespace = self.address_service.partition("/")[0]
        for key in self.services.list_keys():
            current = self.services.get(key)
            if current is None or LABEL_ADDRESS_OF not in _labels_of(current):
                continue
            name = current["metadata"]["name"]
            want = wanted.pop(name, None)
            if want is None:
                with contextlib.suppress(NotFound):
                    await self.client.delete(SERVICES, name, namespace)
            elif differs(current, want):
                merged = {**current, "metadata": {**current["metadata"], **want["metadata"]},
                          "spec": {**current.get("spec", {}), **want["spec"]}}  # fmt: skip
                await self.client.replace(SERVICES, merged)
        for body in wanted.values():
            await self.client.create(SERVICES, body)

    def _default(self) -> Certificate | None:
        """The operator's certificate from its Secret; None (the generated one) without
        one, or while it is missing or unusable (said once per problem)."""
        if self.default_secret is None:
            return None
        namespace, name = self.default_secret
        obj = next((o for i in self.default_secrets for k in i.list_keys()
                    if (o := i.get(k)) is not None), None)  # fmt: skip
        try:
            found = from_secret(secret_data(obj)[0] if obj else None, f"{namespace}/{name}")
        except ValueError as err:
            if self._default_problem != str(err):
                self._log.error("default certificate not used", problem=str(err))
            self._default_problem = str(err)
            return None
        self._default_problem = None
        return found

    def _count(self, result: Translation) -> None:
        """The objects gauge, counted again for the namespaces translated again."""
        for namespace, results in result.changed.items():
            counts: dict[tuple[str, str, str], int] = {}
            for outcome in results.values():
                state = "served" if outcome.accepted else outcome.refusals[0].rule.value
                key = (outcome.tenant, outcome.obj.kind, state)
                counts[key] = counts.get(key, 0) + 1
            for labels in self._counts.get(namespace, {}).keys() - counts.keys():
                self.objects_gauge.remove(*labels)
            for labels, n in counts.items():
                self.objects_gauge.labels(*labels).set(n)
            self._counts[namespace] = counts

    async def _write(self, outcome: ObjectResult, now: str) -> None:
        obj = outcome.obj
        resource = next(r for r in OBJECT_RESOURCES if r.kind == obj.kind)
        informer = self.objects.get(resource)
        raw = informer.get(f"{obj.metadata.namespace}/{obj.name}") if informer else None
        if raw is None:
            return
        namespace = obj.metadata.namespace
        status: dict[str, Any]
        if isinstance(obj, Ingress):
            status = ingress_status(outcome, self.addresses)
            await self._annotate(raw, ingress_refusal(outcome))
        elif isinstance(obj, Gateway):
            status = gateway_status(outcome, self.addresses, now)
        else:
            status = route_status(outcome, now)
        current = raw.get("status") or {}
        if any(_normal(current.get(k)) != _normal(v) for k, v in status.items()):
            with contextlib.suppress(NotFound):
                await patch_status(self.client, resource, obj.name, namespace, status)
        await self._tell(raw, outcome)

    async def _annotate(self, raw: KubeObject, refusal: str | None) -> None:
        meta = raw.get("metadata", {})
        annotations = meta.get("annotations") or {}
        if annotations.get(ANNOTATION_REFUSED) == refusal:
            return
        patch = {"metadata": {"annotations": {ANNOTATION_REFUSED: refusal}}}
        with contextlib.suppress(NotFound):
            await self.client.patch(INGRESSES, meta["name"], patch, namespace=meta.get("namespace"))

    async def _tell(self, raw: KubeObject, outcome: ObjectResult) -> None:
        meta = raw.get("metadata", {})
        key = (str(raw.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
        # A refusal, a part left out, a parent that did not take a route, a reference that
        # does not resolve (not the notes: endpoints still syncing are no news).
        told = [(reason, text) for reason, text in outcome.problems() if reason != "Note"]
        if not told:
            self._told.pop(key, None)
            return
        reason, message = told[0]
        if self._told.get(key) == message:
            return
        resource = next(r for r in OBJECT_RESOURCES if r.kind == outcome.obj.kind)
        involved = {"apiVersion": resource.api_version, "kind": resource.kind, **raw}
        if await self.recorder.record(involved, "Warning", reason, message):
            self._told[key] = message


def _labels_of(obj: KubeObject) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _parse(raw: KubeObject) -> Any:
    parsed, problems = parse_object(raw, ignore_unknown_kinds=True)
    return parsed if parsed is not None and not problems else None


def _parsed_as(kind: type[T]) -> Callable[[KubeObject], T | None]:
    def read(raw: KubeObject) -> T | None:
        parsed = _parse(raw)
        return parsed if isinstance(parsed, kind) else None

    return read


def _raw(raw: KubeObject) -> KubeObject:
    return raw


def _secret(raw: KubeObject) -> dict[str, bytes]:
    return secret_data(raw)[0]


def _normal(value: Any) -> Any:
    """Status as compared: empty lists and absent keys alike."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


__all__ = ["COMPONENT", "GatewayControl"]
