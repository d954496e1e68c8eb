"""The tenant agent's core (pure): a tenant Service, with its cluster's nodes and
EndpointSlices, as a TenantLoadBalancer for the management cluster; and what to copy back.
"""

from __future__ import annotations

import hashlib
import re
from ipaddress import ip_network
from typing import Any

from teapot_lb.cluster import ClusterView
from teapot_lb.model.common import API_VERSION, ConditionStatus
from teapot_lb.model.event import EventType
from teapot_lb.model.service import (
    ANNOTATION_PROVIDER,
    ANNOTATION_SHARING_KEY,
    ExternalTrafficPolicy,
    Node,
    Service,
)
from teapot_lb.model.tenancy import (
    ACCEPTED,
    PROGRAMMED_FOR_TENANT,
    PROVIDER_OF_MODE,
    REASON_DEGRADED,
    REASON_PROGRAMMED,
    TenantLoadBalancer,
    TenantMode,
)

# The tenant agent's default loadBalancerClass: what "cloud-provider-teapot" serves.
TEAPOT_CLOUD_CLASS = "lb.teapot.io/teapot-cloud"
FINALIZER = "lb.teapot.io/tenant-agent"
LABEL_CLUSTER = "lb.teapot.io/cluster"
LABEL_SERVICE_NAMESPACE = "lb.teapot.io/service-namespace"
LABEL_SERVICE_NAME = "lb.teapot.io/service-name"
# The agent's component name: its Events on tenant objects, and the refusals it records in
# the tenant's management namespace (a request or a gateway mirror the API server refused
# to store: :mod:`.kube_denials`), which the manager counts in the Tenant's status and
# clears when the Tenant changes.
AGENT_COMPONENT = "teapot-lb-tenant-agent"
REQUEST_KIND = "TenantLoadBalancer"
DENIALS_SELECTOR = f"reportingComponent={AGENT_COMPONENT}"
# The relay's Events about a tenant node's BGP session (a refused session, a max-prefix
# trip), recorded in the tenant's namespace too, where its agents tell the tenant's Node.
RELAY_COMPONENT = "teapot-lb-relay"
NODE_SESSION_KIND = "TenantNodeSession"
RELAY_SELECTOR = f"involvedObject.kind={NODE_SESSION_KIND},reportingComponent={RELAY_COMPONENT}"


# What an agent's unready reason about the tenant cluster ends with: what sets it.
TENANT_CLUSTER_HINT = "the tenant cluster: --kubeconfig, or the pod's ServiceAccount"


def management_namespace_hint(namespace: str) -> str:
    """What an agent's unready reason about the management cluster ends with: where it
    looked, and what sets it."""
    return (
        f"the tenant's namespace in the management cluster is {namespace!r}: set it with"
        " --management-namespace or the namespace of the management kubeconfig's context"
    )


def session_name(address: str) -> str:
    """A tenant node's session as an object name (an IPv6 address's colons as dashes)."""
    return address.replace(":", "-")


def node_event_ref(namespace: str, address: str) -> dict[str, Any]:
    """What a relay Event about the tenant node at `address` is about, in the tenant's
    namespace (no object: the relay knows the session's address, the agent the Node)."""
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_SESSION_KIND,
        "metadata": {"name": session_name(address), "namespace": namespace},
    }


def request_name(cluster: str, namespace: str, name: str) -> str:
    """The request's name in the tenant's management namespace: readable, unique per
    cluster and Service, at most 253 characters (a DNS subdomain)."""
    text = f"{cluster}.{namespace}.{name}"
    if len(text) <= 253:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{text[:242]}.{digest}"


def _node_addresses(node: Node) -> list[str]:
    return [str(ip) for ip in node.addresses()]


