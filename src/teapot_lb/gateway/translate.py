"""The tenants' vetted objects → the data plane's :class:`GatewayConfig` (pure), with the
status every object gets (Gateway API conditions; an Ingress's addresses or refusal).

Inputs are what the management cluster holds: the Tenants, the mirrored Ingresses and
Gateway API objects (:mod:`teapot_lb.gateway.control.l7mirror`), the mirrored EndpointSlices and
TLS Secrets, and the gateway's own addresses. Every object is vetted here again
(:func:`teapot_lb.tenancy.l7vet.vet_object`): a refused object contributes nothing.

Shared listeners per gateway address, always there (with nothing served they answer
404): HTTP on 80, HTTPS on 443 (every accepted certificate, each offered for the
hostnames it was vetted for only; the gateway's own certificate for every other name),
TLS passthrough on 443 too (the data plane dispatches by SNI); a tenant's TCP and UDP
Gateway listeners get a listener of their own port. An Ingress or Gateway with a
dedicated address (:mod:`teapot_lb.tenancy.l7address`) gets the same listeners on that
address instead, for its tenant only: its host-less rules, defaultBackend and
hostname-less HTTPRoutes are served there, and its HTTPS listener offers the tenant's
certificates only (the gateway's own the default there too).
Backends are a Service port of one source cluster: the pod IPs (EndpointSlice ports) or
the nodes at the nodePorts, as the Tenant's `gatewayBackends` says; an endpoint outside
the tenant's pod or node networks is never served (reported).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from ipaddress import ip_address
from itertools import chain
from operator import attrgetter
from typing import Any

from pydantic import ValidationError

from teapot_lb.addresses import IPAddress, IPNetwork
from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Certificate,
    Endpoint,
    GatewayConfig,
    HeaderMatch,
    HeaderModifier,
    HeaderValue,
    HealthCheck,
    HTTPRoute,
    HTTPRule,
    Listener,
    Owner,
    PathMatch,
    PathType,
    Protocol,
    QueryParamMatch,
    Redirect,
    Rewrite,
    RouteKind,
    RouteMatch,
    RouteSemantics,
    StreamRoute,
    TLSRoute,
)
from teapot_lb.gateway.control.l7mirror import (
    ANNOTATION_HEALTH_CHECK,
    ANNOTATION_SERVICE_PORTS,
    LABEL_BACKENDS,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.gateway_api import (
    Gateway,
    HTTPPathModifier,
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRule,
    ListenerProtocol,
    ParentReference,
)
from teapot_lb.model.gateway_api import HTTPRoute as ApiHTTPRoute
from teapot_lb.model.gateway_api import Listener as ApiListener
from teapot_lb.model.gateway_api import TCPRoute as ApiTCPRoute
from teapot_lb.model.gateway_api import TLSRoute as ApiTLSRoute
from teapot_lb.model.gateway_api import UDPRoute as ApiUDPRoute
from teapot_lb.model.ingress import Ingress, IngressServiceBackend
from teapot_lb.model.ingress import PathType as IngressPathType
from teapot_lb.model.tenancy import GatewayBackends, Tenant, parse_cidr
from teapot_lb.tenancy.l7address import Dedicated, Wanted, assign, wanted_address
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY, certificate_names, covered_hostnames
from teapot_lb.tenancy.l7vet import (
    LABEL_SOURCE_NAMESPACE,
    SHARED_PORTS,
    L7Object,
    L7Refusal,
    L7Rule,
    L7World,
    Source,
    domain_holds,
    mirrored_name,
    served_here,
    source_of,
    unresolved_backend_refs,
    unserved_parts,
    vet_object,
)
from teapot_lb.tenancy.vet import tenant_of

_UNSAFE_NAME = re.compile(r"[^-A-Za-z0-9_.]")


def config_name(*parts: str) -> str:
    """An id for the config (listeners, certificates, backends): the parts joined by '.',
    other characters as '-', a digest when too long."""
    text = _UNSAFE_NAME.sub("-", ".".join(parts)).lstrip("-_.") or "x"
    if len(text) <= 200:
        return text
    return f"{text[:180]}.{hashlib.sha256(text.encode()).hexdigest()[:12]}"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Condition:
    """A Gateway API condition (type, status True/False, reason, message)."""

    type: str
    status: bool
    reason: str
    message: str = ""


@dataclass
class ParentResult:
    """A route's result for one of its parentRefs."""

    parent: ParentReference
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class ListenerResult:
    name: str
    attached: int = 0
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class ObjectResult:
    """What the gateway decided about one object: refusals (vetting), and the status
    parts of its kind; `notes`: references that did not resolve, endpoints not served."""

    obj: L7Object
    tenant: str = ""
    refusals: list[L7Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parents: list[ParentResult] = field(default_factory=list)
    listeners: dict[str, ListenerResult] = field(default_factory=dict)
    dropped: list[L7Refusal] = field(default_factory=list)
    """Parts of an accepted object not served (an Ingress rule without host): the rest is."""
    unresolved: list[L7Refusal] = field(default_factory=list)
    """An HTTPRoute's backendRefs that do not resolve (a Service that does not exist, or
    has no such port; another namespace's; not a Service): the route is served, their
    requests answered 500, ResolvedRefs=False with the first one's reason."""
    address: IPAddress | None = None
    """An Ingress's or Gateway's dedicated address (None: the shared addresses)."""

    @property
    def accepted(self) -> bool:
        return not self.refusals

    def problems(self) -> list[tuple[str, str]]:
        """Everything not served as asked, as (reason, text naming the field): the
        refusals, the parts dropped, the parents that did not take a route, the references
        that did not resolve, and the notes (`--check` lines, Events)."""
        out = [
            (r.rule.value, f"{r.field}: {r.message}" if r.field else r.message)
            for r in (*self.refusals, *self.dropped)
        ]
        for pr in self.parents:
            for c in pr.conditions:
                if not c.status:
                    out.append((c.reason, f"parentRefs[{pr.parent.name}]: {c.message}"))
        out += [(r.rule.value, f"{r.field}: {r.message}") for r in self.unresolved]
        out += [("Note", n) for n in self.notes]
        return out


@dataclass
class Translation:
    config: GatewayConfig
    results: dict[ObjectRef, ObjectResult]
    addresses: tuple[IPAddress, ...]


# --------------------------------------------------------------------------- backends


@dataclass
class _Build:
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
        source = source_of(obj)
        namespace = obj.metadata.namespace or ""
        mode = tenant.spec.gateway_backends
        name = config_name(namespace, source.cluster, source.namespace, service, str(port))
        if name in self.backends:
            return name
        wanted = {
            MCS_SOURCE_CLUSTER: source.cluster,
            LABEL_SOURCE_NAMESPACE: source.namespace,
            MCS_SERVICE_NAME: service,
            LABEL_BACKENDS: mode.value,
        }
        mine = [
            s
            for s in self.slices
            if s.get("metadata", {}).get("namespace") == namespace
            and all(_labels(s).get(k, "") == v for k, v in wanted.items())
        ]
        if not mine:
            self.missing.add(name)
            result.notes.append(
                f"Service {source.namespace}/{service} has no synced endpoints "
                f"({mode.value}) from cluster {source.cluster or '(none)'}"
            )
        networks = _allowed_networks(tenant, mode)
        endpoints: list[Endpoint] = []
        ports = [(eps, _endpoint_port(eps, port)) for eps in mine]
        if mine and all(target is None for _, target in ports):
            self.missing.add(name)
        for eps, target in ports:
            if target is None:
                result.notes.append(_no_port(eps, f"{source.namespace}/{service}", port))
                continue
            for e in eps.get("endpoints") or []:
                ready = (e.get("conditions") or {}).get("ready") is not False
                for text in e.get("addresses") or []:
                    try:
                        address = ip_address(text)
                    except ValueError:
                        continue
                    if not any(address in net for net in networks):
                        result.notes.append(
                            f"endpoint {address} of Service {source.namespace}/{service} is "
                            f"outside the {_network_words(mode)} of Tenant {tenant.name}; "
                            "not served"
                        )
                        continue
                    endpoints.append(Endpoint(address=address, port=target, ready=ready))
        self.backends[name] = Backend(
            name=name,
            endpoints=tuple(sorted(endpoints, key=lambda e: (str(e.address), e.port))),
            health_check=_health_check(mine, f"Service {source.namespace}/{service}", result),
            owner=Owner(
                tenant=tenant.name, kind=RouteKind.SERVICE, namespace=namespace, name=service
            ),
        )
        return name


def _allowed_networks(tenant: Tenant, mode: GatewayBackends) -> list[IPNetwork]:
    texts = (
        tenant.spec.pod_networks if mode is GatewayBackends.POD_IPS else tenant.spec.node_networks
    )
    return [parse_cidr(t) for t in texts]


def _network_words(mode: GatewayBackends) -> str:
    return "pod networks" if mode is GatewayBackends.POD_IPS else "node networks"


def _labels(obj: KubeObject) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _endpoint_port(eps: KubeObject, port: int | str) -> int | None:
    """The endpoints' port for a Service port given by number or name."""
    annotations = eps.get("metadata", {}).get("annotations") or {}
    try:
        service_ports = json.loads(annotations.get(ANNOTATION_SERVICE_PORTS, "[]"))
    except ValueError:
        service_ports = []
    name: str | None = port if isinstance(port, str) else None
    if isinstance(port, int):
        name = next((str(p.get("name", "")) for p in service_ports if p.get("port") == port), None)
        if name is None:
            return None
    for p in eps.get("ports") or []:
        if str(p.get("name") or "") == name and isinstance(p.get("port"), int):
            return int(p["port"])
    return None


def _no_port(eps: KubeObject, service: str, port: int | str) -> str:
    """Why a slice gives no endpoint for `port`: the Service has no such port, or (a port
    by number) the slice does not say the Service's ports, so none can be matched."""
    meta = eps.get("metadata", {})
    if isinstance(port, int) and ANNOTATION_SERVICE_PORTS not in (meta.get("annotations") or {}):
        return (
            f"EndpointSlice {meta.get('name', '')} of Service {service} has no"
            f" {ANNOTATION_SERVICE_PORTS} annotation (the Service's ports, as the tenant agent"
            f" writes it: a JSON list of name, port, protocol): Service port {port} cannot be"
            " matched to an endpoint port; no endpoints"
        )
    return f"Service {service} has no port {port}"


def _health_check(
    slices: Sequence[KubeObject], what: str, result: ObjectResult
) -> HealthCheck | None:
    """The active health check the slices ask for (the Octavia driver's annotation); a
    malformed one is reported and not used."""
    for eps in slices:
        text = (eps.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_HEALTH_CHECK)
        if not text:
            continue
        try:
            return HealthCheck.model_validate_json(text)
        except ValidationError as err:
            why = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(json)'}: {e['msg']}"
                            for e in err.errors())  # fmt: skip
            result.notes.append(f"{what}: annotation {ANNOTATION_HEALTH_CHECK} ignored: {why}")
            return None
    return None


