"""One tenant's config as it is built: listeners, certificates and backends by name,
the routes in the order they are added."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.config import (
    Backend,
    Certificate,
    HTTPRoute,
    Listener,
    Owner,
    Protocol,
    RouteKind,
    StreamRoute,
    TLSRoute,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api import ListenerProtocol
from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY, certificate_names, covered_hostnames
from teapot_lb.tenancy.l7vet import SHARED_PORTS, L7Object, mirrored_name, source_of

from .backends import SliceKey, service_backend, slice_key, slices_by_service
from .results import ObjectResult

_UNSAFE_NAME = re.compile(r"[^-A-Za-z0-9_.]")


def config_name(*parts: str) -> str:
    """An id for the config (listeners, certificates, backends): the parts joined by '.',
    other characters as '-', a digest when too long."""
    text = _UNSAFE_NAME.sub("-", ".".join(parts)).lstrip("-_.") or "x"
    if len(text) <= 200:
        return text
    return f"{text[:180]}.{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class BackendAsk:
    """How a backend was built (the first object to ask for it), so that it can be built
    again from new slices alone: what it read and what it gave besides the backend."""

    obj: L7Object
    tenant: Tenant
    service: str
    port: int | str
    key: SliceKey
    found: bool
    notes: tuple[str, ...]
    """What it noted on the first asker's result."""


@dataclass
class Build:
    """What a tenant's objects add to the config, as they are taken (:mod:`.parts` makes a
    :class:`~.parts.Part` of it)."""

    secrets: Mapping[str, Mapping[str, bytes]]
    slices: Sequence[KubeObject]
    addresses: tuple[IPAddress, ...]
    listeners: dict[str, Listener] = field(default_factory=dict)
    certificates: dict[str, Certificate] = field(default_factory=dict)
    backends: dict[str, Backend] = field(default_factory=dict)
    http_routes: list[HTTPRoute] = field(default_factory=list)
    tls_routes: list[TLSRoute] = field(default_factory=list)
    tcp_routes: list[StreamRoute] = field(default_factory=list)
    udp_routes: list[StreamRoute] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)
    """Backends whose Service has no synced EndpointSlice, or no such port."""
    dedicated: dict[str, IPAddress] = field(default_factory=dict)
    """Listeners on a dedicated address, and that address."""
    placed: dict[ObjectRef, IPAddress] = field(default_factory=dict)
    """The objects with a dedicated address (ObjectResult.address)."""
    offered: dict[str, set[IPAddress | None]] = field(default_factory=dict)
    """Where each certificate is offered: dedicated addresses, None for the shared ones."""
    asked: dict[str, BackendAsk] = field(default_factory=dict)
    """How each backend was built."""
    owners: dict[str, str] = field(default_factory=dict)
    """Listeners taken by a TenantLoadBalancer, and which (what a clash names)."""
    by_service: dict[SliceKey, list[KubeObject]] = field(init=False)
    """`slices` by whose endpoints they hold."""

    def __post_init__(self) -> None:
        self.by_service = slices_by_service(self.slices)

    # ----- listeners

    def shared(self, protocol: Protocol, where: ObjectResult | None = None) -> tuple[str, ...]:
        """The listeners of `protocol` on its shared port for the object of `where`: on
        its dedicated address, or on every shared address (no object: the shared ones)."""
        port = {
            Protocol.HTTP: SHARED_PORTS[ListenerProtocol.HTTP],
            Protocol.HTTPS: SHARED_PORTS[ListenerProtocol.HTTPS],
            Protocol.TLS_PASSTHROUGH: SHARED_PORTS[ListenerProtocol.TLS],
        }[protocol]
        return self.exclusive(protocol, port, where)

    def exclusive(
        self, protocol: Protocol, port: int, where: ObjectResult | None
    ) -> tuple[str, ...]:
        if where is None or where.address is None:
            return tuple(self.listener(protocol, port, a) for a in self.addresses)
        name = self.listener(protocol, port, where.address)
        self.dedicated[name] = where.address
        return (name,)

    def listener(self, protocol: Protocol, port: int, address: IPAddress) -> str:
        name = config_name(protocol.value.lower(), str(port), str(address))
        if name not in self.listeners:
            self.listeners[name] = Listener(
                name=name, address=address, port=port, protocol=protocol
            )
        return name

    # ----- certificates

    def certificate(
        self,
        obj: L7Object,
        secret: str,
        hostnames: Iterable[str],
        notes: list[str] | None = None,
    ) -> str | None:
        """The certificate of a Secret of `obj`'s, offered for those of `hostnames` it
        covers (added to those it has); None when the Secret is not synced. With no
        hostnames it is only looked up: a tenant's certificate is offered for the names it
        was vetted for, never for whatever its SANs say (which could name another tenant's
        hostname), and of those only for the ones its SANs cover, so that of several
        certificates on one listener each name gets its own. A certificate covering none
        of the hostnames it was asked for is not offered for them (said in `notes`)."""
        source = source_of(obj)
        namespace = obj.metadata.namespace or ""
        mirror = mirrored_name(source.cluster, source.namespace, secret)
        data = self.secrets.get(f"{namespace}/{mirror}")
        if data is None or CERT_KEY not in data or KEY_KEY not in data:
            return None
        name = config_name(namespace, mirror)
        self.offered.setdefault(name, set()).add(self.placed.get(obj.ref))
        asked = tuple(hostnames)
        covered = covered_hostnames(certificate_names(data[CERT_KEY]), asked)
        if asked and not covered and notes is not None:
            notes.append(
                f"Secret {secret}: its certificate covers none of {', '.join(asked)}: "
                "not offered for them"
            )
        known = self.certificates.get(name)
        names = tuple(sorted({*(known.hostnames if known else ()), *covered}))
        if not names:
            return name
        self.certificates[name] = Certificate(
            name=name,
            hostnames=names,
            cert_pem=data[CERT_KEY].decode(),
            key_pem=data[KEY_KEY].decode(),
            owner=Owner(tenant=namespace, kind=RouteKind.SERVICE, namespace=namespace, name=mirror),
        )
        return name

    # ----- backends

    def backend(
        self,
        obj: L7Object,
        tenant: Tenant,
        service: str,
        port: int | str,
        result: ObjectResult,
    ) -> str:
        """The backend of a Service port of `obj`'s source cluster (built once per tenant:
        what it notes goes to the first object that asks)."""
        source = source_of(obj)
        namespace = obj.metadata.namespace or ""
        name = config_name(namespace, source.cluster, source.namespace, service, str(port))
        if name not in self.backends:
            noted = len(result.notes)
            backend, found = service_backend(
                name, obj, tenant, service, port, self.by_service, result
            )
            self.backends[name] = backend
            key = slice_key(obj, tenant, service)
            notes = tuple(result.notes[noted:])
            self.asked[name] = BackendAsk(obj, tenant, service, port, key, found, notes)
            if not found:
                self.missing.add(name)
        return name


def created(obj: L7Object) -> str:
    """An object's creationTimestamp as a route's `created` (routing orders by age)."""
    when = obj.metadata.creation_timestamp
    return when.isoformat() if isinstance(when, datetime) else ""


def route_owner(obj: L7Object, tenant: Tenant, kind: RouteKind) -> Owner:
    """Whose a route is: the tenant, the kind and the object (what the data plane reports)."""
    return Owner(
        tenant=tenant.name, kind=kind, namespace=obj.metadata.namespace or "", name=obj.name
    )


__all__ = ["BackendAsk", "Build", "config_name", "created", "route_owner"]
