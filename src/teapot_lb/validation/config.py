"""ConfigSet: a whole configuration (pools, peers, advertisements, Services...) sorted by kind."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate

from teapot_lb.kept import Kept
from teapot_lb.model.bfd import BFDProfile
from teapot_lb.model.bgp import BGPAdvertisement, BGPPeer
from teapot_lb.model.common import IPAddress, ObjectRef
from teapot_lb.model.gateway_api import (
    Gateway,
    GatewayClass,
    HTTPRoute,
    TCPRoute,
    TLSRoute,
    UDPRoute,
)
from teapot_lb.model.ingress import Ingress, IngressClass
from teapot_lb.model.kinds import KINDS, REGISTRY, ApiObject, Kind, KindInfo
from teapot_lb.model.l2 import L2Advertisement
from teapot_lb.model.ovn import OVNAdvertisement
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.service import EndpointSlice, Namespace, Node, Service
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantNodes
from teapot_lb.model.vip import VIPAdvertisement

OwnChecks = tuple[list[IPAddress] | None, list[Problem]]

# The kinds a configuration holds: every kind of the registry that manifests may hold.
MANIFEST_KINDS = tuple(info for info in KINDS if info.in_manifests)


@dataclass(frozen=True)
class ConfigSet:
    """Objects to validate together, by kind, in the order given.

    One list per kind of :data:`MANIFEST_KINDS`, named as the kind's view field in the
    registry (:mod:`teapot_lb.model.kinds`), so that filing objects needs no list of kinds.

    `unparsed` names objects that exist but could not be read (their own problems are
    reported elsewhere); references to them are not reported again as unknown. `secrets`:
    see the field.
    """

    pools: list[AddressPool] = field(default_factory=list)
    bgp_peers: list[BGPPeer] = field(default_factory=list)
    bgp_advertisements: list[BGPAdvertisement] = field(default_factory=list)
    bfd_profiles: list[BFDProfile] = field(default_factory=list)
    l2_advertisements: list[L2Advertisement] = field(default_factory=list)
    vip_advertisements: list[VIPAdvertisement] = field(default_factory=list)
    ovn_advertisements: list[OVNAdvertisement] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    endpoint_slices: list[EndpointSlice] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    tenants: list[Tenant] = field(default_factory=list)
    tenant_load_balancers: list[TenantLoadBalancer] = field(default_factory=list)
    tenant_nodes: list[TenantNodes] = field(default_factory=list)
    ingresses: list[Ingress] = field(default_factory=list)
    ingress_classes: list[IngressClass] = field(default_factory=list)
    gateway_classes: list[GatewayClass] = field(default_factory=list)
    gateways: list[Gateway] = field(default_factory=list)
    http_routes: list[HTTPRoute] = field(default_factory=list)
    tls_routes: list[TLSRoute] = field(default_factory=list)
    tcp_routes: list[TCPRoute] = field(default_factory=list)
    udp_routes: list[UDPRoute] = field(default_factory=list)
    unparsed: frozenset[ObjectRef] = frozenset()
    # Secrets by `namespace/name` (their keys), when the set knows which exist (standalone
    # mode's manifests); None: unknown (the webhook, manifests without Secrets).
    secrets: Mapping[str, Mapping[str, bytes]] | None = None
    # Each Service's own checks kept from the last validation of the same source (None:
    # none): its requested IPs (None: they do not parse) and its problems.
    kept: Kept[OwnChecks] | None = None

    @classmethod
    def of(
        cls,
        objects: Iterable[ApiObject],
        unparsed: Iterable[ObjectRef] = (),
        secrets: Mapping[str, Mapping[str, bytes]] | None = None,
        kept: Kept[OwnChecks] | None = None,
    ) -> ConfigSet:
        config = cls(unparsed=frozenset(unparsed), secrets=secrets, kept=kept)
        for obj in objects:
            config.of_kind(REGISTRY[Kind(obj.kind)]).append(obj)
        return config

    def objects(self) -> list[ApiObject]:
        """Every object, kind by kind in the registry's order."""
        return [obj for info in MANIFEST_KINDS for obj in self.of_kind(info)]

    def of_kind(self, info: KindInfo) -> list[ApiObject]:
        """The objects of one kind (its field is named as the registry's view field)."""
        objects: list[ApiObject] = getattr(self, info.view_field)
        return objects

    def pools_in(self, namespace: str | None) -> dict[str, AddressPool]:
        """Pools an advertisement in `namespace` can name, by name."""
        return {p.name: p for p in self.pools if p.metadata.namespace == namespace}

    def peers_in(self, namespace: str | None) -> dict[str, BGPPeer]:
        return {p.name: p for p in self.bgp_peers if p.metadata.namespace == namespace}

    def bfd_profiles_in(self, namespace: str | None) -> dict[str, BFDProfile]:
        return {p.name: p for p in self.bfd_profiles if p.metadata.namespace == namespace}

    def is_unparsed(self, kind: str, namespace: str | None, name: str) -> bool:
        return ObjectRef(kind, namespace, name) in self.unparsed

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """Labels of a Namespace in the set, or None when the set does not hold it."""
        for ns in self.namespaces:
            if ns.name == name:
                return ns.metadata.labels
        return None

    @cached_property
    def _pool_index(self) -> dict[int, tuple[list[int], list[int], list[tuple[int, int]]]]:
        """Per IP version: range starts (sorted), running max of ends, (end, pool position)."""
        index: dict[int, tuple[list[int], list[int], list[tuple[int, int]]]] = {}
        for version in (4, 6):
            entries = sorted(
                ((int(r.first), int(r.last), i) for i, p in enumerate(self.pools)
                 for r in p.address_ranges() if r.version == version),
            )  # fmt: skip
            starts = [e[0] for e in entries]
            max_ends = list(accumulate((e[1] for e in entries), max))
            index[version] = (starts, max_ends, [(e[1], e[2]) for e in entries])
        return index

    def pools_holding(self, ip: IPAddress) -> list[AddressPool]:
        """Pools with `ip` in one of their ranges (more than one only if pools overlap)."""
        starts, max_ends, entries = self._pool_index[ip.version]
        n = int(ip)
        found: set[int] = set()
        i = bisect_right(starts, n) - 1
        while i >= 0 and max_ends[i] >= n:
            end, position = entries[i]
            if end >= n:
                found.add(position)
            i -= 1
        return [self.pools[position] for position in sorted(found)]