def _created(obj: L7Object) -> str:
    created = obj.metadata.creation_timestamp
    return created.isoformat() if isinstance(created, datetime) else ""


def _owner(obj: L7Object, tenant: Tenant, kind: RouteKind) -> Owner:
    return Owner(
        tenant=tenant.name, kind=kind, namespace=obj.metadata.namespace or "", name=obj.name
    )


# --------------------------------------------------------------------------- Ingress


def _ingress(build: _Build, obj: Ingress, tenant: Tenant, result: ObjectResult) -> None:
    tls_hosts: dict[str, str] = {}
    for tls in obj.spec.tls:
        if tls.secret_name is None:
            continue
        cert = build.certificate(obj, tls.secret_name, tls.hosts, result.notes)
        if cert is None:
            result.notes.append(f"Secret {tls.secret_name} is not synced: HTTPS not served")
            continue
        tls_hosts.update((h, cert) for h in tls.hosts)
    http = build.shared(Protocol.HTTP, result)
    # On a dedicated address (the tenant's own) the defaultBackend takes every request no
    # rule matches, the rules' hosts included (Ingress: "requests that don't match any
    # rule"), and the rules without host are served for every host, over HTTPS too.
    default = _ingress_default(build, obj, tenant, result) if result.address else ()
    hostless: list[HTTPRule] = []
    for rule in obj.spec.rules:
        if rule.http is None or not (rule.host or result.address):
            continue  # (a rule without host is left out: ObjectResult.dropped)
        rules: list[HTTPRule] = []
        for path in rule.http.paths:
            service = path.backend.service
            if service is None:
                continue
            backend = build.backend(obj, tenant, service.name, _port(service), result)
            kind = PathType.EXACT if path.path_type is IngressPathType.EXACT else PathType.PREFIX
            rules.append(
                HTTPRule(
                    matches=(RouteMatch(path=PathMatch(type=kind, value=path.path or "/")),),
                    backends=(BackendRef(backend=backend),),
                )
            )
        if not rule.host:
            hostless += rules
            continue
        listeners = http
        if rule.host in tls_hosts:
            listeners = http + build.shared(Protocol.HTTPS, result)
        build.http_routes.append(
            HTTPRoute(
                owner=_owner(obj, tenant, RouteKind.INGRESS),
                listeners=listeners,
                hostnames=(rule.host,),
                semantics=RouteSemantics.INGRESS,
                created=_created(obj),
                rules=(*rules, *default),
            )
        )
    if hostless or default:
        build.http_routes.append(
            HTTPRoute(
                owner=_owner(obj, tenant, RouteKind.INGRESS),
                listeners=http + build.shared(Protocol.HTTPS, result),
                hostnames=(),
                semantics=RouteSemantics.INGRESS,
                created=_created(obj),
                rules=(*hostless, *default),
            )
        )


