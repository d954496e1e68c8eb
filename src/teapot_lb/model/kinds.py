"""The kinds teapot-lb reads, one entry each: the one place that knows a kind's facts.

For every kind, :data:`KINDS` says which typed model parses it, where it lives in the
Kubernetes API, which :class:`~teapot_lb.cluster.ClusterView` field holds it, and who
reads it. Everything that handles "every kind" loops over this table instead of keeping
its own list: the :class:`~teapot_lb.cluster.Store` (view fields), the controller's and
the speaker's informers (resources, which namespace), the plan cache (which kinds
invalidate every plan) and the manifest loader (which documents parse to what).

Adding a kind is one place: its model in :data:`ApiObject`, a :class:`Kind` member and one
:class:`KindInfo` line here; and, when the core reads it, its typed field on ``ClusterView``.
The object key format (:func:`object_key`, :func:`split_key`) is defined with the API
resources (:mod:`teapot_lb.kube.resources`) and exported here for the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    BFD_PROFILES,
    BGP_ADVERTISEMENTS,
    BGP_PEERS,
    ENDPOINT_SLICES,
    GATEWAY_CLASSES,
    GATEWAYS,
    HTTP_ROUTES,
    INGRESS_CLASSES,
    INGRESSES,
    L2_ADVERTISEMENTS,
    NAMESPACES,
    NODES,
    OVN_ADVERTISEMENTS,
    SECRETS,
    SERVICES,
    TCP_ROUTES,
    TENANT_LOAD_BALANCERS,
    TENANT_NODES,
    TENANTS,
    TLS_ROUTES,
    UDP_ROUTES,
    VIP_ADVERTISEMENTS,
    Resource,
    object_key,
    split_key,
)
from teapot_lb.model.bfd import BFDProfile
from teapot_lb.model.bgp import BGPAdvertisement, BGPPeer
from teapot_lb.model.gateway_api import (
    Gateway,
    GatewayClass,
    HTTPRoute,
    TCPRoute,
    TLSRoute,
    UDPRoute,
)
from teapot_lb.model.ingress import Ingress, IngressClass
from teapot_lb.model.l2 import L2Advertisement
from teapot_lb.model.ovn import OVNAdvertisement
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.service import EndpointSlice, Namespace, Node, Service
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantNodes
from teapot_lb.model.vip import VIPAdvertisement

# Every typed object the registry's models parse to.
ApiObject = (
    AddressPool
    | BGPPeer
    | BGPAdvertisement
    | BFDProfile
    | L2Advertisement
    | VIPAdvertisement
    | OVNAdvertisement
    | Service
    | EndpointSlice
    | Node
    | Namespace
    | Tenant
    | TenantLoadBalancer
    | TenantNodes
    | Ingress
    | IngressClass
    | GatewayClass
    | Gateway
    | HTTPRoute
    | TLSRoute
    | TCPRoute
    | UDPRoute
)


class Kind(StrEnum):
    """The kinds a view holds; the value is the Kubernetes kind name."""

    ADDRESS_POOL = "AddressPool"
    BGP_PEER = "BGPPeer"
    BGP_ADVERTISEMENT = "BGPAdvertisement"
    BFD_PROFILE = "BFDProfile"
    L2_ADVERTISEMENT = "L2Advertisement"
    VIP_ADVERTISEMENT = "VIPAdvertisement"
    OVN_ADVERTISEMENT = "OVNAdvertisement"
    SERVICE = "Service"
    ENDPOINT_SLICE = "EndpointSlice"
    NODE = "Node"
    NAMESPACE = "Namespace"
    SECRET = "Secret"
    TENANT = "Tenant"
    TENANT_LOAD_BALANCER = "TenantLoadBalancer"
    TENANT_NODES = "TenantNodes"
    INGRESS = "Ingress"
    INGRESS_CLASS = "IngressClass"
    GATEWAY_CLASS = "GatewayClass"
    GATEWAY = "Gateway"
    HTTP_ROUTE = "HTTPRoute"
    TLS_ROUTE = "TLSRoute"
    TCP_ROUTE = "TCPRoute"
    UDP_ROUTE = "UDPRoute"


@dataclass(frozen=True)
class KindInfo:
    """One kind's facts.

    `model`: the typed model its objects parse to; None for Secrets, which are kept as
    their decoded data (the core reads only BGP passwords) and never read from manifests.
    `view_field`: the :class:`~teapot_lb.cluster.ClusterView` attribute holding them.
    `config`: lb.teapot.io configuration, watched only in the configured namespace.
    `controller`: the controller watches it (the speaker watches every kind).
    `planned`: `announce.plan` reads it for every Service, so a change to any object of
    the kind plans every Service again (the plan cache's invalidation).
    `management`: a Teapot management-cluster kind (Tenant, TenantLoadBalancer), read by
    the manager only; clusters without Teapot do not have its CRD.
    `relay`: a Teapot kind the BGP relay reads (the tenants' registered nodes, written by
    their agents, vetted by the manager); speakers never read it.
    `gateway`: a kind the Teapot gateway serves (Ingress, Gateway API), mirrored by tenant
    agents into the management cluster; read by the gateway's reconcile, never by the
    speaker (a cluster may not have the Gateway API CRDs).
    """

    kind: Kind
    model: type[BaseModel] | None
    resource: Resource
    view_field: str
    config: bool = False
    controller: bool = False
    planned: bool = False
    management: bool = False
    relay: bool = False
    gateway: bool = False

    @property
    def in_manifests(self) -> bool:
        """Read from manifests (standalone mode, `teapot-lb validate`)."""
        return self.model is not None


KINDS: tuple[KindInfo, ...] = (
    KindInfo(Kind.ADDRESS_POOL, AddressPool, ADDRESS_POOLS, "pools", True, True, True),
    KindInfo(Kind.BGP_PEER, BGPPeer, BGP_PEERS, "bgp_peers", True, True, True),
    KindInfo(
        Kind.BGP_ADVERTISEMENT,
        BGPAdvertisement,
        BGP_ADVERTISEMENTS,
        "bgp_advertisements",
        True,
        True,
        True,
    ),
    # Read by the BGP speaker, not the planner; the controller's webhook checks references.
    KindInfo(
        Kind.BFD_PROFILE, BFDProfile, BFD_PROFILES, "bfd_profiles", config=True, controller=True
    ),
    KindInfo(
        Kind.L2_ADVERTISEMENT,
        L2Advertisement,
        L2_ADVERTISEMENTS,
        "l2_advertisements",
        True,
        True,
        True,
    ),
    KindInfo(
        Kind.VIP_ADVERTISEMENT,
        VIPAdvertisement,
        VIP_ADVERTISEMENTS,
        "vip_advertisements",
        True,
        True,
        True,
    ),
    KindInfo(
        Kind.OVN_ADVERTISEMENT,
        OVNAdvertisement,
        OVN_ADVERTISEMENTS,
        "ovn_advertisements",
        True,
        True,
        True,
    ),
    KindInfo(Kind.SERVICE, Service, SERVICES, "services", controller=True),
    KindInfo(Kind.ENDPOINT_SLICE, EndpointSlice, ENDPOINT_SLICES, "endpoint_slices"),
    KindInfo(Kind.NODE, Node, NODES, "nodes", planned=True),
    KindInfo(Kind.NAMESPACE, Namespace, NAMESPACES, "namespaces", controller=True),
    # Secrets hold BGP passwords: configuration, read only by the speaker.
    KindInfo(Kind.SECRET, None, SECRETS, "secrets", config=True),
    # Teapot tenancy: the manager's kinds, in the management cluster only.
    KindInfo(Kind.TENANT, Tenant, TENANTS, "tenants", management=True),
    KindInfo(
        Kind.TENANT_LOAD_BALANCER,
        TenantLoadBalancer,
        TENANT_LOAD_BALANCERS,
        "tenant_load_balancers",
        management=True,
    ),
    KindInfo(
        Kind.TENANT_NODES, TenantNodes, TENANT_NODES, "tenant_nodes", management=True, relay=True
    ),
    # The Teapot gateway's kinds (management cluster: the tenants' mirrored objects).
    *(
        KindInfo(kind, model, resource, field, management=True, gateway=True)
        for kind, model, resource, field in (
            (Kind.INGRESS, Ingress, INGRESSES, "ingresses"),
            (Kind.INGRESS_CLASS, IngressClass, INGRESS_CLASSES, "ingress_classes"),
            (Kind.GATEWAY_CLASS, GatewayClass, GATEWAY_CLASSES, "gateway_classes"),
            (Kind.GATEWAY, Gateway, GATEWAYS, "gateways"),
            (Kind.HTTP_ROUTE, HTTPRoute, HTTP_ROUTES, "http_routes"),
            (Kind.TLS_ROUTE, TLSRoute, TLS_ROUTES, "tls_routes"),
            (Kind.TCP_ROUTE, TCPRoute, TCP_ROUTES, "tcp_routes"),
            (Kind.UDP_ROUTE, UDPRoute, UDP_ROUTES, "udp_routes"),
        )
    ),
)

# The kinds of one cluster (what the speaker watches and `explain` reads).
ONE_CLUSTER_KINDS: tuple[KindInfo, ...] = tuple(info for info in KINDS if not info.management)
# The kinds a speaker of a management cluster watches (`--tenancy`): all but the gateway's
# and the relay's.
TENANCY_KINDS: tuple[KindInfo, ...] = tuple(
    info for info in KINDS if not info.gateway and not info.relay
)
# The gateway's kinds (what its reconcile and the tenant agent's mirror read).
GATEWAY_KINDS: tuple[KindInfo, ...] = tuple(info for info in KINDS if info.gateway)

REGISTRY: Mapping[Kind, KindInfo] = {info.kind: info for info in KINDS}


__all__ = [
    "GATEWAY_KINDS",
    "KINDS",
    "ONE_CLUSTER_KINDS",
    "REGISTRY",
    "TENANCY_KINDS",
    "ApiObject",
    "Kind",
    "KindInfo",
    "object_key",
    "split_key",
]
