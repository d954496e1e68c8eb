"""One tenant's part of the config (built from its objects alone) and the merge of the
parts into one config."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.config import (
    Backend,
    Certificate,
    GatewayConfig,
    HTTPRoute,
    Listener,
    Protocol,
    StreamRoute,
    TLSRoute,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api import Gateway
from teapot_lb.model.gateway_api import HTTPRoute as ApiHTTPRoute
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.l7address import Dedicated
from teapot_lb.tenancy.l7vet import L7Refusal, L7Rule

from .backends import SliceKey, service_backend, slices_by_service
from .build import BackendAsk, Build
from .http_routes import add_http_route
from .ingress import add_ingress
from .listeners import add_gateway
from .load_balancers import add_load_balancers
from .results import Changed, LoadBalancerResult, ObjectResult, Results, Translation
from .stream_routes import add_stream_route
from .vetting import Vetted


@dataclass(frozen=True)
class Part:
    """What one tenant's objects add to the config: a tenant's Gateways, routes, backends
    and certificates are its namespace's only, so a part is built from that tenant's
    objects, slices and Secrets alone (with its vetting and dedicated addresses). Routes
    in :func:`~.vetting.object_order`."""

    results: dict[ObjectRef, ObjectResult]
    listeners: dict[str, Listener]
    dedicated: dict[str, IPAddress]
    certificates: dict[str, Certificate]
    offered: dict[str, set[IPAddress | None]]
    backends: dict[str, Backend]
    http_routes: tuple[HTTPRoute, ...]
    tls_routes: tuple[TLSRoute, ...]
    tcp_routes: tuple[StreamRoute, ...]
    udp_routes: tuple[StreamRoute, ...]
    asked: Mapping[str, BackendAsk]
    """How each backend was built (:func:`with_endpoints` builds them again)."""
    by_service: Mapping[SliceKey, Sequence[KubeObject]]
    """The slices it was built from, by whose endpoints they hold."""
    load_balancers: dict[ObjectRef, LoadBalancerResult]
    """The results of its Gateway-mode TenantLoadBalancers (:mod:`.load_balancers`)."""


def build_part(
    vetted: Sequence[Vetted],
    dedicated: Dedicated,
    secrets: Mapping[str, Mapping[str, bytes]],
    slices: Sequence[KubeObject],
    addresses: tuple[IPAddress, ...],
    requests: Sequence[TenantLoadBalancer] = (),
    owner: Tenant | None = None,
    pools: Mapping[str, AddressPool] | None = None,
) -> Part:
    """One tenant's part of the config and its objects' results. `vetted` in
    :func:`~.vetting.object_order`; `dedicated`: the addresses given (at least this tenant's);
    `slices` and `secrets`: (at least) those of the tenant's namespace; `requests`: its
    TenantLoadBalancers (those of Tenant `owner`'s namespace), served inside its
    allocation of `pools`."""
    build = Build(secrets, slices, addresses)
    results: dict[ObjectRef, ObjectResult] = {}
    for v in vetted:
        ref = v.obj.ref
        result = ObjectResult(
            v.obj, tenant=v.owner.name, refusals=list(v.refusals), dropped=list(v.dropped)
        )
        refusal = dedicated.refused.get(ref)
        if refusal is not None:
            result.refusals.append(
                L7Refusal(L7Rule(refusal.reason), refusal.field, refusal.message)
            )
        result.address = dedicated.addresses.get(ref)
        if result.address is not None:
            build.placed[ref] = result.address
        results[ref] = result
    gateways: dict[str, tuple[Gateway, ObjectResult]] = {}
    for v in vetted:
        obj, owner = v.obj, v.owner
        result = results[obj.ref]
        if isinstance(obj, Gateway):
            gateways[f"{obj.metadata.namespace}/{obj.name}"] = (obj, result)
        if not result.accepted:
            continue
        if isinstance(obj, Ingress):
            add_ingress(build, obj, owner, result)
        elif isinstance(obj, Gateway):
            add_gateway(build, obj, owner, result)
        elif isinstance(obj, ApiHTTPRoute):
            add_http_route(build, obj, owner, gateways, result)
        else:
            add_stream_route(build, obj, owner, gateways, result)
    # After the objects: a socket one of them takes is seen (and kept).
    load_balancers = (
        add_load_balancers(build, requests, owner, pools or {}) if owner is not None else {}
    )
    return Part(
        results, build.listeners, build.dedicated, build.certificates, build.offered,
        build.backends, tuple(build.http_routes), tuple(build.tls_routes),
        tuple(build.tcp_routes), tuple(build.udp_routes), build.asked, build.by_service,
        load_balancers,
    )  # fmt: skip


def with_endpoints(part: Part, slices: Sequence[KubeObject]) -> Part | None:
    """`part` from new `slices` when nothing else changed (the same objects, vetting,
    addresses and Secrets): only the backends reading a slice that changed are built again,
    the rest (routes, listeners, results) is `part`'s own, the same objects. None when a
    backend built again would change more than itself: its Service found or not (routes
    answer 500 for a missing one) or what it notes on its object's result (endpoints
    outside the tenant's networks, a port not found) — then the whole part is built
    again (:func:`build_part`), so the result is always what that gives."""
    by_service = slices_by_service(slices)
    old = part.by_service
    backends: dict[str, Backend] | None = None
    for name, ask in part.asked.items():
        if old.get(ask.key, ()) == by_service.get(ask.key, ()):
            continue
        noted = ObjectResult(ask.obj)
        backend, found = service_backend(
            name, ask.obj, ask.tenant, ask.service, ask.port, by_service, noted
        )
        if found != ask.found or tuple(noted.notes) != ask.notes:
            return None
        if backends is None:
            backends = dict(part.backends)
        backends[name] = backend
    return replace(part, backends=part.backends if backends is None else backends,
                   by_service=by_service)  # fmt: skip


def shared_listeners(addresses: tuple[IPAddress, ...]) -> dict[str, Listener]:
    """The listeners always bound: a name nobody serves gets the gateway's 404 (HTTPS:
    behind the gateway's own certificate), not a refused connection."""
    build = Build({}, (), addresses)
    build.shared(Protocol.HTTP)
    build.shared(Protocol.HTTPS)
    return build.listeners


_PIECES: dict[str, Callable[[Part], Sequence[Any]]] = {
    "certificates": lambda p: tuple(p.certificates.values()),
    "backends": lambda p: tuple(p.backends.values()),
    "http_routes": attrgetter("http_routes"),
    "tls_routes": attrgetter("tls_routes"),
    "tcp_routes": attrgetter("tcp_routes"),
    "udp_routes": attrgetter("udp_routes"),
}
"""The config's lists, each the parts' pieces joined in namespace order."""


class Merged:
    """The config of the tenants' parts, kept: :meth:`put` a namespace's part (again) and
    only its own pieces are replaced, so a change costs that part, not every tenant's.

    The parts join in namespace order (a route's place among other tenants' decides
    nothing: routing orders by age, namespace and name first,
    :mod:`teapot_lb.gateway.routing`). A part's results, requests' results and
    certificates are its namespace's alone (names start with the namespace); listeners
    may be several parts' (the shared ones, an address two requests hold): the first
    part's in namespace order is kept, merged again over every part when a part's
    listeners change (rare: a dedicated address given or taken)."""

    def __init__(self, addresses: tuple[IPAddress, ...]) -> None:
        self.addresses = addresses
        self._parts: dict[str, Part] = {}
        self._order: list[str] = []
        """The namespaces with a part, in order."""
        self._lengths: dict[str, list[int]] = {kind: [] for kind in _PIECES}
        """Per config list the length of each part's piece (in :attr:`_order`)."""
        self._lists: dict[str, list[Any]] = {kind: [] for kind in _PIECES}
        self._results: dict[str, Mapping[ObjectRef, ObjectResult]] = {}
        """Per namespace with a part, its results."""
        self._load_balancers: dict[ObjectRef, LoadBalancerResult] = {}
        self._offered_at: dict[IPAddress | None, list[str]] = {}
        """Per place (a dedicated address, None for the shared ones) the names of the
        certificates offered there, sorted."""
        self._listeners: dict[str, Listener] | None = None
        """Every part's listeners without their certificates (None: merge again)."""
        self._dedicated: dict[str, IPAddress] = {}
        self._served: dict[str, Listener] = {}
        """The listeners as served (HTTPS ones with their certificates)."""
        self._places: set[IPAddress | None] = set()
        """Places whose certificates changed since the last :meth:`translation`."""
        self._placed: dict[str, frozenset[tuple[IPAddress, str]]] = {}
        """Per namespace with any, its objects' dedicated addresses with their tenant."""

    @property
    def namespaces(self) -> Sequence[str]:
        """The namespaces with a part, in order."""
        return self._order

    def put(self, namespace: str, part: Part | None) -> None:
        """`namespace`'s part now (None: it has none)."""
        old = self._parts.get(namespace)
        if old is part:
            return
        at = bisect.bisect_left(self._order, namespace)
        for kind, piece in _PIECES.items():
            lengths, start = self._lengths[kind], sum(self._lengths[kind][:at])
            size = lengths[at] if old is not None else 0
            new = piece(part) if part is not None else ()
            self._lists[kind][start : start + size] = new
            if old is None:
                lengths.insert(at, len(new))
            elif part is None:
                del lengths[at]
            else:
                lengths[at] = len(new)
        if old is not None:
            for ref in old.load_balancers:
                del self._load_balancers[ref]
            self._offer(old, bisect_remove)
        if part is not None:
            self._load_balancers.update(part.load_balancers)
            self._offer(part, bisect.insort)
        self._placed.pop(namespace, None)
        self._results.pop(namespace, None)
        if part is not None:
            self._results[namespace] = part.results
            placed = {(r.address, r.tenant) for r in part.results.values() if r.address}
            if placed:
                self._placed[namespace] = frozenset(placed)
        if (
            old is None
            or part is None
            or (old.listeners, old.dedicated) != (part.listeners, part.dedicated)
        ):
            self._listeners = None
        if part is None:
            del self._parts[namespace]
            del self._order[at]
        else:
            if old is None:
                self._order.insert(at, namespace)
            self._parts[namespace] = part

    def _offer(self, part: Part, change: Callable[[list[str], str], None]) -> None:
        for name in part.certificates:
            for place in part.offered[name]:
                change(self._offered_at.setdefault(place, []), name)
                self._places.add(place)

    def translation(self, changed: Changed) -> Translation:
        """The config of the parts put; `changed`: the namespaces built again
        (:attr:`~.results.Translation.changed`)."""
        if self._listeners is None:
            self._listeners = shared_listeners(self.addresses)
            self._dedicated = {}
            for namespace in self._order:
                part = self._parts[namespace]
                for name, x in part.listeners.items():
                    self._listeners.setdefault(name, x)
                self._dedicated.update(part.dedicated)
            self._served = dict(self._listeners)
            self._places = {None, *self._dedicated.values()}
        # HTTPS listeners offer every certificate of their objects (SNI picks; the
        # gateway's own by default, a dedicated listener's too): the shared ones every
        # tenant's on the shared addresses, a dedicated one its tenant's objects' there.
        if self._places:
            for name, x in self._listeners.items():
                place = self._dedicated.get(name)
                if x.protocol is Protocol.HTTPS and place in self._places:
                    certs = tuple(self._offered_at.get(place, ()))
                    self._served[name] = x.model_copy(update={"certificates": certs})
            self._places = set()
        lists = self._lists
        config = GatewayConfig.model_construct(
            listeners=tuple(self._served.values()),
            certificates=tuple(lists["certificates"]),
            backends=tuple(lists["backends"]),
            http_routes=tuple(lists["http_routes"]),
            tls_routes=tuple(lists["tls_routes"]),
            tcp_routes=tuple(lists["tcp_routes"]),
            udp_routes=tuple(lists["udp_routes"]),
            default_certificate=None,
        )
        # Copies: a translation handed out stays as it was when the parts change.
        return Translation(
            config,
            Results(dict(self._results)),
            self.addresses,
            changed,
            dict(self._load_balancers),
            frozenset().union(*self._placed.values()),
        )


def bisect_remove(sorted_names: list[str], name: str) -> None:
    del sorted_names[bisect.bisect_left(sorted_names, name)]


def merge(
    parts: Mapping[str, Part], addresses: tuple[IPAddress, ...], changed: Changed
) -> Translation:
    """The config of the tenants' parts (by namespace), from scratch (:class:`Merged`)."""
    merged = Merged(addresses)
    for namespace, part in parts.items():
        merged.put(namespace, part)
    return merged.translation(changed)


__all__ = ["Merged", "Part", "build_part", "merge", "shared_listeners", "with_endpoints"]