def _port(service: IngressServiceBackend) -> int | str:
    return service.port.number if service.port.number else service.port.name or ""


def _ingress_default(
    build: _Build, obj: Ingress, tenant: Tenant, result: ObjectResult
) -> tuple[HTTPRule, ...]:
    """The defaultBackend as a rule that matches every path (Prefix `/`, the least
    specific match: every rule of the Ingress goes first)."""
    service = obj.spec.default_backend.service if obj.spec.default_backend else None
    if service is None:
        return ()
    backend = build.backend(obj, tenant, service.name, _port(service), result)
    return (
        HTTPRule(
            matches=(RouteMatch(path=PathMatch(type=PathType.PREFIX, value="/")),),
            backends=(BackendRef(backend=backend),),
        ),
    )


# --------------------------------------------------------------------------- Gateway API


_PROTOCOL = {
    ListenerProtocol.HTTP: Protocol.HTTP,
    ListenerProtocol.HTTPS: Protocol.HTTPS,
    ListenerProtocol.TLS: Protocol.TLS_PASSTHROUGH,
    ListenerProtocol.TCP: Protocol.TCP,
    ListenerProtocol.UDP: Protocol.UDP,
}
_ROUTE_PROTOCOLS = {
    "HTTPRoute": (ListenerProtocol.HTTP, ListenerProtocol.HTTPS),
    "TLSRoute": (ListenerProtocol.TLS,),
    "TCPRoute": (ListenerProtocol.TCP,),
    "UDPRoute": (ListenerProtocol.UDP,),
}


