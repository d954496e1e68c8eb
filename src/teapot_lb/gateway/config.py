"""GatewayConfig: everything the gateway serves, as frozen typed data, free of Kubernetes.

The control plane (`gateway.translate`) builds one from vetted Ingresses and Gateway API
routes; standalone mode reads one from a YAML/JSON file of the same shape (camelCase keys,
like our other kinds). The renderer turns it into haproxy.cfg + crt-list (and nginx.conf for
UDP); the driver applies the difference (runtime API for endpoints and certificates, a
seamless reload for the rest).

Shape (every collection is a tuple; names are ids referenced by other parts)::

    GatewayConfig
      listeners:    Listener(name, address, port, protocol, certificates=[cert names])
      certificates: Certificate(name, hostnames, certPem+keyPem | certFile+keyFile, owner)
      backends:     Backend(name, endpoints=[Endpoint(address, port, ready)],
                            healthCheck, proxyProtocol, slots, owner)
      httpRoutes:   HTTPRoute(owner, listeners, hostnames, semantics=Ingress|HTTPRoute,
                              created, rules=[HTTPRule(matches=[RouteMatch(path, headers,
                              queryParams, method)], backends=[BackendRef(backend, weight,
                              missing)], requestHeaders, responseHeaders, redirect, rewrite)])
      tlsRoutes:    TLSRoute(owner, listeners, hostnames, backends)   # passthrough by SNI
      tcpRoutes:    StreamRoute(owner, listeners, backends)           # a TCP listener
      udpRoutes:    StreamRoute(owner, listeners, backends)           # a UDP listener (nginx)
      defaultCertificate: Certificate  # the gateway's own (HTTPS default); None: generated

`problems(config)` lists what is inconsistent (unknown names, two listeners on one
IP:port, a route on a listener of the wrong protocol), each naming the part and field.
Add fields freely; do not rename (the control plane builds these).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Iterator
from enum import StrEnum
from itertools import compress, count
from typing import Annotated, Self, TypeVar

from pydantic import Field, model_validator

from teapot_lb.model.common import IPAddressField, KubeModel

Port = Annotated[int, Field(ge=1, le=65535)]
Name = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]*$")]
"""An id inside the config (a listener, certificate or backend name): letters, digits,
'-', '_', '.'; it appears in haproxy.cfg, so nothing else is allowed."""


HOSTNAME_PATTERN = (
    r"^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$"
)
Hostname = Annotated[str, Field(max_length=253, pattern=HOSTNAME_PATTERN)]
"""A DNS name, or `*.` and a DNS name (a wildcard): nothing else reaches HAProxy's maps."""

Text = Annotated[str, Field(max_length=4096, pattern=r"^[^\x00-\x1f\x7f]*$")]
"""A value that ends up in haproxy.cfg (quoted there): no control characters, so no new
line can ever be started from inside a value."""


class Protocol(StrEnum):
    """What a listener speaks to clients."""

    HTTP = "HTTP"
    HTTPS = "HTTPS"  # TLS terminated here, SNI picks the certificate
    TLS_PASSTHROUGH = "TLSPassthrough"  # TLS forwarded untouched, SNI picks the backend
    TCP = "TCP"
    UDP = "UDP"  # served by nginx's stream module, not HAProxy


class RouteKind(StrEnum):
    """The kind of object a route came from (metrics labels, explain)."""

    INGRESS = "Ingress"
    HTTP_ROUTE = "HTTPRoute"
    TLS_ROUTE = "TLSRoute"
    TCP_ROUTE = "TCPRoute"
    UDP_ROUTE = "UDPRoute"
    SERVICE = "Service"
    CONFIG = "Config"  # written by hand in a standalone config file


class Owner(KubeModel):
    """Who a part belongs to: the labels of its metrics and what `explain` prints."""

    tenant: str = ""
    kind: RouteKind = RouteKind.CONFIG
    namespace: str = ""
    name: str = ""

    def label(self) -> str:
        """`tenant/Kind/namespace/name`: one string for logs and explain."""
        return f"{self.tenant}/{self.kind}/{self.namespace}/{self.name}"


# --- listeners and certificates -----------------------------------------------------------