def desired_request(
    service: Service, view: ClusterView, cluster: str, namespace: str
) -> dict[str, Any]:
    """The TenantLoadBalancer (JSON, without status) the Service should have.

    Raises ValueError naming the bad entry when the Service's requested IPs or source
    ranges do not parse.
    """
    spec = service.spec
    ready = view.ready_endpoint_nodes(f"{service.namespace}/{service.name}")
    backends = []
    for name in sorted(view.nodes):
        node = view.nodes[name]
        addresses = _node_addresses(node)
        if addresses and not node.spec.unschedulable:
            backends.append({"node": name, "addresses": addresses, "ready": name in ready})
    body: dict[str, Any] = {
        "source": {
            "cluster": cluster,
            "namespace": service.namespace,
            "name": service.name,
            "uid": service.metadata.uid or "",
        },
        "mode": TenantMode.ROUTE.value,
        "ports": [
            {
                k: v
                for k, v in (
                    ("name", p.name),
                    ("protocol", p.protocol.value),
                    ("port", p.port),
                    ("nodePort", p.node_port),
                )
                if v is not None
            }
            for p in spec.ports
        ],
        "ipFamilies": [f.value for f in spec.ip_families],
        "ipFamilyPolicy": (spec.ip_family_policy or "SingleStack"),
        "requestedIPs": [str(ip) for ip in service.requested_ips()],
        "externalTrafficPolicy": spec.external_traffic_policy.value,
        "backends": backends,
    }
    key = service.metadata.annotations.get(ANNOTATION_SHARING_KEY)
    if key:
        body["sharingKey"] = key
    provider = service.metadata.annotations.get(ANNOTATION_PROVIDER, "").strip()
    if provider:
        # Carried as written: the manager vets it against the Tenant (a bad name is
        # refused there, with the allowed ones). A built-in provider brings its mode.
        body["provider"] = provider
        body["mode"] = next(
            (m.value for m, name in PROVIDER_OF_MODE.items() if name == provider), body["mode"]
        )
    local = spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
    if local and spec.health_check_node_port is not None:
        body["healthCheckNodePort"] = spec.health_check_node_port
    if spec.load_balancer_source_ranges:
        body["loadBalancerSourceRanges"] = source_ranges(spec.load_balancer_source_ranges)
    labels = {
        LABEL_CLUSTER: cluster,
        LABEL_SERVICE_NAMESPACE: service.namespace,
        LABEL_SERVICE_NAME: service.name,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "TenantLoadBalancer",
        "metadata": {
            "name": request_name(cluster, service.namespace, service.name),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": body,
    }


def source_ranges(ranges: list[str]) -> list[str]:
    """A Service's `loadBalancerSourceRanges` as networks (host bits dropped, as the API
    server takes them), each once, in order. ValueError names the entry that is none."""
    out: list[str] = []
    for i, text in enumerate(ranges):
        try:
            network = str(ip_network(text.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"spec.loadBalancerSourceRanges[{i}]: {text!r} is not a network in CIDR "
                "notation (such as 203.0.113.0/24)"
            ) from None
        if network not in out:
            out.append(network)
    return out


def ingress_of(request: TenantLoadBalancer | None) -> list[dict[str, str]]:
    """What the Service's status.loadBalancer.ingress should say (empty until assigned)."""
    if request is None or request.status is None:
        return []
    return [{"ip": ip} for ip in request.status.addresses]


def refusal_of(request: TenantLoadBalancer | None) -> tuple[str, str] | None:
    """(reason, message) when the manager refused the request, else None."""
    if request is None or request.status is None:
        return None
    for condition in request.status.conditions:
        if condition.type == ACCEPTED and condition.status is ConditionStatus.FALSE:
            return condition.reason, condition.message
    return None


def programmed_of(request: TenantLoadBalancer | None) -> tuple[str, str, str] | None:
    """(Event type, reason, message) the tenant's Service is told of the request's
    `Programmed`, where the manager wrote it for the tenant (condition ProgrammedForTenant:
    no address from the IPAM, an external provider's word): a Warning with its reason while
    it is not built or is degraded, a Normal `Programmed` once it serves; None when there is
    nothing to tell."""
    if request is None or request.status is None:
        return None
    for condition in request.status.conditions:
        if condition.type != PROGRAMMED_FOR_TENANT:
            continue
        if condition.status is ConditionStatus.TRUE and condition.reason != REASON_DEGRADED:
            return EventType.NORMAL.value, REASON_PROGRAMMED, condition.message
        return EventType.WARNING.value, condition.reason, condition.message
    return None


def source_key(request: TenantLoadBalancer) -> str:
    """The tenant Service's key (namespace/name) a request is for."""
    return f"{request.spec.source.namespace}/{request.spec.source.name}"


_BACKEND = re.compile(r"spec\.backends\[(\d+)\]")


def nodes_refused(message: str, desired: dict[str, Any]) -> list[str]:
    """The Nodes a refusal's message names as the cause (a backend's field path), by the
    request (`desired`, JSON) it refused."""
    backends = desired.get("spec", {}).get("backends") or []
    indices = sorted({int(i) for i in _BACKEND.findall(message)})
    return [str(backends[i]["node"]) for i in indices if i < len(backends)]
