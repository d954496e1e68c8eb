"""An immutable snapshot of the objects the core reads, with the lookups it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from teapot_lb.addresses import RangeIndex
from teapot_lb.cluster.changes import ChangeLog
from teapot_lb.model import (
    AddressPool,
    BFDParameters,
    BFDProfile,
    BGPAdvertisement,
    BGPPeer,
    EndpointSlice,
    IPAddress,
    L2Advertisement,
    Namespace,
    Node,
    OVNAdvertisement,
    Service,
    VIPAdvertisement,
)
from teapot_lb.model.common import ObjectRef, creation_order
from teapot_lb.model.gateway_api import (
    Gateway,
    GatewayClass,
    HTTPRoute,
    TCPRoute,
    TLSRoute,
    UDPRoute,
)
from teapot_lb.model.ingress import Ingress, IngressClass
from teapot_lb.model.kinds import REGISTRY, ApiObject, Kind, object_key
from teapot_lb.model.service import ANNOTATION_VRIDS
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantNodes

# What a view (and the Store) holds of each kind: typed objects, or a Secret's data.
Stored = ApiObject | Mapping[str, bytes]

__all__ = ["Assigned", "ClusterView", "Kind", "UnknownBFDProfile", "object_key"]


class Assigned(Protocol):
    """What a controller in the same process gave a Service: the IPs its status would list
    (primary family first) and its VRID annotation (None: none)."""

    @property
    def ips(self) -> tuple[IPAddress, ...]: ...

    @property
    def vrids(self) -> str | None: ...


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


class UnknownBFDProfile(LookupError):
    """A BGPPeer names a BFDProfile that does not exist (in its namespace)."""

    def __init__(self, peer: ObjectRef, profile: str) -> None:
        super().__init__(f"{peer}: spec.bfdProfile: no BFDProfile named {profile!r}")
        self.peer = peer
        self.profile = profile


@dataclass(frozen=True)
class ClusterView:
    """Objects by cache key (see :func:`object_key`), per kind.

    Secrets are kept as their decoded `data` (`{key: bytes}`), the only part the
    core reads (BGP passwords).
    """

    services: Mapping[str, Service] = field(default_factory=_empty)
    endpoint_slices: Mapping[str, EndpointSlice] = field(default_factory=_empty)
    nodes: Mapping[str, Node] = field(default_factory=_empty)
    namespaces: Mapping[str, Namespace] = field(default_factory=_empty)
    pools: Mapping[str, AddressPool] = field(default_factory=_empty)
    bgp_peers: Mapping[str, BGPPeer] = field(default_factory=_empty)
    bgp_advertisements: Mapping[str, BGPAdvertisement] = field(default_factory=_empty)
    bfd_profiles: Mapping[str, BFDProfile] = field(default_factory=_empty)
    l2_advertisements: Mapping[str, L2Advertisement] = field(default_factory=_empty)
    vip_advertisements: Mapping[str, VIPAdvertisement] = field(default_factory=_empty)
    ovn_advertisements: Mapping[str, OVNAdvertisement] = field(default_factory=_empty)
    secrets: Mapping[str, Mapping[str, bytes]] = field(default_factory=_empty)
    tenants: Mapping[str, Tenant] = field(default_factory=_empty)
    tenant_load_balancers: Mapping[str, TenantLoadBalancer] = field(default_factory=_empty)
    tenant_nodes: Mapping[str, TenantNodes] = field(default_factory=_empty)
    # The Teapot gateway's kinds (the tenants' mirrored Ingresses and Gateway API objects).
    ingresses: Mapping[str, Ingress] = field(default_factory=_empty)
    ingress_classes: Mapping[str, IngressClass] = field(default_factory=_empty)
    gateway_classes: Mapping[str, GatewayClass] = field(default_factory=_empty)
    gateways: Mapping[str, Gateway] = field(default_factory=_empty)
    http_routes: Mapping[str, HTTPRoute] = field(default_factory=_empty)
    tls_routes: Mapping[str, TLSRoute] = field(default_factory=_empty)
    tcp_routes: Mapping[str, TCPRoute] = field(default_factory=_empty)
    udp_routes: Mapping[str, UDPRoute] = field(default_factory=_empty)
    # Per Service key, what the controller running in this process (standalone) assigned:
    # read in place of the Service's status and VRID annotation, so that 100,000 Services
    # are not each copied to carry a status (a copy weighs more than the parsed Service).
    # Read them with :meth:`ingress_ips` and :meth:`vrids_annotation`.
    assigned: Mapping[str, Assigned] = field(default_factory=_empty)
    # The Store's change log and where it stood when this view was made (None: not from a
    # Store); caches use it to find what changed between two views without walking them.
    changes: tuple[ChangeLog, int] | None = field(default=None, repr=False, compare=False)
    # The EndpointSlices per Service key, when the maker keeps them (the Store does): a view
    # then need not index every slice again.
    slice_index: Mapping[str, list[EndpointSlice]] | None = field(
        default=None, repr=False, compare=False
    )
    _slices_by_service: dict[str, list[EndpointSlice]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # Every pool's ranges, the oldest pool's first (pool_of's order), made when first asked.
    _pool_index: RangeIndex[AddressPool] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.slice_index is not None:
            self._slices_by_service.update(self.slice_index)
            # The maker's index goes on changing; the view keeps only its copy.
            object.__setattr__(self, "slice_index", None)
            return
        for eps in self.endpoint_slices.values():
            svc = eps.service_name
            if svc:
                key = object_key(eps.metadata.namespace, svc)
                self._slices_by_service.setdefault(key, []).append(eps)

    def ingress_ips(self, key: str, svc: Service) -> list[IPAddress]:
        """The IPs the Service at `key` holds: those assigned in this process, else those of
        its `status.loadBalancer.ingress`."""
        assigned = self.assigned.get(key)
        return list(assigned.ips) if assigned is not None else svc.ingress_ips()

    def vrids_annotation(self, key: str, svc: Service) -> str | None:
        """The Service's `lb.teapot.io/vrids` annotation: as assigned in this process, else
        its own."""
        assigned = self.assigned.get(key)
        if assigned is not None:
            return assigned.vrids
        return svc.metadata.annotations.get(ANNOTATION_VRIDS)

    def of_kind(self, kind: Kind) -> Mapping[str, Stored]:
        """The objects of one kind, by key (its field, as the kind registry names it)."""
        objects: Mapping[str, Stored] = getattr(self, REGISTRY[kind].view_field)
        return objects

    def slices_of(self, service_key: str) -> list[EndpointSlice]:
        """The EndpointSlices labelled with the Service's name, in its namespace."""
        return self._slices_by_service.get(service_key, [])

    def ready_endpoint_nodes(self, service_key: str) -> set[str]:
        """Nodes with at least one ready endpoint of the Service."""
        nodes: set[str] = set()
        for eps in self.slices_of(service_key):
            nodes |= eps.ready_nodes()
        return nodes

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels, or None when the namespace is not known."""
        ns = self.namespaces.get(namespace)
        return ns.metadata.labels if ns is not None else None

    def bfd_parameters(self, peer: BGPPeer) -> BFDParameters | None:
        """The BFD session settings of a BGPPeer: its bfdProfile (in its namespace) for a
        single-hop or, with ebgpMultiHop, a multihop session; None when it names no profile.

        Raises :class:`UnknownBFDProfile` when the profile is not in the view (validation
        refuses such a peer, but the profile may be deleted after it).
        """
        name = peer.spec.bfd_profile
        if name is None:
            return None
        profile = self.bfd_profiles.get(object_key(peer.metadata.namespace, name))
        if profile is None:
            raise UnknownBFDProfile(peer.ref, name)
        return profile.parameters(multihop=peer.spec.ebgp_multi_hop)

    def pool_of(self, ip: IPAddress) -> AddressPool | None:
        """The pool whose addresses contain `ip` (pools do not overlap once validated; if
        they do, the oldest, as the controller keeps the older pool's range)."""
        index = self._pool_index
        if index is None:
            # Once per view (it is immutable): a replan asks for every Service IP's pool.
            by_age = sorted(self.pools.values(), key=creation_order)
            index = RangeIndex((rng, pool) for pool in by_age for rng in pool.address_ranges())
            object.__setattr__(self, "_pool_index", index)
        return next((pool for pool in index.holding(ip) if not pool.avoids(ip)), None)