class Listener(KubeModel):
    """One IP:port and what it speaks; one HAProxy frontend (nginx server for UDP)."""

    name: Name
    address: IPAddressField
    port: Port
    protocol: Protocol
    certificates: tuple[Name, ...] = ()
    """HTTPS: the certificates offered, each for its hostnames (SNI picks). A client
    without SNI, or with a name none of them is offered for, gets the gateway's own
    certificate (`GatewayConfig.default_certificate`), never one of these."""
    alpn: tuple[Annotated[str, Field(pattern=r"^[a-z0-9./-]+$")], ...] = ("h2", "http/1.1")
    """HTTPS: protocols offered by ALPN, in order of preference."""


class Certificate(KubeModel):
    """A certificate and its key, either inline PEM or paths to PEM files.

    `hostnames` are the SNI names it answers (exact or `*.suffix`); empty means the names
    in the certificate itself (its subjectAltName DNS names, else its subject CN, read by
    the driver when it loads the PEM).
    """

    name: Name
    hostnames: tuple[Hostname, ...] = ()
    cert_pem: str | None = None
    key_pem: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    owner: Owner = Owner()

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        inline = self.cert_pem is not None or self.key_pem is not None
        files = self.cert_file is not None or self.key_file is not None
        if inline == files:
            raise ValueError("give either certPem and keyPem, or certFile and keyFile")
        if inline and (self.cert_pem is None or self.key_pem is None):
            raise ValueError("certPem and keyPem go together")
        if files and self.cert_file is None:
            raise ValueError("certFile is needed (keyFile alone is not a certificate)")
        return self


# --- backends -----------------------------------------------------------------------------


class Endpoint(KubeModel):
    """One backend server. Not ready endpoints are kept (in maintenance), not served."""

    address: IPAddressField
    port: Port
    ready: bool = True


class HealthCheck(KubeModel):
    """Active health checks of a backend's endpoints (HAProxy `check`)."""

    interval_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 2000
    rise: Annotated[int, Field(ge=1, le=100)] = 2
    fall: Annotated[int, Field(ge=1, le=100)] = 3
    http_path: Text | None = None
    """HTTP backends: GET this path and expect 2xx/3xx; None: a TCP connect check."""
    timeout_ms: Annotated[int, Field(ge=100, le=3_600_000)] | None = None
    """How long one check may wait for its answer (HAProxy `timeout check`); None: the
    interval."""
    http_method: Annotated[str, Field(pattern=r"^[A-Z]{1,16}$")] = "GET"
    http_version: Annotated[str, Field(pattern=r"^HTTP/1\.[01]$")] | None = None
    """The check request's version (None: HAProxy's HTTP/1.0)."""
    http_host: Hostname | None = None
    """The check request's Host header (None: none)."""
    expect_status: Annotated[str, Field(pattern=r"^\d{3}(-\d{3})?(,\d{3}(-\d{3})?)*$")] | None = (
        None
    )
    """The answers that pass, as Octavia writes them (`200`, `200,202`, `200-204`); None:
    any 2xx or 3xx."""
    tls: bool = False
    """Check over TLS (certificates not verified: the check asks whether the member
    answers, not who it is)."""


class Backend(KubeModel):
    """A set of endpoints one or more routes send to (a Service's port, usually)."""

    name: Name
    endpoints: tuple[Endpoint, ...] = ()
    health_check: HealthCheck | None = None
    proxy_protocol: bool = False
    """Send PROXY protocol v2 to the endpoints (they then see the client's address)."""
    slots: Annotated[int, Field(ge=1, le=10_000)] | None = None
    """Server slots HAProxy keeps for this backend (endpoint changes within them need no
    reload); None: the endpoint count rounded up (see slots.slot_count)."""
    owner: Owner = Owner()


class BackendRef(KubeModel):
    """A weighted reference to a backend (HTTPRoute backendRefs, weight 0 = no traffic)."""

    backend: Name
    weight: Annotated[int, Field(ge=0, le=1_000_000)] = 1
    missing: bool = False
    """The reference does not resolve (an HTTPRoute's Service that does not exist, or has
    no such port): the requests its weight picks are answered 500, as Gateway API says
    (TCP: the connection is closed); no backend of that name is needed."""


# --- HTTP routes ----------------------------------------------------------------------------


class PathType(StrEnum):
    """How a path is matched. Prefix is by path element, both for Ingress `Prefix` and
    HTTPRoute `PathPrefix`: `/foo` matches `/foo` and `/foo/bar`, not `/foobar`."""

    EXACT = "Exact"
    PREFIX = "Prefix"
    REGULAR_EXPRESSION = "RegularExpression"


