"""Gateway-mode TenantLoadBalancers (provider `proxy`) → L4 listeners and stream routes.

Each port of the request's `spec.ports`, on each address the manager assigned it (its
status), is a listener of its own on the gateway: TCP (HAProxy, `mode tcp`) or UDP
(nginx's stream module, as UDPRoutes are), proxying to the request's backend nodes at the
port's `nodePort`: the nodes route mode would take as next hops
(:func:`~teapot_lb.tenancy.routes.next_hops`: with `externalTrafficPolicy: Local` those
holding a ready endpoint, with `Cluster` every node while one holds a ready endpoint), of
the assigned addresses' families.
A node address outside the Tenant's `nodeNetworks` is never served (noted), whatever the
Tenant's `gatewayBackends` says: a request carries its nodes, not its pods.

Refused, each naming the field: SCTP (`spec.ports[i].protocol`), a port without a nodePort
(`spec.ports[i].nodePort`), an address outside the Tenant's allocation (the last line
before the network, as the speakers' for route mode), one of the gateway's shared
addresses, or an
`address:port` a listener of the tenant's Ingresses or Gateways (or an older request)
already takes (`status.addresses[j]`). The older object keeps a socket: the address layer
already sees to it (a Gateway or Ingress is not given an address a request holds,
:mod:`teapot_lb.tenancy.l7address`; a request is not given a dedicated address, the
manager reserves them), so a clash here is a request younger than what it meets, refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from ipaddress import ip_address

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Endpoint,
    Owner,
    Protocol,
    RouteKind,
    StreamRoute,
)
from teapot_lb.model.common import ObjectRef, creation_order
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.service import Protocol as PortProtocol
from teapot_lb.model.tenancy import (
    PROXY_PROVIDER,
    GatewayBackends,
    Tenant,
    TenantLoadBalancer,
    TenantPort,
)
from teapot_lb.tenancy.allocation import is_allocated
from teapot_lb.tenancy.l7address import ADDRESS_NOT_USABLE
from teapot_lb.tenancy.routes import next_hops

from .backends import allowed_networks
from .build import Build, config_name
from .results import LoadBalancerResult, PortRefusal

PORT_UNAVAILABLE = "PortUnavailable"
"""The reason of a socket another object takes (Gateway API's listener reason)."""
UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
NO_NODE_PORT = "NoNodePort"
UNSUPPORTED_SOURCE_RANGES = "UnsupportedSourceRanges"
PROVIDER_NOT_ALLOWED = "ProviderNotAllowed"

_PROTOCOL = {PortProtocol.TCP: Protocol.TCP, PortProtocol.UDP: Protocol.UDP}


def served_by_gateway(request: TenantLoadBalancer, tenant: Tenant) -> bool:
    """Whether the shared gateway builds `request`: its provider is `proxy`."""
    return tenant.provider_for(request) == PROXY_PROVIDER


def assigned(request: TenantLoadBalancer) -> tuple[IPAddress, ...]:
    """The addresses the manager assigned (its status; none: nothing to serve yet)."""
    out: list[IPAddress] = []
    for text in request.status.addresses if request.status else []:
        try:
            out.append(ip_address(text))
        except ValueError:
            continue  # the CRD's schema keeps these out
    return tuple(out)


def port_refusal(i: int, port: TenantPort) -> PortRefusal | None:
    """Why port `i` of a request cannot be served by the gateway at all (None: it can)."""
    if port.protocol not in _PROTOCOL:
        return PortRefusal(
            f"spec.ports[{i}].protocol", UNSUPPORTED_PROTOCOL,
            f"{port.protocol} is not served by the shared gateway (TCP and UDP only); "
            "use provider route",
        )  # fmt: skip
    if port.node_port is None:
        return PortRefusal(
            f"spec.ports[{i}].nodePort", NO_NODE_PORT,
            f"port {port.port}/{port.protocol} has no nodePort: the gateway sends to the "
            "nodes at the nodePort (allocateLoadBalancerNodePorts must not be false)",
        )  # fmt: skip
    return None


def source_ranges_refusal(request: TenantLoadBalancer) -> PortRefusal | None:
    """Why `request` is not served at all when it limits its clients (None: it does not).
    The gateway does not filter sources, and the tenant's kube-proxy cannot: it sees the
    gateway's connections to the nodePort, not the clients'. Refused, not served open."""
    if not request.spec.load_balancer_source_ranges:
        return None
    return PortRefusal(
        "spec.loadBalancerSourceRanges", UNSUPPORTED_SOURCE_RANGES,
        "the shared gateway does not filter clients by source address, and the tenant's "
        "kube-proxy cannot behind it; remove loadBalancerSourceRanges or use provider route "
        "(the address reaches the nodes unchanged and kube-proxy filters)",
    )  # fmt: skip


def port_refusals(request: TenantLoadBalancer) -> list[PortRefusal]:
    """Everything of `request` the gateway cannot serve: its source ranges, then each port
    (pure: the provider's vetting)."""
    ports = [r for i, port in enumerate(request.spec.ports) if (r := port_refusal(i, port))]
    ranges = source_ranges_refusal(request)
    return [ranges, *ports] if ranges is not None else ports


def add_load_balancers(
    build: Build,
    requests: Sequence[TenantLoadBalancer],
    tenant: Tenant,
    pools: Mapping[str, AddressPool],
) -> dict[ObjectRef, LoadBalancerResult]:
    """The tenant's Gateway-mode requests (after its Ingresses and Gateways, so that a
    socket they take is seen), oldest first; each one's result. `pools`: the
    AddressPools by name (an address is served only inside the tenant's allocation)."""
    out: dict[ObjectRef, LoadBalancerResult] = {}
    for request in sorted(requests, key=creation_order):
        if served_by_gateway(request, tenant) and assigned(request):
            out[request.ref] = add_load_balancer(build, request, tenant, pools)
    return out


def add_load_balancer(
    build: Build, request: TenantLoadBalancer, tenant: Tenant, pools: Mapping[str, AddressPool]
) -> LoadBalancerResult:
    result = LoadBalancerResult(request, tenant=tenant.name)
    if PROXY_PROVIDER not in tenant.spec.allowed_providers():
        allowed = ", ".join(tenant.spec.allowed_providers()) or "none"
        result.refusals.append(
            PortRefusal("spec.provider", PROVIDER_NOT_ALLOWED,
                        f"Tenant {tenant.name} does not allow provider {PROXY_PROVIDER} "
                        f"(its providers: {allowed})")
        )  # fmt: skip
        return result
    ranges = source_ranges_refusal(request)
    if ranges is not None:  # (the manager refuses it first: a request vetted by an older one)
        result.refusals.append(ranges)
        return result
    addresses = assigned(request)
    networks = allowed_networks(tenant, GatewayBackends.NODE_PORTS)
    nodes: list[IPAddress] = []
    for version in sorted({a.version for a in addresses}):
        for node in next_hops(request, version):
            if any(node in net for net in networks):
                nodes.append(node)
            else:
                result.notes.append(
                    f"spec.backends: node address {node} is outside the node networks of "
                    f"Tenant {tenant.name}; not served"
                )
    namespace = request.namespace
    owner = Owner(tenant=tenant.name, kind=RouteKind.SERVICE, namespace=namespace,
                  name=request.name)  # fmt: skip
    for i, port in enumerate(request.spec.ports):
        refused, node_port = port_refusal(i, port), port.node_port
        if refused is not None or node_port is None:
            result.refusals += [refused] if refused is not None else []
            continue
        protocol = _PROTOCOL[port.protocol]
        listeners: list[str] = []
        for j, address in enumerate(addresses):
            taken = _taken_by(build, address, port.port, protocol, tenant, pools)
            if taken is not None:
                result.refusals.append(
                    PortRefusal(f"status.addresses[{j}]", taken[0],
                                f"{address}:{port.port}/{protocol} {taken[1]}; "
                                f"spec.ports[{i}] is not served there")
                )  # fmt: skip
                continue
            name = build.listener(protocol, port.port, address)
            build.owners[name] = f"TenantLoadBalancer {namespace}/{request.name}"
            listeners.append(name)
            result.served.append(f"{address}:{port.port}/{protocol}")
            if address not in result.addresses:
                result.addresses.append(address)
        if not listeners:
            continue
        endpoints = [Endpoint(address=node, port=node_port) for node in nodes]
        result.backends += len(endpoints)
        backend = config_name(namespace, "lb", request.name, str(port.port), protocol.value)
        build.backends[backend] = Backend(name=backend, endpoints=tuple(endpoints), owner=owner)
        route = StreamRoute(owner=owner, listeners=tuple(listeners),
                            backends=(BackendRef(backend=backend),))  # fmt: skip
        (build.tcp_routes if protocol is Protocol.TCP else build.udp_routes).append(route)
    return result


def _taken_by(
    build: Build,
    address: IPAddress,
    port: int,
    protocol: Protocol,
    tenant: Tenant,
    pools: Mapping[str, AddressPool],
) -> tuple[str, str] | None:
    """Why the socket is not the request's, as (reason, text); None: it is free."""
    if address in build.addresses:
        return ADDRESS_NOT_USABLE, "is a shared address of the gateway, every tenant's"
    if not is_allocated(address, tenant, pools):
        # (the manager assigns none such: a status written by hand, or a view behind)
        return ADDRESS_NOT_USABLE, f"is outside the allocation of Tenant {tenant.name}"
    udp = protocol is Protocol.UDP
    for name, listener in build.listeners.items():
        if (listener.address, listener.port) != (address, port):
            continue
        if (listener.protocol is Protocol.UDP) == udp:
            holder = build.owners.get(name, "an Ingress or Gateway of the tenant")
            return PORT_UNAVAILABLE, f"is taken by {holder} (older: it keeps it)"
    return None


__all__ = [
    "NO_NODE_PORT",
    "PORT_UNAVAILABLE",
    "PROVIDER_NOT_ALLOWED",
    "UNSUPPORTED_PROTOCOL",
    "UNSUPPORTED_SOURCE_RANGES",
    "add_load_balancer",
    "add_load_balancers",
    "assigned",
    "port_refusal",
    "port_refusals",
    "served_by_gateway",
    "source_ranges_refusal",
]
