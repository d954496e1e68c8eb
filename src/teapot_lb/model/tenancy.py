"""Teapot tenancy: `Tenant` (what the cloud operator gives a tenant) and
`TenantLoadBalancer` (what a tenant's agent asks for, in the tenant's namespace of the
management cluster).

Shape checks live here; what needs several objects (a namespace owned by two Tenants, a
request outside its tenant's allocation) is vetted by :mod:`teapot_lb.tenancy.vet`, which
the shared validation, the webhook and the manager all call.
"""

from __future__ import annotations

from enum import StrEnum
from ipaddress import ip_network
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from teapot_lb.addresses import IPFamily, IPFamilyPolicy, IPNetwork
from teapot_lb.model.bgp import (
    WELL_KNOWN_COMMUNITIES,
    Community,
    LargeCommunity,
    parse_community,
)
from teapot_lb.model.common import (
    Condition,
    Identified,
    IPAddressField,
    KubeModel,
    ObjectMeta,
)
from teapot_lb.model.pool import AddressEntry
from teapot_lb.model.service import ExternalTrafficPolicy, Protocol


def parse_cidr(text: str) -> IPNetwork:
    """A network in CIDR notation with no host bits set; ValueError says what is wrong."""
    try:
        return ip_network(text.strip(), strict=True)
    except ValueError as err:
        raise ValueError(f"{text!r} is not a network in CIDR notation ({err})") from None


def _check_cidr(text: str) -> str:
    parse_cidr(text)
    return text


CIDR = Annotated[
    str,
    AfterValidator(_check_cidr),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 49}),
]
"""A network such as 192.0.2.0/26 or 2001:db8:1::/64."""


class TenantMode(StrEnum):
    """How a tenant's load balancer reaches it."""

    ROUTE = "Route"
    """The management cluster's speakers announce the IP by BGP with the tenant's nodes
    as next hops; kube-proxy on those nodes takes the traffic."""
    GATEWAY = "Gateway"
    """The shared gateway (HAProxy) proxies to the tenant's nodes."""


class GatewayBackends(StrEnum):
    """Where the shared gateway sends a tenant's traffic."""

    NODE_PORTS = "NodePorts"
    """The tenant's nodes (InternalIP) at the Services' nodePorts: works without routing."""
    POD_IPS = "PodIPs"
    """The tenant's pod IPs (endpoints of the EndpointSlices): the networks are routed."""


# The built-in providers (see :mod:`teapot_lb.providers`): each serves one of today's
# modes, so a Tenant that lists no providers may use those of its modes.
ROUTE_PROVIDER = "route"
PROXY_PROVIDER = "proxy"
PROVIDER_OF_MODE: dict[TenantMode, str] = {
    TenantMode.ROUTE: ROUTE_PROVIDER,
    TenantMode.GATEWAY: PROXY_PROVIDER,
}