class PathMatch(KubeModel):
    type: PathType = PathType.PREFIX
    value: Annotated[Text, Field(min_length=1, max_length=1024)] = "/"

    @model_validator(mode="after")
    def _absolute(self) -> Self:
        if self.type != PathType.REGULAR_EXPRESSION and not self.value.startswith("/"):
            raise ValueError(f"path {self.value!r} must start with '/'")
        return self


class ValueMatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


HeaderName = Annotated[
    str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9!&*+.^_|~-]+$")
]
"""An HTTP header name (RFC 9110 token without the characters HAProxy's configuration
reads as quotes, comments or variables: ' " # $ ` %)."""


class HeaderMatch(KubeModel):
    """A request header equal to (or matching) a value; header names are case-insensitive."""

    name: HeaderName
    value: Text
    type: ValueMatchType = ValueMatchType.EXACT


class QueryParamMatch(KubeModel):
    """A query parameter equal to (or matching) a value; parameter names are exact."""

    name: Annotated[Text, Field(min_length=1, max_length=256)]
    value: Text
    type: ValueMatchType = ValueMatchType.EXACT


class RouteMatch(KubeModel):
    """All given conditions must hold (HTTPRoute `matches[]` item)."""

    path: PathMatch = PathMatch()
    headers: tuple[HeaderMatch, ...] = ()
    query_params: tuple[QueryParamMatch, ...] = ()
    method: Annotated[str, Field(pattern=r"^[A-Z]+$")] | None = None


class HeaderValue(KubeModel):
    name: HeaderName
    value: Text


class HeaderModifier(KubeModel):
    """HTTPRoute RequestHeaderModifier / ResponseHeaderModifier: set, add, remove."""

    set: tuple[HeaderValue, ...] = ()
    add: tuple[HeaderValue, ...] = ()
    remove: tuple[HeaderName, ...] = ()


def _one_path_change(full: str | None, prefix: str | None) -> None:
    """HTTPPathModifier: a full path starts with '/'; a prefix replacement is '' (the
    matched prefix removed) or starts with '/'; never both."""
    if full is not None and prefix is not None:
        raise ValueError("give either path or replacePrefixMatch, not both")
    if full is not None and not full.startswith("/"):
        raise ValueError(f"path {full!r} must start with '/'")
    if prefix not in (None, "") and not prefix.startswith("/"):
        raise ValueError(f"replacePrefixMatch {prefix!r} must be empty or start with '/'")


class Redirect(KubeModel):
    """HTTPRoute RequestRedirect: unset parts keep the request's own."""

    scheme: Annotated[str, Field(pattern=r"^(http|https)$")] | None = None
    hostname: Hostname | None = None
    port: Port | None = None
    path: Text | None = None
    """Replace the full path with this one (ReplaceFullPath)."""
    replace_prefix_match: Text | None = None
    """Replace the rule's Prefix match (by path element) with this (ReplacePrefixMatch):
    match `/foo`, replacement `/xyz`: `/foo/bar` -> `/xyz/bar`; '' removes the prefix
    (`/foo/bar` -> `/bar`, `/foo` -> `/`). Every match of the rule must be that one
    Prefix path (`problems` says so otherwise)."""
    status_code: int = 302

    @model_validator(mode="after")
    def _status(self) -> Self:
        if self.status_code not in (301, 302, 303, 307, 308):
            raise ValueError(f"statusCode {self.status_code} is not a redirect")
        _one_path_change(self.path, self.replace_prefix_match)
        return self


class Rewrite(KubeModel):
    """HTTPRoute URLRewrite: what the backend is sent instead of the request's Host and
    path (routing has been decided by then; the client sees nothing of it). The path
    fields mean what they mean in :class:`Redirect`; the query string is kept."""

    hostname: Hostname | None = None
    path: Text | None = None
    replace_prefix_match: Text | None = None

    @model_validator(mode="after")
    def _path(self) -> Self:
        _one_path_change(self.path, self.replace_prefix_match)
        return self


