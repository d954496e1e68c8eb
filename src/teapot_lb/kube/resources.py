"""The resource kinds teapot-lb reads and writes, and object keys.

Objects travel as plain JSON dicts (``KubeObject``), exactly as the API serves them;
the model layer turns them into typed values. A :class:`Resource` says where a kind
lives in the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KubeObject = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def custom(self) -> bool:
        """Served through the custom-objects API (not a built-in kind)."""
        return self.group not in _BUILTIN_GROUPS

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


_BUILTIN_GROUPS = frozenset(
    {"", "discovery.k8s.io", "coordination.k8s.io", "events.k8s.io", "networking.k8s.io"}
)

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False, True)
NODES = Resource("", "v1", "nodes", "Node", False, True)
SERVICES = Resource("", "v1", "services", "Service", True, True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
EVENTS = Resource("", "v1", "events", "Event", True)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)

LB_GROUP = "lb.teapot.io"
LB_VERSION = "v1alpha1"
ADDRESS_POOLS = Resource(LB_GROUP, LB_VERSION, "addresspools", "AddressPool", True, True)
BGP_PEERS = Resource(LB_GROUP, LB_VERSION, "bgppeers", "BGPPeer", True, True)
BGP_ADVERTISEMENTS = Resource(
    LB_GROUP, LB_VERSION, "bgpadvertisements", "BGPAdvertisement", True, True
)
L2_ADVERTISEMENTS = Resource(
    LB_GROUP, LB_VERSION, "l2advertisements", "L2Advertisement", True, True
)
VIP_ADVERTISEMENTS = Resource(
    LB_GROUP, LB_VERSION, "vipadvertisements", "VIPAdvertisement", True, True
)
OVN_ADVERTISEMENTS = Resource(
    LB_GROUP, LB_VERSION, "ovnadvertisements", "OVNAdvertisement", True, True
)
BFD_PROFILES = Resource(LB_GROUP, LB_VERSION, "bfdprofiles", "BFDProfile", True, True)
# Teapot tenancy (management cluster only).
TENANTS = Resource(LB_GROUP, LB_VERSION, "tenants", "Tenant", False, True)
TENANT_NODES = Resource(LB_GROUP, LB_VERSION, "tenantnodes", "TenantNodes", True, True)
TENANT_LOAD_BALANCERS = Resource(
    LB_GROUP, LB_VERSION, "tenantloadbalancers", "TenantLoadBalancer", True, True
)
# The Teapot gateway's kinds: Ingress and Gateway API (standard channel, v1).
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress", True, True)
INGRESS_CLASSES = Resource("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False)
GATEWAY_API_GROUP = "gateway.networking.k8s.io"
GATEWAY_CLASSES = Resource(GATEWAY_API_GROUP, "v1", "gatewayclasses", "GatewayClass", False, True)
GATEWAYS = Resource(GATEWAY_API_GROUP, "v1", "gateways", "Gateway", True, True)
HTTP_ROUTES = Resource(GATEWAY_API_GROUP, "v1", "httproutes", "HTTPRoute", True, True)
TLS_ROUTES = Resource(GATEWAY_API_GROUP, "v1", "tlsroutes", "TLSRoute", True, True)
TCP_ROUTES = Resource(GATEWAY_API_GROUP, "v1", "tcproutes", "TCPRoute", True, True)
UDP_ROUTES = Resource(GATEWAY_API_GROUP, "v1", "udproutes", "UDPRoute", True, True)


def object_key(namespace: str | None, name: str) -> str:
    """The cache key of an object: ``namespace/name``, or ``name`` for cluster-scoped kinds
    (client-go's key format). The one key format of every cache, view and queue."""
    return f"{namespace}/{name}" if namespace else name


def key_of(obj: KubeObject) -> str:
    """:func:`object_key` of an API object (a JSON dict)."""
    meta = obj["metadata"]
    return object_key(meta.get("namespace"), str(meta["name"]))


def split_key(key: str) -> tuple[str | None, str]:
    """``(namespace, name)`` from :func:`object_key`; namespace is None when cluster-scoped."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


def resource_version(obj: KubeObject) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))
