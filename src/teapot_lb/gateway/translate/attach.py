"""A route's parentRefs → the listeners it attaches to (Gateway API's rules: sectionName,
port, protocol, allowedRoutes) and its hostnames there (the intersection with the
listener's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from teapot_lb.model.gateway_api import Gateway, ListenerProtocol
from teapot_lb.model.gateway_api import HTTPRoute as ApiHTTPRoute
from teapot_lb.model.gateway_api import TCPRoute as ApiTCPRoute
from teapot_lb.model.gateway_api import TLSRoute as ApiTLSRoute
from teapot_lb.model.gateway_api import UDPRoute as ApiUDPRoute
from teapot_lb.tenancy.l7vet import L7Rule, domain_holds, mirrored_name, source_of

from .build import Build
from .listeners import config_listeners
from .results import Condition, ObjectResult, ParentResult

_ROUTE_PROTOCOLS = {
    "HTTPRoute": (ListenerProtocol.HTTP, ListenerProtocol.HTTPS),
    "TLSRoute": (ListenerProtocol.TLS,),
    "TCPRoute": (ListenerProtocol.TCP,),
    "UDPRoute": (ListenerProtocol.UDP,),
}


def hostnames_meet(route_hosts: Sequence[str], listener_host: str | None) -> list[str] | None:
    """The hostnames a route serves on a listener (Gateway API: the intersection of the
    route's and the listener's; None when they do not meet)."""
    if listener_host is None:
        return list(route_hosts)
    if not route_hosts:
        return [listener_host]
    met: list[str] = []
    for host in route_hosts:
        if host == listener_host or (
            listener_host.startswith("*.") and domain_holds(listener_host, host)
        ):
            met.append(host)
        elif host.startswith("*.") and domain_holds(host, listener_host):
            met.append(listener_host)
    return met or None


_ADDRESS_RULES = (L7Rule.ADDRESS_NOT_USABLE, L7Rule.ADDRESS_NOT_ASSIGNED)

_NOT_ATTACHED = {
    "NoMatchingParent": "the Gateway has no listener of this sectionName and port",
    "NotAllowedByListeners": "no listener of the Gateway allows this route (protocol, "
    "allowedRoutes namespaces or kinds)",
    "NoMatchingListenerHostname": "none of the route's hostnames meets a listener's hostname",
    "HostnameNotAllowed": "a route without hostnames on a listener without a hostname would "
    "catch every hostname of the shared addresses: name hostnames (or give the Gateway a "
    "dedicated address: spec.addresses)",
}


def attach(
    build: Build,
    route: ApiHTTPRoute | ApiTLSRoute | ApiTCPRoute | ApiUDPRoute,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> list[tuple[tuple[str, ...], list[str], Gateway]]:
    """Per parentRef: the config listeners the route attaches to, its hostnames there."""
    source = source_of(route)
    namespace = route.metadata.namespace or ""
    out: list[tuple[tuple[str, ...], list[str], Gateway]] = []
    hosts = list(route.spec.hostnames) if isinstance(route, ApiHTTPRoute | ApiTLSRoute) else []
    for parent in route.spec.parent_refs:
        pr = ParentResult(parent)
        result.parents.append(pr)
        gw_name = mirrored_name(source.cluster, parent.namespace or source.namespace, parent.name)
        found = gateways.get(f"{namespace}/{gw_name}")
        if found is None or not found[1].accepted:
            why = "is not an accepted Teapot Gateway"
            if found is not None and found[1].refusals[0].rule in _ADDRESS_RULES:
                why = f"has no address ({found[1].refusals[0]})"
            pr.conditions.append(
                Condition("Accepted", False, "NoMatchingParent", f"Gateway {parent.name} {why}")
            )
            continue
        gw, gw_result = found
        listeners: list[str] = []
        served_hosts: list[str] = []
        # No listener of that sectionName and port: NoMatchingParent (Gateway API).
        reason = "NoMatchingParent"
        for listener in gw.spec.listeners:
            if parent.section_name and listener.name != parent.section_name:
                continue
            if parent.port and listener.port != parent.port:
                continue
            if reason == "NoMatchingParent":
                reason = "NotAllowedByListeners"
            if listener.protocol not in _ROUTE_PROTOCOLS[route.kind]:
                continue
            allowed = listener.allowed_routes.namespaces.from_
            if allowed != "All" and source_of(gw).namespace != source.namespace:
                continue
            kinds = [k.get("kind") for k in listener.allowed_routes.kinds]
            if kinds and route.kind not in kinds:
                continue  # allowedRoutes.kinds names other kinds
            met = hostnames_meet(hosts, listener.hostname)
            if met is None:
                reason = "NoMatchingListenerHostname"
                continue
            # A hostname-less HTTPRoute takes every hostname: on the Gateway's own
            # address as Gateway API says, never on the shared addresses.
            own = route.kind == "HTTPRoute" and gw_result.address is not None
            if route.kind in ("HTTPRoute", "TLSRoute") and not met and not own:
                reason = "HostnameNotAllowed"
                continue
            listeners += config_listeners(build, listener, gw_result)
            served_hosts += met
            if listener.protocol == ListenerProtocol.HTTPS and listener.tls is not None:
                for ref in listener.tls.certificate_refs:
                    build.certificate(gw, ref.name, met, result.notes)
            gw_result.listeners[listener.name].attached += 1
        if not listeners:
            pr.conditions.append(Condition("Accepted", False, reason, _NOT_ATTACHED[reason]))
            continue
        pr.conditions.append(Condition("Accepted", True, "Accepted"))
        out.append((tuple(dict.fromkeys(listeners)), sorted(set(served_hosts)), gw))
    return out


__all__ = ["attach", "hostnames_meet"]