class HTTPRule(KubeModel):
    """One rule: any of `matches` (empty: every request) sends to `backends` (weighted),
    after the header modifiers and the rewrite, unless `redirect` answers first."""

    matches: tuple[RouteMatch, ...] = ()
    backends: tuple[BackendRef, ...] = ()
    request_headers: HeaderModifier | None = None
    response_headers: HeaderModifier | None = None
    redirect: Redirect | None = None
    rewrite: Rewrite | None = None

    def replaced_prefix(self) -> str | None:
        """The Prefix path a ReplacePrefixMatch (of the redirect or the rewrite) replaces:
        the one Prefix value of every match ('/' without matches); None when the rule has
        no such replacement or its matches are not one Prefix path."""
        change = self.redirect or self.rewrite
        if change is None or change.replace_prefix_match is None:
            return None
        paths = {m.path for m in self.matches} or {PathMatch()}
        if len(paths) != 1:
            return None
        (path,) = paths
        return path.value if path.type == PathType.PREFIX else None


class RouteSemantics(StrEnum):
    """Whose rules decide wildcard hostnames (the precedence of matches is the same).

    Ingress: `*.foo.com` covers exactly one label (`bar.foo.com`, not `a.bar.foo.com`).
    HTTPRoute: `*.foo.com` covers any number of labels; never `foo.com` itself.
    """

    INGRESS = "Ingress"
    HTTP_ROUTE = "HTTPRoute"


class HTTPRoute(KubeModel):
    """HTTP routing for some hostnames on some listeners (an Ingress or an HTTPRoute).

    Precedence across all routes of a listener (Ingress docs and HTTPRoute spec agree on
    the order below; ties then go to the oldest route (`created`), then namespace/name,
    then the rule's and match's position):
    exact hostname before wildcard (longer suffix first) before no hostname;
    Exact path before Prefix on the same path, longer path first; a method match;
    more header matches; more query parameter matches.
    """

    owner: Owner = Owner()
    listeners: tuple[Name, ...]
    hostnames: tuple[Hostname, ...] = ()
    semantics: RouteSemantics = RouteSemantics.HTTP_ROUTE
    created: str = ""
    """Creation time (RFC 3339) of the source object: older wins a tie."""
    rules: tuple[HTTPRule, ...] = ()


class TLSRoute(KubeModel):
    """TLS passthrough: a ClientHello whose SNI is one of `hostnames` goes to `backends`."""

    owner: Owner = Owner()
    listeners: tuple[Name, ...]
    hostnames: tuple[Hostname, ...]
    created: str = ""
    backends: tuple[BackendRef, ...] = ()


class StreamRoute(KubeModel):
    """A TCP or UDP listener's traffic, all of it, to `backends` (TCPRoute, UDPRoute,
    a LoadBalancer Service port)."""

    owner: Owner = Owner()
    listeners: tuple[Name, ...]
    backends: tuple[BackendRef, ...] = ()


class GatewayConfig(KubeModel):
    """Everything one gateway serves. Build it, check `problems(config)`, render it."""

    listeners: tuple[Listener, ...] = ()
    certificates: tuple[Certificate, ...] = ()
    backends: tuple[Backend, ...] = ()
    http_routes: tuple[HTTPRoute, ...] = ()
    tls_routes: tuple[TLSRoute, ...] = ()
    tcp_routes: tuple[StreamRoute, ...] = ()
    udp_routes: tuple[StreamRoute, ...] = ()
    default_certificate: Certificate | None = None
    """The gateway's own certificate, the one every HTTPS listener presents to a client
    without SNI or with a name no certificate is offered for (its `hostnames` must be
    empty: it is offered for no name). None: one generated when the gateway starts,
    self-signed, subject `CN=teapot-lb gateway default`."""

    def listener(self, name: str) -> Listener | None:
        return next((x for x in self.listeners if x.name == name), None)

    def backend(self, name: str) -> Backend | None:
        return next((b for b in self.backends if b.name == name), None)

    def certificate(self, name: str) -> Certificate | None:
        return next((c for c in self.certificates if c.name == name), None)


# --- consistency ----------------------------------------------------------------------------

_ROUTE_PROTOCOLS: dict[str, tuple[Protocol, ...]] = {
    "httpRoutes": (Protocol.HTTP, Protocol.HTTPS),
    "tlsRoutes": (Protocol.TLS_PASSTHROUGH,),
    "tcpRoutes": (Protocol.TCP,),
    "udpRoutes": (Protocol.UDP,),
}


