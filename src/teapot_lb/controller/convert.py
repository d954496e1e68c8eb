"""From the object model to the IPAM's inputs: pools, requests and holdings (pure)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from teapot_lb import ipam
from teapot_lb.model import AddressPool, IPAddress, Service


def pool_of(pool: AddressPool) -> ipam.Pool:
    """The IPAM's view of a (validated) AddressPool; its name is the pool's name."""
    scope = pool.spec.service_allocation
    return ipam.Pool(
        name=pool.name,
        ranges=tuple(pool.address_ranges()),
        auto_assign=pool.spec.auto_assign,
        avoid_buggy_ips=pool.spec.avoid_buggy_ips,
        namespaces=frozenset(scope.namespaces) if scope else frozenset(),
        namespace_selectors=tuple(scope.namespace_selectors) if scope else (),
        service_selectors=tuple(scope.service_selectors) if scope else (),
        priority=scope.priority if scope else None,
    )


def request_of(
    service: Service, namespace_labels: Mapping[str, str] | None = None, key: str = ""
) -> ipam.ServiceRequest:
    """What the IPAM needs to know of a LoadBalancer Service.

    Raises ValueError (naming the bad entry) when the requested IPs do not parse.
    Unknown namespace labels count as none. When `spec.ipFamilies` is empty (an API
    server fills it in; a manifest may not), the families of the requested IPs are used.
    `key`: the Service's `namespace/name`, if the caller holds it (the request keeps it).
    """
    spec = service.spec
    requested = tuple(service.requested_ips())
    families = tuple(spec.ip_families)
    if not families and requested:
        families = tuple(dict.fromkeys(ipam.IPFamily.of(ip) for ip in requested))
    policy = spec.ip_family_policy or ipam.IPFamilyPolicy.SINGLE_STACK
    return ipam.ServiceRequest(
        namespace=service.namespace,
        name=service.name,
        # The maps are the objects' own (never changed in place), not copies: at 100k
        # Services, three copies each were a tenth of the assignment's memory.
        labels=service.metadata.labels,
        namespace_labels=namespace_labels or {},
        ip_family_policy=policy,
        ip_families=families or (ipam.IPFamily.V4,),
        requested_ips=requested,
        requested_pool=service.requested_pool,
        sharing_key=service.sharing_key,
        ports=_port_set(tuple((p.protocol.value, p.port) for p in spec.ports)),
        external_traffic_policy=ipam.TrafficPolicy(spec.external_traffic_policy.value),
        selector=spec.selector,
        key=key,
    )


@functools.lru_cache(maxsize=4096)
def _port_set(ports: tuple[ipam.Port, ...]) -> frozenset[ipam.Port]:
    """One frozenset per distinct set of ports (most Services have one of a few)."""
    return frozenset(ports)


def held_ips(service: Service) -> tuple[IPAddress, ...]:
    """The IPs a Service holds: those in its `status.loadBalancer.ingress`, once each."""
    return tuple(dict.fromkeys(service.ingress_ips()))
