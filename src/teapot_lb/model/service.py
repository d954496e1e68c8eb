"""Typed views of the built-in Kubernetes objects we read: Service, EndpointSlice, Node, Namespace.

Only the fields teapot-lb uses are typed; everything else is ignored, so real objects from the
API server parse as they are.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from teapot_lb.addresses import IPFamily as IPFamily
from teapot_lb.addresses import IPFamilyPolicy as IPFamilyPolicy
from teapot_lb.model.common import (
    Identified,
    IPAddress,
    KubeView,
    ObjectMeta,
    parse_ip,
)

LOAD_BALANCER_CLASS = "lb.teapot.io/teapot"
ANNOTATION_IPS = "lb.teapot.io/ips"
ANNOTATION_POOL = "lb.teapot.io/pool"
ANNOTATION_SHARING_KEY = "lb.teapot.io/sharing-key"
ANNOTATION_PROVIDER = "lb.teapot.io/provider"  # Teapot: who builds the tenant's load balancer
ANNOTATION_ALLOCATED_FROM = "lb.teapot.io/allocated-from"  # written by the controller
# Written by the controller: the VRRP virtual router ID per VIPAdvertisement ("adv=17").
ANNOTATION_VRIDS = "lb.teapot.io/vrids"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class ServiceType(StrEnum):
    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"
    EXTERNAL_NAME = "ExternalName"


class Protocol(StrEnum):
    TCP = "TCP"
    UDP = "UDP"
    SCTP = "SCTP"


class ExternalTrafficPolicy(StrEnum):
    CLUSTER = "Cluster"
    LOCAL = "Local"


class ServicePort(KubeView):
    name: str | None = None
    protocol: Protocol = Protocol.TCP
    port: int = Field(ge=1, le=65535)
    node_port: int | None = None
    target_port: int | str | None = None


class ClientIPConfig(KubeView):
    timeout_seconds: int | None = None


class SessionAffinityConfig(KubeView):
    client_ip: ClientIPConfig | None = Field(default=None, alias="clientIP")


class ServiceSpec(KubeView):
    type: ServiceType = ServiceType.CLUSTER_IP
    load_balancer_class: str | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    ip_family_policy: IPFamilyPolicy | None = None
    ip_families: list[IPFamily] = []
    ports: list[ServicePort] = []
    external_traffic_policy: ExternalTrafficPolicy = ExternalTrafficPolicy.CLUSTER
    health_check_node_port: int | None = None  # allocated for externalTrafficPolicy Local
    selector: dict[str, str] = {}
    session_affinity: str | None = None  # "ClientIP" or "None" (OVN mode maps it)
    session_affinity_config: SessionAffinityConfig | None = None
    # Client networks allowed in (the tenant's kube-proxy filters them where the load
    # balancer's address reaches the nodes unchanged; a proxy must filter them itself).
    load_balancer_source_ranges: list[str] = []

    def affinity_timeout(self) -> int | None:
        """Seconds a client sticks to its backend with `sessionAffinity: ClientIP` (the
        API's default 10800), else None."""
        if self.session_affinity != "ClientIP":
            return None
        config = self.session_affinity_config
        timeout = config.client_ip.timeout_seconds if config and config.client_ip else None
        return timeout if timeout is not None else 10800


class LoadBalancerIngress(KubeView):
    ip: str | None = None
    hostname: str | None = None
    ip_mode: str | None = None


class LoadBalancerStatus(KubeView):
    ingress: list[LoadBalancerIngress] = []


class ServiceStatus(KubeView):
    load_balancer: LoadBalancerStatus = Field(default_factory=LoadBalancerStatus)


class Service(Identified, KubeView):
    """A Kubernetes Service, as far as load balancing is concerned."""

    api_version: Literal["v1"] = Field(default="v1", alias="apiVersion")
    kind: Literal["Service"] = "Service"
    metadata: ObjectMeta
    spec: ServiceSpec = Field(default_factory=ServiceSpec)
    status: ServiceStatus = Field(default_factory=ServiceStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    def is_handled(
        self, load_balancer_class: str = LOAD_BALANCER_CLASS, unclassed: bool = True
    ) -> bool:
        """Whether teapot-lb serves it: a LoadBalancer of our class (or of none, if `unclassed`)."""
        if self.spec.type is not ServiceType.LOAD_BALANCER:
            return False
        cls = self.spec.load_balancer_class
        return cls == load_balancer_class or (cls is None and unclassed)

    def requested_ips(self) -> list[IPAddress]:
        """IPs asked for by the `lb.teapot.io/ips` annotation or `spec.loadBalancerIP`.

        Raises ValueError naming the bad entry when one is not an IP address.
        """
        annotated = self.metadata.annotations.get(ANNOTATION_IPS)
        if annotated is not None:
            return [parse_ip(part) for part in annotated.split(",") if part.strip()]
        if self.spec.load_balancer_ip:
            return [parse_ip(self.spec.load_balancer_ip)]
        return []

    @property
    def requested_pool(self) -> str | None:
        return self.metadata.annotations.get(ANNOTATION_POOL) or None

    @property
    def sharing_key(self) -> str | None:
        return self.metadata.annotations.get(ANNOTATION_SHARING_KEY) or None

    def ingress_ips(self) -> list[IPAddress]:
        """IPs in `status.loadBalancer.ingress` (entries that are not IPs are skipped)."""
        ips: list[IPAddress] = []
        for entry in self.status.load_balancer.ingress:
            if entry.ip:
                try:
                    ips.append(parse_ip(entry.ip))
                except ValueError:
                    continue
        return ips


def port_clashes(a: Service, b: Service) -> list[str]:
    """`port/protocol` pairs both Services expose (which prevents them from sharing an IP)."""
    theirs = {(p.port, p.protocol) for p in b.spec.ports}
    return [f"{p.port}/{p.protocol}" for p in a.spec.ports if (p.port, p.protocol) in theirs]


def sharing_conflict(a: Service, b: Service) -> str | None:
    """Why `a` and `b` may not share an IP, or None if they may.

    Sharing needs the same sharing key, no common port/protocol, and either both
    externalTrafficPolicy Cluster or the same pod selector (so that the nodes announcing
    the IP for Local traffic are the same for both).
    """
    if a.sharing_key is None or a.sharing_key != b.sharing_key:
        return (
            f"sharing an IP needs the same {ANNOTATION_SHARING_KEY} annotation on both "
            f"({a.sharing_key!r} vs {b.sharing_key!r})"
        )
    clashes = port_clashes(a, b)
    if clashes:
        return f"both use port {', '.join(clashes)}"
    both_cluster = (
        a.spec.external_traffic_policy is ExternalTrafficPolicy.CLUSTER
        and b.spec.external_traffic_policy is ExternalTrafficPolicy.CLUSTER
    )
    if not both_cluster and a.spec.selector != b.spec.selector:
        return "with externalTrafficPolicy Local, Services sharing an IP must select the same pods"
    return None


class EndpointConditions(KubeView):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class EndpointTarget(KubeView):
    """An endpoint's `targetRef` (usually its Pod)."""

    kind: str | None = None
    namespace: str | None = None
    name: str | None = None


class Endpoint(KubeView):
    addresses: list[str] = []
    conditions: EndpointConditions = Field(default_factory=EndpointConditions)
    node_name: str | None = None
    target_ref: EndpointTarget | None = None

    @property
    def is_ready(self) -> bool:
        # The API says an unknown (null) ready condition is to be read as ready.
        return self.conditions.ready is not False


class EndpointPort(KubeView):
    """A port of an EndpointSlice: the Service port named `name` reaches these endpoints on
    `port` (its resolved targetPort)."""

    name: str | None = None
    protocol: Protocol = Protocol.TCP
    port: int | None = None


class EndpointSlice(Identified, KubeView):
    """A discovery.k8s.io/v1 EndpointSlice: which nodes have (ready) endpoints of a Service."""

    api_version: Literal["discovery.k8s.io/v1"] = Field(
        default="discovery.k8s.io/v1", alias="apiVersion"
    )
    kind: Literal["EndpointSlice"] = "EndpointSlice"
    metadata: ObjectMeta
    address_type: str = "IPv4"
    endpoints: list[Endpoint] = []  # null reads as [] (KubeView: null is absent)
    ports: list[EndpointPort] = []  # OVN mode maps a Service port to its target port by name

    @property
    def service_name(self) -> str | None:
        return self.metadata.labels.get(SERVICE_NAME_LABEL)

    def ready_nodes(self) -> set[str]:
        """Nodes with at least one ready endpoint."""
        return {e.node_name for e in self.endpoints if e.node_name and e.is_ready}


class NodeCondition(KubeView):
    type: str
    status: str


class NodeAddress(KubeView):
    type: str
    address: str


class NodeSpec(KubeView):
    unschedulable: bool = False


class NodeStatus(KubeView):
    conditions: list[NodeCondition] = []
    addresses: list[NodeAddress] = []


class Node(Identified, KubeView):
    """A Kubernetes Node: its labels (for nodeSelectors) and network condition."""

    api_version: Literal["v1"] = Field(default="v1", alias="apiVersion")
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    namespaced: ClassVar[bool] = False

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def network_unavailable(self) -> bool:
        return any(
            c.type == "NetworkUnavailable" and c.status == "True" for c in self.status.conditions
        )

    def addresses(self, kind: str = "InternalIP") -> list[IPAddress]:
        """The node's addresses of one type (InternalIP by default); unparsable ones skipped."""
        found: list[IPAddress] = []
        for a in self.status.addresses:
            if a.type == kind:
                try:
                    found.append(parse_ip(a.address))
                except ValueError:
                    continue
        return found


class Namespace(Identified, KubeView):
    """A Kubernetes Namespace: its labels (for AddressPool namespaceSelectors)."""

    api_version: Literal["v1"] = Field(default="v1", alias="apiVersion")
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta

    namespaced: ClassVar[bool] = False