def problems(config: GatewayConfig, sound: GatewayConfig | None = None) -> list[str]:
    """Every inconsistency, as `field path: why` (empty when the config can be rendered).

    `sound`: an earlier config found without problems. Its HTTP routes that `config` holds
    as the same objects (the translation keeps an unchanged tenant's) are not looked at
    again when what their verdict depends on is as it was (the listeners' names and
    protocols, the TLS, TCP and UDP routes, no backend removed): a change costs its own
    routes, not every route. Whatever it finds, the whole check says it, as without it."""
    found = list(_config_problems(config))
    if sound is None or not _new_routes_sound(config, sound):
        found += _route_problems(config)
    return found


def _new_routes_sound(config: GatewayConfig, sound: GatewayConfig) -> bool:
    """Whether `config`'s routes have no problem, given that `sound`'s had none and what
    their verdicts depend on is as it was: only the HTTP routes `sound` did not hold are
    looked at (False: maybe not, check every route)."""
    if (
        [(x.name, x.protocol) for x in config.listeners]
        != [(x.name, x.protocol) for x in sound.listeners]
        or config.tls_routes != sound.tls_routes
        or config.tcp_routes != sound.tcp_routes
        or config.udp_routes != sound.udp_routes
    ):
        return False
    backends = {b.name for b in config.backends}
    if not backends.issuperset(b.name for b in sound.backends):
        return False
    new, _ = changed_objects(sound.http_routes, config.http_routes)
    protocols = {x.name: x.protocol for x in config.listeners}
    allowed = _ROUTE_PROTOCOLS["httpRoutes"]
    stream_routes: tuple[TLSRoute | StreamRoute, ...] = (
        *config.tls_routes,
        *config.tcp_routes,
        *config.udp_routes,
    )
    streams = {ref.backend for route in stream_routes for ref in route.backends}
    for route in new:
        if any(protocols.get(name) not in allowed for name in route.listeners):
            return False
        for rule in route.rules:
            if rule.redirect is not None or rule.rewrite is not None:
                return False  # (its checks are the whole check's)
            for ref in rule.backends:
                if (ref.backend not in backends and not ref.missing) or ref.backend in streams:
                    return False
    return True


_T = TypeVar("_T")


def changed_objects(old: tuple[_T, ...], new: tuple[_T, ...]) -> tuple[list[_T], list[_T]]:
    """The items of `new` that are not objects of `old` (added), and those of `old` that are
    not objects of `new` (removed), each in its tuple's order. The translation keeps an
    unchanged tenant's items as the same objects in the same place: the runs both tuples
    share at their start and end are skipped at C speed, and only what lies between is
    compared by id, so a change costs its own items."""
    if old is new:
        return [], []
    shortest = min(len(old), len(new))
    start = _same_run(old, new, shortest)
    end = (
        0
        if start == shortest
        else min(_same_run(reversed(old), reversed(new), shortest), shortest - start)
    )
    old_mid, new_mid = old[start : len(old) - end], new[start : len(new) - end]
    before, after = set(map(id, old_mid)), set(map(id, new_mid))
    return [x for x in new_mid if id(x) not in before], [x for x in old_mid if id(x) not in after]


def _same_run(a: Iterable[_T], b: Iterable[_T], shortest: int) -> int:
    """How many items at the start of `a` and `b` (the shorter `shortest` long) are the
    same objects. Lazily, in C: it stops at the first pair that differs, with no list nor
    copy made (this scan is the only part of a change as long as the tuples)."""
    return next(compress(count(), map(operator.is_not, a, b)), shortest)