ProviderName = Annotated[
    str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
"""A provider's name, as `teapot-lb manager --provider NAME=...` runs it (a DNS label)."""


# --------------------------------------------------------------------------- Tenant


class TenantAllocation(KubeModel):
    """An AddressPool, or parts of it, given to the tenant."""

    address_pool: str = Field(min_length=1, max_length=253)
    """Name of an AddressPool in the manager's configuration namespace."""
    cidrs: list[AddressEntry] = []
    """Parts of the pool (CIDRs or ranges inside it); empty means the whole pool."""


class TenantQuotas(KubeModel):
    """Limits on what the tenant may hold; an unset limit is no limit."""

    addresses: int | None = Field(default=None, ge=0)
    """Distinct load-balancer IPs (an IP shared under a sharing key counts once)."""
    load_balancers: int | None = Field(default=None, ge=0)
    """TenantLoadBalancers holding addresses."""
    ports: int | None = Field(default=None, ge=0)
    """Ports over all its load balancers."""


class TenantNode(KubeModel):
    """A registered node of the tenant: a BGP speaker of the tenant may connect to the
    relay from one of its addresses, and a route's next hop may be one of them."""

    name: str = Field(min_length=1, max_length=253)
    """The node's name in the tenant's cluster."""
    addresses: list[IPAddressField] = Field(min_length=1, max_length=16)
    """The node's addresses (each inside one of the Tenant's nodeNetworks)."""


# Communities no allowlist may name: the relay governs them by options of their own
# (docs/relay.md): NO_EXPORT, NO_ADVERTISE, NO_EXPORT_SUBCONFED (RFC 1997) pass or are
# honoured (`--well-known-communities`); BLACKHOLE (RFC 7999) passes with RTBH only, and
# then with NO_EXPORT added (`spec.relay.rtbh`, `--rtbh`).
RELAY_GOVERNED_COMMUNITIES: dict[int, str] = {
    WELL_KNOWN_COMMUNITIES[name]: why
    for name, why in (
        ("no-export", "--well-known-communities"),
        ("no-advertise", "--well-known-communities"),
        ("no-export-subconfed", "--well-known-communities"),
        ("blackhole", "RTBH (spec.relay.rtbh or the relay's --rtbh)"),
    )
}


def check_relay_community(text: str) -> str:
    """A community a relay may allowlist; ValueError says which option governs it if not."""
    governed = RELAY_GOVERNED_COMMUNITIES.get(parse_community(text))
    if governed is not None:
        raise ValueError(f"{text!r} is not allowlisted: the relay governs it by {governed}")
    return text


RelayCommunity = Annotated[Community, AfterValidator(check_relay_community)]


class TenantRelay(KubeModel):
    """How the BGP relay treats the tenant's routes beyond what the Tenant already says
    (allocations, nodeNetworks, asn)."""

    communities: list[RelayCommunity] = []
    """Standard communities the tenant may set, besides the relay's own allowlist
    (`--community`); every other one is removed. NO_EXPORT, NO_ADVERTISE,
    NO_EXPORT_SUBCONFED and BLACKHOLE are governed by the relay's options, not listed."""
    large_communities: list[LargeCommunity] = []
    """Large communities (RFC 8092) the tenant may set, besides the relay's allowlist."""
    rtbh: bool | None = None
    """Remotely triggered black hole (RFC 7999): a route of the tenant's allocation with
    BLACKHOLE (65535:666) is passed on with NO_EXPORT added; unset: the relay's --rtbh."""


class TenantGateway(KubeModel):
    """How the shared gateway serves the tenant, beyond its DNS domains."""

    dedicated_address: bool = False
    """Every Ingress and Gateway of the tenant that does not say otherwise (Gateway
    `spec.addresses`, Ingress annotation `lb.teapot.io/dedicated-address`) is served on
    the tenant's own gateway address, taken from its allocation and counted in its quota,
    instead of the shared addresses."""


class TenantSpec(KubeModel):
    """What a tenant may use, written by the cloud operator."""

    namespace: str = Field(min_length=1, max_length=63)
    """The tenant's namespace in the management cluster (its agents write there only)."""
    allocations: list[TenantAllocation] = []
    """The addresses the tenant's load balancers get."""
    quotas: TenantQuotas = Field(default_factory=TenantQuotas)
    """Limits on addresses, load balancers and ports."""
    node_networks: list[CIDR] = []
    """The networks the tenant's nodes live in: every backend must be inside one."""
    nodes: list[TenantNode] = Field(default=[], max_length=1000)
    """Registered nodes written by the operator (standalone mode, or nodes of no tenant
    agent): with the nodes the tenant's agents publish (TenantNodes), the only addresses
    the BGP relay accepts sessions from and as next hops. None at all: no sessions."""
    asn: int | None = Field(default=None, ge=1, le=4294967295, alias="asn")
    """The tenant's AS number (for the BGP relay)."""
    relay: TenantRelay = Field(default_factory=TenantRelay)
    """How the BGP relay treats the tenant's routes (communities, RTBH)."""
    dns_domains: list[str] = Field(default=[], alias="dnsDomains")
    """DNS domains the tenant may serve (for the gateway)."""
    modes: list[TenantMode] = [TenantMode.ROUTE]
    """The modes the tenant's load balancers may use."""
    gateway_backends: GatewayBackends = GatewayBackends.NODE_PORTS
    """Gateway mode: NodePorts (the tenant's nodes) or PodIPs (routed pod networks)."""
    pod_networks: list[CIDR] = []
    """Gateway mode with PodIPs: the networks of the tenant's pods (every pod IP must be in one)."""
    gateway: TenantGateway = Field(default_factory=TenantGateway)
    """Gateway mode: the tenant's defaults on the shared gateway (a dedicated address)."""
    providers: list[ProviderName] = Field(default=[], max_length=16)
    """The providers the tenant's load balancers may be built by (route, proxy, or one
    the manager runs with --provider); empty: those of its modes (Route: route, Gateway:
    proxy), so a Tenant written before providers means what it meant."""
    default_provider: ProviderName | None = None
    """The provider of a request that names none; unset: the provider of its mode."""

    @model_validator(mode="after")
    def _default_is_listed(self) -> TenantSpec:
        if (
            self.default_provider is not None
            and self.default_provider not in self.allowed_providers()
        ):
            allowed = ", ".join(self.allowed_providers()) or "none"
            raise ValueError(
                f"defaultProvider {self.default_provider!r} is not one of the Tenant's "
                f"providers ({allowed})"
            )
        return self

    def allowed_providers(self) -> list[str]:
        """`providers`, or when it is empty the providers of `modes`."""
        return list(self.providers) or [PROVIDER_OF_MODE[m] for m in self.modes]


class TenantUsage(KubeModel):
    """What the tenant holds."""

    addresses: int = Field(default=0, ge=0)
    """Distinct load-balancer IPs held."""
    load_balancers: int = Field(default=0, ge=0)
    """TenantLoadBalancers holding addresses."""
    ports: int = Field(default=0, ge=0)
    """Ports of those load balancers."""


class TenantStatus(KubeModel):
    """Usage against quota, written by the manager."""

    usage: TenantUsage = Field(default_factory=TenantUsage)
    """What the tenant holds now."""
    refused: int = Field(default=0, ge=0)
    """Requests of the tenant currently refused."""
    conditions: list[Condition] = []
    """Current conditions (Valid)."""


class Tenant(Identified, KubeModel):
    """A tenant of a Teapot cloud: its management namespace and what it may use."""

    namespaced: ClassVar[bool] = False

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Tenant"] = "Tenant"
    metadata: ObjectMeta
    spec: TenantSpec
    status: TenantStatus | None = None

    def node_networks(self) -> list[IPNetwork]:
        return [parse_cidr(text) for text in self.spec.node_networks]

    def provider_for(self, request: TenantLoadBalancer) -> str:
        """Who builds `request`: the provider it names, else the Tenant's
        defaultProvider, else the provider of its mode (today's meaning)."""
        return (
            request.spec.provider
            or self.spec.default_provider
            or PROVIDER_OF_MODE[request.spec.mode]
        )


# ------------------------------------------------------------------ TenantNodes


class TenantNodesSpec(KubeModel):
    """A tenant cluster's nodes, published by its tenant agent."""

    cluster: str = Field(min_length=1, max_length=253)
    """The tenant cluster's name (its agent's --cluster-name)."""
    nodes: list[TenantNode] = Field(default=[], max_length=5000)
    """The cluster's Nodes with their InternalIP addresses."""


class TenantNodesStatus(KubeModel):
    """What the manager made of the published nodes."""

    refused: int = Field(default=0, ge=0)
    """Addresses refused (outside the Tenant's nodeNetworks): never registered."""
    conditions: list[Condition] = []
    """Accepted: every address registered (True), or which were refused and why (False)."""


class TenantNodes(Identified, KubeModel):
    """A tenant cluster's registered nodes, in the tenant's management namespace: the
    addresses the BGP relay takes the tenant's sessions and next hops from (each vetted
    against the Tenant's nodeNetworks)."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["TenantNodes"] = "TenantNodes"
    metadata: ObjectMeta
    spec: TenantNodesSpec
    status: TenantNodesStatus | None = None

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"


# ------------------------------------------------------------------ TenantLoadBalancer


class SourceService(KubeModel):
    """The tenant's Service this request is for."""

    cluster: str = Field(min_length=1, max_length=253)
    """The tenant cluster's name (its agent's --cluster-name)."""
    namespace: str = Field(min_length=1, max_length=63)
    """The Service's namespace in the tenant cluster."""
    name: str = Field(min_length=1, max_length=253)
    """The Service's name."""
    uid: str = Field(default="", max_length=128)
    """The Service's uid (a Service deleted and created again is another request)."""


class TenantPort(KubeModel):
    """One port of the load balancer."""

    name: str | None = Field(default=None, max_length=63)
    """The Service port's name."""
    protocol: Protocol = Protocol.TCP
    """TCP, UDP or SCTP."""
    port: int = Field(ge=1, le=65535)
    """The port on the load-balancer IP."""
    node_port: int | None = Field(default=None, ge=1, le=65535)
    """The Service's nodePort on the tenant's nodes, when it has one."""


class TenantBackend(KubeModel):
    """A tenant node that may receive the load balancer's traffic."""

    node: str = Field(min_length=1, max_length=253)
    """The node's name in the tenant cluster."""
    addresses: list[IPAddressField] = Field(min_length=1)
    """The node's addresses (InternalIP): the next hops of route mode."""
    ready: bool = False
    """The node holds a ready endpoint of the Service."""


class TenantLoadBalancerSpec(KubeModel):
    """A tenant's load balancer, written by its tenant agent."""

    source: SourceService
    """Which Service of which tenant cluster."""
    mode: TenantMode = TenantMode.ROUTE
    """How traffic reaches the tenant."""
    ports: list[TenantPort] = []
    """The Service's ports."""
    ip_families: list[IPFamily] = Field(default=[], alias="ipFamilies")
    """IPv4 and/or IPv6, primary first (empty: the families of requestedIPs, else IPv4)."""
    ip_family_policy: IPFamilyPolicy = Field(
        default=IPFamilyPolicy.SINGLE_STACK, alias="ipFamilyPolicy"
    )
    """SingleStack, PreferDualStack or RequireDualStack."""
    requested_ips: list[IPAddressField] = Field(default=[], alias="requestedIPs")
    """IPs the Service asks for (at most one per family)."""
    sharing_key: str | None = Field(default=None, max_length=253)
    """Load balancers of the same tenant with the same key may share an IP."""
    external_traffic_policy: ExternalTrafficPolicy = ExternalTrafficPolicy.CLUSTER
    """Local: only nodes with ready endpoints receive traffic."""
    backends: list[TenantBackend] = []
    """The tenant's nodes, with which of them hold ready endpoints."""
    provider: ProviderName | None = None
    """Who builds the load balancer (the Service's `lb.teapot.io/provider` annotation);
    unset: the Tenant's defaultProvider, else the provider of `mode`."""
    health_check_node_port: int | None = Field(default=None, ge=1, le=65535)
    """`externalTrafficPolicy: Local`: the Service's healthCheckNodePort, where a
    provider checks which nodes hold a ready endpoint (HTTP /healthz)."""
    load_balancer_source_ranges: list[CIDR] = Field(default=[], max_length=256)
    """The Service's `loadBalancerSourceRanges` (as networks): only these clients may
    connect. Provider route keeps the address as the destination, so the tenant's
    kube-proxy filters them; a provider that cannot filter refuses the request."""


class TenantLoadBalancerStatus(KubeModel):
    """What the manager decided."""

    addresses: list[str] = []
    """The assigned IPs, primary family first."""
    address_pool: str | None = None
    """No longer written (the operator's AddressPool is not the tenant's to read); kept so
    that a status an earlier manager wrote still parses."""
    next_hops: list[str] = []
    """Route mode: the tenant node addresses the IPs are announced with."""
    conditions: list[Condition] = []
    """Accepted (vetted) and Programmed (addresses assigned and announced), with reasons;
    ProgrammedForTenant where the tenant is told something of Programmed."""


class TenantLoadBalancer(Identified, KubeModel):
    """A tenant's request for a load balancer, vetted and fulfilled by the manager."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["TenantLoadBalancer"] = "TenantLoadBalancer"
    metadata: ObjectMeta
    spec: TenantLoadBalancerSpec
    status: TenantLoadBalancerStatus | None = None

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    def families(self) -> tuple[IPFamily, ...]:
        """The families wanted, primary first (dual-stack policies: both)."""
        spec = self.spec
        families = tuple(spec.ip_families) or tuple(
            dict.fromkeys(IPFamily.of(ip) for ip in spec.requested_ips)
        )
        primary = families[0] if families else IPFamily.V4
        if spec.ip_family_policy is IPFamilyPolicy.SINGLE_STACK:
            return (primary,)
        return (primary, primary.other)


# Condition types and reasons, in the style of Gateway API.
ACCEPTED = "Accepted"
PROGRAMMED = "Programmed"
REASON_ACCEPTED = "Accepted"
REASON_PROGRAMMED = "Programmed"
REASON_PENDING = "Pending"
# Provider proxy: served by the gateway, the Service that announces the address not seen yet.
REASON_NOT_ANNOUNCED = "NotAnnounced"
REASON_NO_READY_BACKENDS = "NoReadyBackends"
REASON_NOT_ACCEPTED = "NotAccepted"
# Programmed as the tenant's Service is told it, where there is something to tell (no
# address from the IPAM; an external provider's build failed, is degraded or serves): the
# same status and reason, and a message written for the tenant, naming none of the
# management side (AddressPools, endpoints, project or object ids). The tenant agent relays
# it to the Service as an Event. A condition rather than a field: agents and speakers of an
# earlier version, which refuse unknown fields, read a status with it. (Programmed's own
# message is in the tenant's words too: the agent's credentials read the whole request;
# the operator's detail is an Event on the Tenant.)
PROGRAMMED_FOR_TENANT = "ProgrammedForTenant"
# Programmed, but not all of it serves (an external provider's members out of service):
# the condition stays True, its Event is a Warning.
REASON_DEGRADED = "Degraded"