def _config_listeners(
    build: _Build, listener: ApiListener, gateway: ObjectResult
) -> tuple[str, ...]:
    protocol = _PROTOCOL[ListenerProtocol(listener.protocol)]
    if protocol in (Protocol.TCP, Protocol.UDP):
        return build.exclusive(protocol, listener.port, gateway)
    return build.shared(protocol, gateway)


def _gateway(build: _Build, obj: Gateway, tenant: Tenant, result: ObjectResult) -> None:
    for listener in obj.spec.listeners:
        lr = result.listeners.setdefault(listener.name, ListenerResult(listener.name))
        refs_ok = True
        for ref in listener.tls.certificate_refs if listener.tls else []:
            if listener.protocol != ListenerProtocol.HTTPS:
                continue
            hosts = [listener.hostname] if listener.hostname else []
            if build.certificate(obj, ref.name, hosts, result.notes) is None:
                refs_ok = False
                lr.conditions.append(
                    Condition("ResolvedRefs", False, "InvalidCertificateRef",
                              f"Secret {ref.name} is not synced")
                )  # fmt: skip
        if refs_ok:
            lr.conditions.append(Condition("ResolvedRefs", True, "ResolvedRefs"))
        _config_listeners(build, listener, result)
        lr.conditions += [
            Condition("Accepted", True, "Accepted"),
            Condition("Programmed", refs_ok, "Programmed" if refs_ok else "Invalid"),
        ]


def _hostnames_meet(route_hosts: Sequence[str], listener_host: str | None) -> list[str] | None:
    """The hostnames a route serves on a listener (Gateway API: the intersection of the
    route's and the listener's; None when they do not meet)."""
    if listener_host is None:
        return list(route_hosts)
    if not route_hosts:
        return [listener_host]
    met: list[str] = []
    for host in route_hosts:
        if host == listener_host or (
            listener_host.startswith("*.") and domain_holds(listener_host, host)
        ):
            met.append(host)
        elif host.startswith("*.") and domain_holds(host, listener_host):
            met.append(listener_host)
    return met or None


_ADDRESS_RULES = (L7Rule.ADDRESS_NOT_USABLE, L7Rule.ADDRESS_NOT_ASSIGNED)

_NOT_ATTACHED = {
    "NoMatchingParent": "the Gateway has no listener of this sectionName and port",
    "NotAllowedByListeners": "no listener of the Gateway allows this route (protocol, "
    "allowedRoutes namespaces or kinds)",
    "NoMatchingListenerHostname": "none of the route's hostnames meets a listener's hostname",
    "HostnameNotAllowed": "a route without hostnames on a listener without a hostname would "
    "catch every hostname of the shared addresses: name hostnames (or give the Gateway a "
    "dedicated address: spec.addresses)",
}