def _config_problems(config: GatewayConfig) -> Iterator[str]:
    for what, names in (
        ("listeners", [x.name for x in config.listeners]),
        ("certificates", [c.name for c in config.certificates]),
        ("backends", [b.name for b in config.backends]),
    ):
        for name, n in Counter(names).items():
            if n > 1:
                yield f"{what}: name {name!r} is used {n} times"
    # One listener per socket, except that an HTTPS and a TLS passthrough listener may
    # share one (SNI decides: passthrough names go through, the rest is terminated).
    by_socket = Counter(
        (str(x.address), x.port, x.protocol == Protocol.UDP)
        for x in config.listeners
        if x.protocol != Protocol.TLS_PASSTHROUGH
    )
    passthrough = Counter(
        (str(x.address), x.port, False)
        for x in config.listeners
        if x.protocol == Protocol.TLS_PASSTHROUGH
    )
    https = {
        (str(x.address), x.port, False) for x in config.listeners if x.protocol == Protocol.HTTPS
    }
    for (address, port, udp), n in (by_socket + passthrough).items():
        key = (address, port, udp)
        shared = passthrough[key] == 1 and key in https and by_socket[key] == 1
        if n > 1 and not shared:
            yield f"listeners: {n} listeners on {address}:{port}/{'udp' if udp else 'tcp'}"
    cert_names = {c.name for c in config.certificates}
    for i, listener in enumerate(config.listeners):
        for cert in listener.certificates:
            if cert not in cert_names:
                yield f"listeners[{i}].certificates: no certificate named {cert!r}"
    default = config.default_certificate
    if default is not None and default.hostnames:
        yield (
            "defaultCertificate.hostnames: the default certificate is offered for no name"
            " (it answers clients whose SNI no other certificate is offered for); remove them"
        )
    for b in config.backends:
        if b.slots is not None and len(b.endpoints) > b.slots:
            yield f"backends ({b.name}): {len(b.endpoints)} endpoints but slots is {b.slots}"


def _route_problems(config: GatewayConfig) -> Iterator[str]:
    backend_names = {b.name for b in config.backends}
    routes: dict[str, tuple[HTTPRoute | TLSRoute | StreamRoute, ...]] = {
        "httpRoutes": config.http_routes,
        "tlsRoutes": config.tls_routes,
        "tcpRoutes": config.tcp_routes,
        "udpRoutes": config.udp_routes,
    }
    stream_listeners: Counter[str] = Counter()
    listeners = {x.name: x for x in reversed(config.listeners)}  # (the first of a name)
    http_backends: set[str] = set()
    # (this runs per route on every apply: a route's label is made for a problem only)
    for field, items in routes.items():
        allowed = _ROUTE_PROTOCOLS[field]
        for i, route in enumerate(items):
            for name in route.listeners:
                found = listeners.get(name)
                if found is None:
                    yield f"{_where(field, i, route)}.listeners: no listener named {name!r}"
                elif found.protocol not in allowed:
                    yield (
                        f"{_where(field, i, route)}.listeners: listener {name!r} speaks"
                        f" {found.protocol}, not {'/'.join(allowed)}"
                    )
                if isinstance(route, StreamRoute):
                    stream_listeners[name] += 1
            refs = list(_backend_refs(route))
            for ref in refs:
                if ref.backend not in backend_names and not ref.missing:
                    yield f"{_where(field, i, route)}: no backend named {ref.backend!r}"
            if isinstance(route, HTTPRoute):
                http_backends.update(r.backend for r in refs)
                for j, rule in enumerate(route.rules):
                    if rule.redirect is not None or rule.rewrite is not None:
                        yield from _rule_problems(rule, f"{_where(field, i, route)}.rules[{j}]")
    for field in ("tlsRoutes", "tcpRoutes", "udpRoutes"):
        for i, route in enumerate(routes[field]):
            for ref in _backend_refs(route):
                if ref.backend in http_backends:
                    yield (
                        f"{field}[{i}]: backend {ref.backend!r} is also an HTTP route's"
                        " (a backend speaks HTTP or TCP, not both)"
                    )
    for name, n in stream_listeners.items():
        if n > 1:
            yield f"listeners ({name}): {n} TCP/UDP routes on one listener (one only)"


def _where(field: str, i: int, route: HTTPRoute | TLSRoute | StreamRoute) -> str:
    return f"{field}[{i}] ({route.owner.label()})"


def _rule_problems(rule: HTTPRule, where: str) -> Iterator[str]:
    if rule.redirect is not None and rule.rewrite is not None:
        yield f"{where}: a redirect and a rewrite exclude each other"
    change = rule.redirect or rule.rewrite
    prefixed = change is not None and change.replace_prefix_match is not None
    if prefixed and rule.replaced_prefix() is None:
        yield (
            f"{where}: replacePrefixMatch needs every match of the rule to be one Prefix"
            " path (the prefix it replaces)"
        )


def _backend_refs(route: HTTPRoute | TLSRoute | StreamRoute) -> Iterator[BackendRef]:
    if isinstance(route, HTTPRoute):
        for rule in route.rules:
            yield from rule.backends
    else:
        yield from route.backends
