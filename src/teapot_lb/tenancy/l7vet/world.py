"""The objects the shared gateway serves and the world vetting reads: where a mirrored
object came from (:class:`Source`), which objects are the gateway's at all, and what each
claims (hostnames, exclusive ports), indexed once per :class:`L7World`, oldest first."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from teapot_lb.addresses import IPAddress
from teapot_lb.model.common import ObjectRef, creation_order
from teapot_lb.model.gateway_api import (
    Gateway,
    HTTPRoute,
    ListenerProtocol,
    Route,
    TLSRoute,
    route_hostnames,
)
from teapot_lb.model.ingress import INGRESS_CLASS, Ingress
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7cert import certificate_problem
from teapot_lb.tenancy.request import LABEL_CLUSTER, request_name

L7Object = Ingress | Gateway | HTTPRoute | TLSRoute | Route
LABEL_SOURCE_NAMESPACE = "lb.teapot.io/source-namespace"
LABEL_SOURCE_NAME = "lb.teapot.io/source-name"
# The GatewayClass of the management cluster that mirrored Gateways are given.
GATEWAY_CLASS = "teapot"


CertificateCheck = Callable[[bytes, bytes], str | None]


@dataclass(frozen=True)
class L7World:
    """What vetting reads: the Tenants, every gateway object of every tenant (for stolen
    hostnames and ports), and the mirrored Secrets by key (None: not known, as in a
    webhook without a Secret cache; certificates are then vetted at reconcile).
    Dedicated addresses (:mod:`teapot_lb.tenancy.l7address`) also read the AddressPools
    by name and, per Tenant name, the addresses its TenantLoadBalancers hold."""

    tenants: Sequence[Tenant]
    objects: Sequence[L7Object] = ()
    secrets: Mapping[str, Mapping[str, bytes]] | None = None
    check_certificate: CertificateCheck = field(default=certificate_problem)
    pools: Mapping[str, AddressPool] = field(default_factory=dict)
    held: Mapping[str, frozenset[IPAddress]] = field(default_factory=dict)

    @cached_property
    def claims(self) -> _Claims:
        """Who serves which hostname and exclusive port, oldest first (built once)."""
        namespaces = {t.spec.namespace for t in self.tenants}
        claims = _Claims()
        for obj in self.objects:
            if not served_here(obj) or obj.metadata.namespace not in namespaces:
                continue
            entry = (creation_order(obj), obj.metadata.namespace or "", obj.ref)
            for _, host in claimed_hostnames(obj):
                if host:
                    claims.hosts.setdefault(host, []).append(entry)
            if isinstance(obj, Gateway):
                for port in exclusive_ports(obj):
                    claims.ports.setdefault(port, []).append(entry)
        for entries in (*claims.hosts.values(), *claims.ports.values()):
            entries.sort()
        return claims


_Claim = tuple[tuple[datetime, str, str], str, ObjectRef]


@dataclass
class _Claims:
    hosts: dict[str, list[_Claim]] = field(default_factory=dict)
    ports: dict[tuple[int, str], list[_Claim]] = field(default_factory=dict)


def older_elsewhere(entries: list[_Claim], mine: tuple[datetime, str, str], namespace: str) -> bool:
    """Whether an object of another namespace (tenant) claimed this before `mine`."""
    for order, ns, _ in entries:
        if order >= mine:
            return False
        if ns != namespace:
            return True
    return False


@dataclass(frozen=True)
class Source:
    """Where a mirrored object came from: tenant cluster, namespace, name there. An object
    written straight into the management namespace is its own source (cluster '')."""

    cluster: str
    namespace: str
    name: str


def source_of(obj: L7Object) -> Source:
    meta = obj.metadata
    labels = meta.labels
    cluster = labels.get(LABEL_CLUSTER, "")
    if not cluster:
        return Source("", meta.namespace or "default", meta.name)
    return Source(
        cluster,
        labels.get(LABEL_SOURCE_NAMESPACE, meta.namespace or "default"),
        labels.get(LABEL_SOURCE_NAME, meta.name),
    )


def mirrored_name(cluster: str, namespace: str, name: str) -> str:
    """An object's name in the tenant's management namespace (its source's own name when
    it was written there directly)."""
    return request_name(cluster, namespace, name) if cluster else name


def served_here(obj: L7Object) -> bool:
    """Whether the gateway serves the object at all: an Ingress of its class, a Gateway of
    its class; routes always (they are served through the Gateways they attach to)."""
    if isinstance(obj, Ingress):
        return obj.class_name == INGRESS_CLASS
    if isinstance(obj, Gateway):
        return obj.spec.gateway_class_name == GATEWAY_CLASS
    return True


def claimed_hostnames(obj: L7Object) -> list[tuple[str, str | None]]:
    """(field, hostname) of every hostname the object asks the gateway to serve."""
    if isinstance(obj, Ingress):
        out = obj.hostnames()
        if obj.spec.default_backend is not None:
            out.append(("spec.defaultBackend", None))
        return out
    if isinstance(obj, Gateway):
        return [
            (f"spec.listeners[{i}].hostname", listener.hostname)
            for i, listener in enumerate(obj.spec.listeners)
            if listener.hostname is not None
        ]
    return [(f"spec.hostnames[{i}]", h) for i, h in enumerate(route_hostnames(obj))]


def exclusive_ports(gateway: Gateway) -> list[tuple[int, str]]:
    """The (port, protocol) of the Gateway's listeners that take a port of their own."""
    return [
        (listener.port, listener.protocol)
        for listener in gateway.spec.listeners
        if listener.protocol in (ListenerProtocol.TCP, ListenerProtocol.UDP)
    ]