def _attach(
    build: _Build,
    route: ApiHTTPRoute | ApiTLSRoute | ApiTCPRoute | ApiUDPRoute,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> list[tuple[tuple[str, ...], list[str], Gateway]]:
    """Per parentRef: the config listeners the route attaches to, its hostnames there."""
    source = source_of(route)
    namespace = route.metadata.namespace or ""
    out: list[tuple[tuple[str, ...], list[str], Gateway]] = []
    hosts = list(route.spec.hostnames) if isinstance(route, ApiHTTPRoute | ApiTLSRoute) else []
    for parent in route.spec.parent_refs:
        pr = ParentResult(parent)
        result.parents.append(pr)
        gw_name = mirrored_name(source.cluster, parent.namespace or source.namespace, parent.name)
        found = gateways.get(f"{namespace}/{gw_name}")
        if found is None or not found[1].accepted:
            why = "is not an accepted Teapot Gateway"
            if found is not None and found[1].refusals[0].rule in _ADDRESS_RULES:
                why = f"has no address ({found[1].refusals[0]})"
            pr.conditions.append(
                Condition("Accepted", False, "NoMatchingParent", f"Gateway {parent.name} {why}")
            )
            continue
        gw, gw_result = found
        listeners: list[str] = []
        served_hosts: list[str] = []
        # No listener of that sectionName and port: NoMatchingParent (Gateway API).
        reason = "NoMatchingParent"
        for listener in gw.spec.listeners:
            if parent.section_name and listener.name != parent.section_name:
                continue
            if parent.port and listener.port != parent.port:
                continue
            if reason == "NoMatchingParent":
                reason = "NotAllowedByListeners"
            if listener.protocol not in _ROUTE_PROTOCOLS[route.kind]:
                continue
            allowed = listener.allowed_routes.namespaces.from_
            if allowed != "All" and source_of(gw).namespace != source.namespace:
                continue
            kinds = [k.get("kind") for k in listener.allowed_routes.kinds]
            if kinds and route.kind not in kinds:
                continue  # allowedRoutes.kinds names other kinds
            met = _hostnames_meet(hosts, listener.hostname)
            if met is None:
                reason = "NoMatchingListenerHostname"
                continue
            # A hostname-less HTTPRoute takes every hostname: on the Gateway's own
            # address as Gateway API says, never on the shared addresses.
            own = route.kind == "HTTPRoute" and gw_result.address is not None
            if route.kind in ("HTTPRoute", "TLSRoute") and not met and not own:
                reason = "HostnameNotAllowed"
                continue
            listeners += _config_listeners(build, listener, gw_result)
            served_hosts += met
            if listener.protocol == ListenerProtocol.HTTPS and listener.tls is not None:
                for ref in listener.tls.certificate_refs:
                    build.certificate(gw, ref.name, met, result.notes)
            gw_result.listeners[listener.name].attached += 1
        if not listeners:
            pr.conditions.append(Condition("Accepted", False, reason, _NOT_ATTACHED[reason]))
            continue
        pr.conditions.append(Condition("Accepted", True, "Accepted"))
        out.append((tuple(dict.fromkeys(listeners)), sorted(set(served_hosts)), gw))
    return out


def _modifier(flt: HTTPRouteFilter, attr: str) -> HeaderModifier | None:
    mod = getattr(flt, attr)
    if mod is None:
        return None
    return HeaderModifier(
        set=tuple(HeaderValue(name=h.name, value=h.value) for h in mod.set),
        add=tuple(HeaderValue(name=h.name, value=h.value) for h in mod.add),
        remove=tuple(mod.remove),
    )


def _match(match: HTTPRouteMatch) -> RouteMatch:
    path = match.path
    kind = PathType.EXACT if path is not None and path.type.value == "Exact" else PathType.PREFIX
    return RouteMatch(
        path=PathMatch(type=kind, value=path.value if path else "/"),
        headers=tuple(HeaderMatch(name=h.name, value=h.value) for h in match.headers),
        query_params=tuple(QueryParamMatch(name=q.name, value=q.value) for q in match.query_params),
        method=match.method,
    )


def _path_change(modifier: HTTPPathModifier | None) -> dict[str, str | None]:
    """An HTTPPathModifier as the config's fields (vetting has made sure the field of its
    type is set)."""
    if modifier is None:
        return {}
    if modifier.type == "ReplaceFullPath":
        return {"path": modifier.replace_full_path}
    return {"replace_prefix_match": modifier.replace_prefix_match}


def _served_rule(rule: HTTPRouteRule, backends: tuple[BackendRef, ...]) -> HTTPRule:
    """The rule with its filters (the served ones: vetting refused the others)."""
    request = response = None
    redirect = rewrite = None
    for flt in rule.filters:
        # (a filter's type says which of its fields is read: vetting refused the others)
        if flt.type == "RequestHeaderModifier":
            request = _modifier(flt, "request_header_modifier")
        if flt.type == "ResponseHeaderModifier":
            response = _modifier(flt, "response_header_modifier")
        r = flt.request_redirect if flt.type == "RequestRedirect" else None
        if r is not None:
            redirect = Redirect(
                scheme=r.scheme, hostname=r.hostname, port=r.port, status_code=r.status_code,
                **_path_change(r.path),
            )  # fmt: skip
        w = flt.url_rewrite if flt.type == "URLRewrite" else None
        if w is not None:
            rewrite = Rewrite(hostname=w.hostname, **_path_change(w.path))
    return HTTPRule(
        matches=tuple(_match(m) for m in rule.matches),
        backends=backends,
        request_headers=request,
        response_headers=response,
        redirect=redirect,
        rewrite=rewrite,
    )


def _http_route(
    build: _Build,
    route: ApiHTTPRoute,
    tenant: Tenant,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> None:
    never = unresolved_backend_refs(route)
    for listeners, hosts, _gw in _attach(build, route, gateways, result):
        rules: list[HTTPRule] = []
        for i, rule in enumerate(route.spec.rules):
            backends = []
            for j, ref in enumerate(rule.backend_refs):
                where = f"spec.rules[{i}].backendRefs[{j}]"
                why = never.get(where)
                if why is not None:  # never followed: no backend, its requests get 500
                    name = config_name("unresolved", ref.namespace or "", ref.kind, ref.name)
                else:
                    name = build.backend(route, tenant, ref.name, ref.port or 0, result)
                if why is None and name in build.missing:
                    why = L7Refusal(
                        L7Rule.BACKEND_NOT_FOUND,
                        where,
                        f"Service {ref.name} port {ref.port} does not exist (no EndpointSlice "
                        "synced, or no such port): its requests are answered 500",
                    )
                if why is not None and why not in result.unresolved:
                    result.unresolved.append(why)
                backends.append(BackendRef(backend=name, weight=ref.weight, missing=bool(why)))
            served = _served_rule(rule, tuple(backends))
            change = served.redirect or served.rewrite
            if change is not None and change.replace_prefix_match is not None:
                # Each PathPrefix match replaces its own prefix: one rule per match.
                rules += [served.model_copy(update={"matches": (m,)}) for m in served.matches]
            else:
                rules.append(served)
        build.http_routes.append(
            HTTPRoute(
                owner=_owner(route, tenant, RouteKind.HTTP_ROUTE),
                listeners=listeners,
                hostnames=tuple(hosts),
                semantics=RouteSemantics.HTTP_ROUTE,
                created=_created(route),
                rules=tuple(rules),
            )
        )


def _stream_route(
    build: _Build,
    route: ApiTLSRoute | ApiTCPRoute | ApiUDPRoute,
    tenant: Tenant,
    gateways: Mapping[str, tuple[Gateway, ObjectResult]],
    result: ObjectResult,
) -> None:
    kind = {
        "TLSRoute": RouteKind.TLS_ROUTE,
        "TCPRoute": RouteKind.TCP_ROUTE,
        "UDPRoute": RouteKind.UDP_ROUTE,
    }[route.kind]
    for listeners, hosts, _gw in _attach(build, route, gateways, result):
        backends = tuple(
            BackendRef(
                backend=build.backend(route, tenant, ref.name, ref.port or 0, result),
                weight=ref.weight,
            )
            for rule in route.spec.rules
            for ref in rule.backend_refs
        )
        owner = _owner(route, tenant, kind)
        if isinstance(route, ApiTLSRoute):
            build.tls_routes.append(
                TLSRoute(owner=owner, listeners=listeners, hostnames=tuple(hosts),
                         created=_created(route), backends=backends)
            )  # fmt: skip
        elif isinstance(route, ApiTCPRoute):
            build.tcp_routes.append(
                StreamRoute(owner=owner, listeners=listeners, backends=backends)
            )
        else:
            build.udp_routes.append(
                StreamRoute(owner=owner, listeners=listeners, backends=backends)
            )


# --------------------------------------------------------------------------- one tenant


@dataclass(frozen=True)
class Vetted:
    """One object of a tenant as vetting left it: its refusals, the parts left out (when
    accepted) and the dedicated address it asks for (None: the shared ones)."""

    obj: L7Object
    owner: Tenant
    refusals: tuple[L7Refusal, ...]
    dropped: tuple[L7Refusal, ...]
    want: Wanted | None

    @property
    def order(self) -> ObjectOrder:
        return object_order(self.obj)


ObjectOrder = tuple[int, str, str, str, str]


def object_order(obj: L7Object) -> ObjectOrder:
    """The order objects are taken in: Gateways before routes, then oldest first
    (creationTimestamp, namespace, name, kind)."""
    return (0 if isinstance(obj, Gateway) else 1, *_order(obj), obj.kind)


def vet_tenant(objects: Iterable[L7Object], owner: Tenant, world: L7World) -> tuple[Vetted, ...]:
    """The tenant's served objects (in :func:`object_order`) vetted against `world` (every
    object that can take one of their hostnames or ports: all of them, or a part that
    holds those)."""
    out = []
    for obj in objects:
        refusals = tuple(vet_object(obj, world))
        dropped = () if refusals else tuple(unserved_parts(obj, world))
        want = wanted_address(obj, owner) if isinstance(obj, Ingress | Gateway) else None
        out.append(
            Vetted(obj, owner, refusals, dropped, want if isinstance(want, Wanted) else None)
        )
    return tuple(out)


def dedicated_wanted(
    vetted: Iterable[Vetted],
) -> list[tuple[Ingress | Gateway, Tenant, Wanted]]:
    """What :func:`~teapot_lb.tenancy.l7address.assign` takes: the accepted objects asking
    for a dedicated address, oldest first."""
    wanted = sorted((v for v in vetted if v.want is not None and not v.refusals), key=_vet_order)
    return [(v.obj, v.owner, v.want) for v in wanted if isinstance(v.obj, Ingress | Gateway)
            and v.want is not None]  # fmt: skip


def _vet_order(v: Vetted) -> ObjectOrder:
    return v.order


@dataclass(frozen=True)
class Part:
    """What one tenant's objects add to the config: a tenant's Gateways, routes, backends
    and certificates are its namespace's only, so a part is built from that tenant's
    objects, slices and Secrets alone (with its vetting and dedicated addresses). Routes
    in :func:`object_order`."""

    results: dict[ObjectRef, ObjectResult]
    listeners: dict[str, Listener]
    dedicated: dict[str, IPAddress]
    certificates: dict[str, Certificate]
    offered: dict[str, set[IPAddress | None]]
    backends: dict[str, Backend]
    http_routes: tuple[HTTPRoute, ...]
    tls_routes: tuple[TLSRoute, ...]
    tcp_routes: tuple[StreamRoute, ...]
    udp_routes: tuple[StreamRoute, ...]


def build_part(
    vetted: Sequence[Vetted],
    dedicated: Dedicated,
    secrets: Mapping[str, Mapping[str, bytes]],
    slices: Sequence[KubeObject],
    addresses: tuple[IPAddress, ...],
) -> Part:
    """One tenant's part of the config and its objects' results. `vetted` in
    :func:`object_order`; `dedicated`: the addresses given (at least this tenant's);
    `slices` and `secrets`: (at least) those of the tenant's namespace."""
    build = _Build(secrets, slices, addresses)
    results: dict[ObjectRef, ObjectResult] = {}
    for v in vetted:
        ref = v.obj.ref
        result = ObjectResult(
            v.obj, tenant=v.owner.name, refusals=list(v.refusals), dropped=list(v.dropped)
        )
        refusal = dedicated.refused.get(ref)
        if refusal is not None:
            result.refusals.append(
                L7Refusal(L7Rule(refusal.reason), refusal.field, refusal.message)
            )
        result.address = dedicated.addresses.get(ref)
        if result.address is not None:
            build.placed[ref] = result.address
        results[ref] = result
    gateways: dict[str, tuple[Gateway, ObjectResult]] = {}
    for v in vetted:
        obj, owner = v.obj, v.owner
        result = results[obj.ref]
        if isinstance(obj, Gateway):
            gateways[f"{obj.metadata.namespace}/{obj.name}"] = (obj, result)
        if not result.accepted:
            continue
        if isinstance(obj, Ingress):
            _ingress(build, obj, owner, result)
        elif isinstance(obj, Gateway):
            _gateway(build, obj, owner, result)
        elif isinstance(obj, ApiHTTPRoute):
            _http_route(build, obj, owner, gateways, result)
        else:
            _stream_route(build, obj, owner, gateways, result)
    return Part(
        results, build.listeners, build.dedicated, build.certificates, build.offered,
        build.backends, tuple(build.http_routes), tuple(build.tls_routes),
        tuple(build.tcp_routes), tuple(build.udp_routes),
    )  # fmt: skip


def shared_listeners(addresses: tuple[IPAddress, ...]) -> dict[str, Listener]:
    """The listeners always bound: a name nobody serves gets the gateway's 404 (HTTPS:
    behind the gateway's own certificate), not a refused connection."""
    build = _Build({}, (), addresses)
    build.shared(Protocol.HTTP)
    build.shared(Protocol.HTTPS)
    return build.listeners


def merge(parts: Sequence[Part], addresses: tuple[IPAddress, ...]) -> Translation:
    """The config of the tenants' parts, in namespace order (a route's place among other
    tenants' decides nothing: routing orders by age, namespace and name first,
    :mod:`teapot_lb.gateway.routing`)."""
    listeners = shared_listeners(addresses)
    dedicated: dict[str, IPAddress] = {}
    offered: dict[str, set[IPAddress | None]] = {}
    results: dict[ObjectRef, ObjectResult] = {}
    for part in parts:
        for name, x in part.listeners.items():
            listeners.setdefault(name, x)
        dedicated.update(part.dedicated)
        offered.update(part.offered)
        results.update(part.results)
    # HTTPS listeners offer every certificate of their objects (SNI picks; the gateway's
    # own by default, a dedicated listener's too): the shared ones every tenant's on the
    # shared addresses, a dedicated one its tenant's objects' there.
    certificates = tuple(chain.from_iterable(p.certificates.values() for p in parts))
    names = sorted(c.name for c in certificates)
    for name, x in listeners.items():
        if x.protocol is Protocol.HTTPS:
            place = dedicated.get(name)
            certs = tuple(c for c in names if place in offered[c])
            listeners[name] = x.model_copy(update={"certificates": certs})

    def each(kind: str) -> tuple[Any, ...]:
        return tuple(chain.from_iterable(map(attrgetter(kind), parts)))

    config = GatewayConfig.model_construct(
        listeners=tuple(listeners.values()),
        certificates=certificates,
        backends=tuple(chain.from_iterable(p.backends.values() for p in parts)),
        http_routes=each("http_routes"),
        tls_routes=each("tls_routes"),
        tcp_routes=each("tcp_routes"),
        udp_routes=each("udp_routes"),
        default_certificate=None,
    )
    return Translation(config, results, addresses)


# --------------------------------------------------------------------------- entry point


def tenant_namespaces(tenants: Sequence[Tenant]) -> dict[str, Tenant | None]:
    """Per tenant namespace its one Tenant (None: claimed by several, nobody's objects)."""
    out: dict[str, Tenant | None] = {}
    for t in tenants:
        owner = tenant_of(t.spec.namespace, tenants)
        out[t.spec.namespace] = owner if isinstance(owner, Tenant) else None
    return out


def by_namespace(
    world: L7World, slices: Iterable[KubeObject], *, ordered: bool = True
) -> dict[str, tuple[list[L7Object], list[KubeObject], dict[str, Mapping[str, bytes]]]]:
    """Each namespace's served objects (in :func:`object_order`, or as given), slices and
    Secrets."""
    out: dict[str, tuple[list[L7Object], list[KubeObject], dict[str, Mapping[str, bytes]]]] = {}

    def of(namespace: str) -> tuple[list[L7Object], list[KubeObject], dict[str, Any]]:
        return out.setdefault(namespace, ([], [], {}))

    for obj in world.objects:
        if served_here(obj):
            of(obj.metadata.namespace or "")[0].append(obj)
    for eps in slices:
        of(eps.get("metadata", {}).get("namespace") or "")[1].append(eps)
    for key, data in (world.secrets or {}).items():
        of(key.partition("/")[0])[2][key] = data
    for objects, _, _ in out.values() if ordered else ():
        objects.sort(key=object_order)
    return out


def translate(
    world: L7World, slices: Iterable[KubeObject], addresses: Sequence[IPAddress]
) -> Translation:
    """The config the gateway serves and every object's result, translated from scratch
    (:class:`~teapot_lb.gateway.translation_cache.TranslationCache` keeps the parts and
    translates only the tenants a change touches). Objects are taken in
    :func:`object_order` per tenant namespace, the namespaces in order."""
    shared = tuple(addresses)
    owners = tenant_namespaces(world.tenants)
    inputs = by_namespace(world, slices)
    vetted: dict[str, tuple[Vetted, ...]] = {}
    for namespace, (objects, _, _) in sorted(inputs.items()):
        owner = owners.get(namespace)
        if owner is not None:
            vetted[namespace] = vet_tenant(objects, owner, world)
    wanted = dedicated_wanted(chain.from_iterable(vetted.values()))
    dedicated = assign(wanted, world.pools, world.held, shared)
    parts = [
        build_part(vs, dedicated, inputs[ns][2], inputs[ns][1], shared) for ns, vs in vetted.items()
    ]
    return merge(parts, shared)


def _order(obj: L7Object) -> tuple[str, str, str]:
    created = obj.metadata.creation_timestamp
    return (created.isoformat() if created else "~", obj.metadata.namespace or "", obj.name)


__all__ = [
    "Condition",
    "ListenerResult",
    "ObjectOrder",
    "ObjectResult",
    "ParentResult",
    "Part",
    "Source",
    "Translation",
    "Vetted",
    "build_part",
    "by_namespace",
    "config_name",
    "dedicated_wanted",
    "merge",
    "object_order",
    "shared_listeners",
    "tenant_namespaces",
    "translate",
    "vet_tenant",
]
