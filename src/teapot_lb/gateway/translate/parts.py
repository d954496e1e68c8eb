"""One tenant's part of the config (built from its objects alone) and the merge of the
parts into one config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import chain
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
from .results import Changed, LoadBalancerResult, ObjectResult, Translation
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


def merge(parts: Sequence[Part], addresses: tuple[IPAddress, ...], changed: Changed) -> Translation:
    """The config of the tenants' parts, in namespace order (a route's place among other
    tenants' decides nothing: routing orders by age, namespace and name first,
    :mod:`teapot_lb.gateway.routing`); `changed`: the namespaces built again
    (:attr:`~.results.Translation.changed`)."""
    listeners = shared_listeners(addresses)
    dedicated: dict[str, IPAddress] = {}
    offered: dict[str, set[IPAddress | None]] = {}
    results: dict[ObjectRef, ObjectResult] = {}
    load_balancers: dict[ObjectRef, LoadBalancerResult] = {}
    for part in parts:
        for name, x in part.listeners.items():
            listeners.setdefault(name, x)
        dedicated.update(part.dedicated)
        offered.update(part.offered)
        results.update(part.results)
        load_balancers.update(part.load_balancers)
    # HTTPS listeners offer every certificate of their objects (SNI picks; the gateway's
    # own by default, a dedicated listener's too): the shared ones every tenant's on the
    # shared addresses, a dedicated one its tenant's objects' there.
    certificates = tuple(chain.from_iterable(p.certificates.values() for p in parts))
    names = sorted(c.name for c in certificates)
    for name, x in listeners.items():
        if x.protocol is Protocol.HTTPS:
            place = dedicated.get(name)
            certs = tuple(c for c in names if place in offered[c])
            listeners[name] = x.model_copy(update={"certificates": certs})

    def each(kind: str) -> tuple[Any, ...]:
        return tuple(chain.from_iterable(map(attrgetter(kind), parts)))

    config = GatewayConfig.model_construct(
        listeners=tuple(listeners.values()),
        certificates=certificates,
        backends=tuple(chain.from_iterable(p.backends.values() for p in parts)),
        http_routes=each("http_routes"),
        tls_routes=each("tls_routes"),
        tcp_routes=each("tcp_routes"),
        udp_routes=each("udp_routes"),
        default_certificate=None,
    )
    return Translation(config, results, addresses, changed, load_balancers)


__all__ = ["Part", "build_part", "merge", "shared_listeners", "with_endpoints"]
