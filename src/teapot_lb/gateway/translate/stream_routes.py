"""TLSRoutes (passthrough by SNI), TCPRoutes and UDPRoutes → stream routes."""

from __future__ import annotations

from collections.abc import Mapping

from teapot_lb.gateway.config import BackendRef, RouteKind, StreamRoute, TLSRoute
from teapot_lb.model.gateway_api import Gateway
from teapot_lb.model.gateway_api import TCPRoute as ApiTCPRoute
from teapot_lb.model.gateway_api import TLSRoute as ApiTLSRoute
from teapot_lb.model.gateway_api import UDPRoute as ApiUDPRoute
from teapot_lb.model.tenancy import Tenant

from .attach import attach
from .build import Build, created, route_owner
from .results import ObjectResult


def add_stream_route(
    build: Build,
    route: ApiTLSRoute | ApiTCPRoute | ApiUDPRoute,
    tenant: Tenant,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> None:
    kind = {
        "TLSRoute": RouteKind.TLS_ROUTE,
        "TCPRoute": RouteKind.TCP_ROUTE,
        "UDPRoute": RouteKind.UDP_ROUTE,
    }[route.kind]
    for listeners, hosts, _gw in attach(build, route, gateways, result):
        backends = tuple(
            BackendRef(
                backend=build.backend(route, tenant, ref.name, ref.port or 0, result),
                weight=ref.weight,
            )
            for rule in route.spec.rules
            for ref in rule.backend_refs
        )
        owner = route_owner(route, tenant, kind)
        if isinstance(route, ApiTLSRoute):
            build.tls_routes.append(
                TLSRoute(owner=owner, listeners=listeners, hostnames=tuple(hosts),
                         created=created(route), backends=backends)
            )  # fmt: skip
        elif isinstance(route, ApiTCPRoute):
            build.tcp_routes.append(
                StreamRoute(owner=owner, listeners=listeners, backends=backends)
            )
        else:
            build.udp_routes.append(
                StreamRoute(owner=owner, listeners=listeners, backends=backends)
            )


__all__ = ["add_stream_route"]
