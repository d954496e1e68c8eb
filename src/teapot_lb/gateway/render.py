"""GatewayConfig → haproxy.cfg, crt-lists and certificate files. Pure: no file is read or
written here (the driver does both), certificate PEMs come in as text.

Layout of the rendered configuration:
- one frontend per HAProxy listener (`fe_<listener>`): HTTP and HTTPS in http mode, TLS
  passthrough and TCP in tcp mode; HTTPS binds with a crt-list (SNI picks the certificate;
  its first line, the default, is the gateway's own certificate, never a tenant's) and
  ALPN (h2, http/1.1); an HTTPS request whose Host would not have chosen the certificate
  its connection's SNI chose is answered 421 (two maps, name -> certificate, looked up
  for both when they differ; see `_misdirected`); an HTTPS and a TLS passthrough
  listener may share one IP:port: the passthrough frontend binds it, sends its SNIs to
  their backends and every other connection through an internal hop (an abstract socket,
  PROXY v2 so the client's address survives) to the terminating frontend, which binds
  the hop;
- HTTP routing in three steps, so that precedence is data rather than nested ifs:
  `txn.vh` := the first virtual host that covers the Host header (routing.table's order);
  `txn.rule` := the first entry of that virtual host whose conditions hold; then every
  rule's actions (redirect, header modifiers, weighted use_backend) keyed on `txn.rule`;
- one backend per config backend (`be_<backend>`) with a fixed number of server slots
  (slots.py); a slot's address and state are runtime state, so the *structure* of the
  configuration (what needs a reload to change) is the text with slot addresses masked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from pathlib import PurePath

from teapot_lb.gateway import hosts, routing
from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    GatewayConfig,
    HeaderModifier,
    HealthCheck,
    HTTPRoute,
    HTTPRule,
    Listener,
    PathType,
    Protocol,
    Redirect,
    RouteMatch,
    RouteSemantics,
    ValueMatchType,
)
from teapot_lb.gateway.slots import Slot, SlotTable

HAPROXY_PROTOCOLS = (Protocol.HTTP, Protocol.HTTPS, Protocol.TLS_PASSTHROUGH, Protocol.TCP)
EMPTY_SLOT = "127.0.0.1:1"  # an empty slot's address; it is in maintenance, never used
SLOT_MASK = "<slot>"
DEFAULT_CERTIFICATE = "_default"
"""The gateway's own certificate's name among the PEMs (a config name cannot start with
'_', so no tenant's certificate can take it)."""
DEFAULT_SNI = "teapot-lb-gateway-default.invalid"
"""The default certificate's one SNI filter (RFC 6761 `.invalid`: no client's real name):
with a filter, HAProxy offers it by no name of its own (an operator's certificate naming a
tenant's hostname would otherwise compete for it); as the crt-list's first line it stays
the default."""
NO_CERTIFICATE = "-"
"""What the certificate maps give for a name no certificate is offered for."""


@dataclass(frozen=True)
class Paths:
    """Where the gateway's files live (one directory per HAProxy instance)."""

    base: PurePath

    @property
    def config(self) -> PurePath:
        return self.base / "haproxy.cfg"

    @property
    def admin_socket(self) -> PurePath:
        return self.base / "admin.sock"

    @property
    def master_socket(self) -> PurePath:
        return self.base / "master.sock"

    @property
    def pid_file(self) -> PurePath:
        return self.base / "haproxy.pid"

    def map(self, listener: str, what: str) -> PurePath:
        return self.base / "maps" / f"{listener}-{what}.map"

    def crt_list(self, listener: str) -> PurePath:
        return self.base / f"crt-{listener}.list"

    def certificate(self, name: str) -> PurePath:
        return self.base / "certs" / f"{name}.pem"

    def hop(self, listener: str) -> str:
        """The internal socket of an HTTPS listener behind a passthrough one (abstract:
        no file, unique per state directory and listener)."""
        digest = hashlib.sha256(f"{self.base}\0{listener}".encode()).hexdigest()[:24]
        return f"abns@teapot-gw-{digest}"


def shared_sockets(config: GatewayConfig) -> dict[str, str]:
    """HTTPS and TLS passthrough listeners on the same IP:port: each one's partner by name
    (both directions)."""
    by_socket: dict[tuple[str, int], dict[Protocol, str]] = {}
    for x in config.listeners:
        by_socket.setdefault((str(x.address), x.port), {})[x.protocol] = x.name
    out: dict[str, str] = {}
    for names in by_socket.values():
        https, tls = names.get(Protocol.HTTPS), names.get(Protocol.TLS_PASSTHROUGH)
        if https is not None and tls is not None:
            out[https], out[tls] = tls, https
    return out


@dataclass(frozen=True)
class Rendered:
    """What HAProxy is given: files by path, the structure (compare two renderings to know
    whether a reload is needed), the slot table and the certificates' PEMs by path."""

    files: dict[str, str]
    structure: str
    slots: SlotTable
    certificates: dict[str, str] = field(default_factory=dict)
    crt_lists: dict[str, str] = field(default_factory=dict)
    """Each HTTPS listener's crt-list by path (not in `structure`: a certificate added to
    one can go over the runtime API)."""
    certificate_maps: dict[str, str] = field(default_factory=dict)
    """Each HTTPS listener's name -> certificate maps by path (not in `structure`: the
    names of a certificate added without a reload are added to them over the runtime
    API)."""
    parts: Parts | None = None
    """What this rendering was made from, per part, for the next one to reuse."""


@dataclass(frozen=True)
class HTTPFrontend:
    """An HTTP(S) listener's frontend lines and map files, with the inputs they were
    rendered from: the next rendering reuses them when those are equal."""

    listener: Listener
    behind: bool
    paths: Paths
    routes: tuple[HTTPRoute, ...]
    lines: tuple[str, ...]
    maps: dict[str, str]

    def made_from(
        self, listener: Listener, behind: bool, paths: Paths, routes: tuple[HTTPRoute, ...]
    ) -> bool:
        # Unchanged tenants' routes are the same objects (the translation keeps them): the
        # tuple comparison is mostly identity checks.
        return (
            self.routes == routes
            and self.listener == listener
            and self.behind == behind
            and self.paths == paths
        )


@dataclass(frozen=True)
class BackendSection:
    """A backend's text and structure, with what they were rendered from."""

    backend: Backend
    slots: tuple[Slot, ...]
    http: bool
    text: tuple[str, ...]
    structure: tuple[str, ...]


@dataclass(frozen=True)
class Parts:
    """The parts of a rendering a later one may reuse: what an endpoint-only or
    certificate-only change leaves as it was costs a comparison, not a render.

    `routes`: the config's HTTP routes the HTTP backends were found in (`http_backends`);
    `frontends` by listener name; `backends` by backend name."""

    routes: tuple[HTTPRoute, ...]
    http_backends: frozenset[str]
    frontends: dict[str, HTTPFrontend]
    backends: dict[str, BackendSection]


def quote(text: str) -> str:
    """One HAProxy configuration word, whatever it contains (single quotes: no escapes,
    no variable expansion; a quote inside is closed, escaped, reopened)."""
    return "'" + text.replace("'", "'\\''") + "'"


def log_format(text: str) -> str:
    """A literal inside a log-format argument (set-header values, redirect locations)."""
    return text.replace("%", "%%")


def host_port(address: IPv4Address | IPv6Address, port: int) -> str:
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def server_name(index: int) -> str:
    return f"s{index + 1}"


def backend_id(name: str) -> str:
    return f"be_{name}"


def frontend_id(name: str) -> str:
    return f"fe_{name}"


def hop_id(name: str) -> str:
    """The tcp backend that hands connections to HTTPS listener `name` (not a `be_`)."""
    return f"hop_{name}"


def _hop_backend(listener: str, paths: Paths) -> list[str]:
    return [
        f"backend {hop_id(listener)}",
        "    mode tcp",
        f"    server hop {paths.hop(listener)} send-proxy-v2",
        "",
    ]


# --- sections ------------------------------------------------------------------------------


def _global(paths: Paths) -> list[str]:
    return [
        "global",
        f"    stats socket {quote(str(paths.admin_socket))} mode 600 level admin"
        " expose-fd listeners",
        "    stats timeout 30s",
        f"    pidfile {quote(str(paths.pid_file))}",
        "    hard-stop-after 30s",
        "    ssl-default-bind-options ssl-min-ver TLSv1.2",
        "    tune.ssl.default-dh-param 2048",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout http-request 10s",
        "    timeout tunnel 1h",
        "    retries 3",
        "    option redispatch 1",
        # On a reload the old worker answers one more request on each idle keep-alive
        # connection, with `Connection: close`, instead of closing it under the client.
        "    option idle-close-on-response",
        "    default-server init-addr none",
        "",
    ]


def _bind(listener: Listener, paths: Paths, behind: bool = False) -> str:
    """`behind`: an HTTPS listener reached through its passthrough partner's hop."""
    if behind:
        line = f"    bind {paths.hop(listener.name)} accept-proxy"
    else:
        line = f"    bind {host_port(listener.address, listener.port)}"
    if listener.protocol == Protocol.HTTPS:
        line += f" ssl crt-list {quote(str(paths.crt_list(listener.name)))}"
        if listener.alpn:
            line += f" alpn {','.join(listener.alpn)}"
    return line


def _host_condition(vhost: routing.VirtualHost) -> str:
    name = vhost.hostname
    if name is None:
        return ""
    if not hosts.is_wildcard(name):
        return f"{{ var(txn.host) -m str {quote(name)} }}"
    if vhost.semantics == RouteSemantics.INGRESS:
        # one DNS label before the suffix
        label_re = "^[^.]+" + _re_escape(name[1:]) + "$"
        return f"{{ var(txn.host) -m reg {quote(label_re)} }}"
    return f"{{ var(txn.host) -m end {quote(name[1:])} }}"


def _re_escape(text: str) -> str:
    return "".join("\\" + c if not (c.isalnum() or c in "-_/") else c for c in text)


def _path_conditions(match: RouteMatch) -> list[str]:
    p = match.path
    if p.type == PathType.EXACT:
        return [f"{{ path -m str {quote(p.value)} }}"]
    if p.type == PathType.REGULAR_EXPRESSION:
        return [f"{{ path -m reg {quote('^(?:' + p.value + ')$')} }}"]
    base = routing.prefix_base(p.value)
    if base == "/":
        return []
    # by path element: the prefix itself, or the prefix followed by '/'
    return [f"{{ path -m str {quote(base)} }} || {{ path -m beg {quote(base + '/')} }}"]


def _match_conditions(match: RouteMatch) -> list[str]:
    conds = _path_conditions(match)
    if match.method:
        conds.append(f"{{ method {match.method} }}")
    for h in match.headers:
        how = "str" if h.type == ValueMatchType.EXACT else "reg"
        conds.append(f"{{ req.fhdr({h.name}) -m {how} {quote(h.value)} }}")
    for qp in match.query_params:
        how = "str" if qp.type == ValueMatchType.EXACT else "reg"
        conds.append(f"{{ url_param({quote(qp.name)}) -m {how} {quote(qp.value)} }}")
    return conds


def _and(conds: list[str]) -> str:
    """HAProxy conditions: juxtaposition is AND, `||` is OR with lower precedence; an OR
    inside one condition (the prefix case) is distributed over the rest."""
    alternatives = [""]
    for cond in conds:
        parts = cond.split(" || ")
        alternatives = [f"{a} {p}".strip() for a in alternatives for p in parts]
    return " || ".join(alternatives)


def _header_lines(direction: str, modifier: HeaderModifier | None, cond: str) -> list[str]:
    if modifier is None:
        return []
    lines = [
        f"    {direction} set-header {h.name} {quote(log_format(h.value))} if {cond}"
        for h in modifier.set
    ]
    lines += [
        f"    {direction} add-header {h.name} {quote(log_format(h.value))} if {cond}"
        for h in modifier.add
    ]
    lines += [f"    {direction} del-header {name} if {cond}" for name in modifier.remove]
    return lines


_WELL_KNOWN_PORTS = {"http": 80, "https": 443}


def location(redirect: Redirect, listener: Listener, path: str | None = None) -> str:
    """The Location of a redirect (HTTPRoute RequestRedirect): an unset scheme is the
    listener's, an unset port the new scheme's well-known one (or, with the scheme unset,
    the listener's), and a well-known port is not written; an unset host is the request's;
    `path` (log-format text, with the query) is the new path, by default the redirect's
    full path or the request's own."""
    own = "https" if listener.protocol == Protocol.HTTPS else "http"
    scheme = redirect.scheme or own
    number = redirect.port or (_WELL_KNOWN_PORTS[scheme] if redirect.scheme else listener.port)
    host = log_format(redirect.hostname) if redirect.hostname else "%[var(txn.host)]"
    port = "" if number == _WELL_KNOWN_PORTS[scheme] else f":{number}"
    if path is None:
        path = log_format(redirect.path) if redirect.path is not None else "%[pathq]"
    return f"{scheme}://{host}{port}{path}"


def _prefix_parts(prefix: str, replacement: str, fetch: str) -> tuple[str, str, str]:
    """ReplacePrefixMatch by path element (Gateway API HTTPPathModifier): the matched
    prefix without its trailing '/' (`base`), the replacement without its own (`head`),
    and the rest of the request (`fetch`: path or pathq) after `base` as log-format text;
    the new path is head + rest, or '/' when both are empty. The match guarantees that the
    path is `base` or starts with `base/`."""
    base = prefix.rstrip("/")
    head = log_format(replacement.rstrip("/"))
    rest = f"%[{fetch},bytes({len(base)})]" if base else f"%[{fetch}]"
    return base, head, rest


def _redirect_lines(rule: HTTPRule, listener: Listener, cond: str) -> list[str]:
    redirect = rule.redirect
    assert redirect is not None
    code = redirect.status_code

    def line(path: str | None, when: str) -> str:
        loc = quote(location(redirect, listener, path))
        return f"    http-request redirect location {loc} code {code} if {when}"

    if redirect.path is not None:
        # The request's query comes along (as with every other redirect).
        full = log_format(redirect.path)
        return [line(full + "?%[query]", f"{cond} {{ query -m found }}"), line(full, cond)]
    prefix = rule.replaced_prefix()
    if redirect.replace_prefix_match is None or prefix is None:
        return [line(None, cond)]
    base, head, rest = _prefix_parts(prefix, redirect.replace_prefix_match, "pathq")
    if head or not base:
        return [line(head + rest, cond)]
    # The prefix removed from the path that is only the prefix: '/' (and the query).
    return [line("/" + rest, f"{cond} {{ path -m str {quote(base)} }}"), line(rest, cond)]


def _rewrite_lines(rule: HTTPRule, cond: str) -> list[str]:
    rewrite = rule.rewrite
    if rewrite is None:
        return []
    lines = []
    if rewrite.hostname is not None:
        lines.append(f"    http-request set-header Host {quote(rewrite.hostname)} if {cond}")
    if rewrite.path is not None:
        lines.append(f"    http-request set-path {quote(log_format(rewrite.path))} if {cond}")
    prefix = rule.replaced_prefix()
    if rewrite.replace_prefix_match is not None and prefix is not None:
        base, head, rest = _prefix_parts(prefix, rewrite.replace_prefix_match, "path")
        if head or not base:
            if head:  # (nothing to do when both are empty: '/' replaced by '')
                lines.append(f"    http-request set-path {quote(head + rest)} if {cond}")
        else:
            # The path that is only the prefix becomes '/'; after that line the path is
            # '/', which no longer is within `base` (never ''), so the next one skips it.
            lines += [
                f"    http-request set-path / if {cond} {{ path -m str {quote(base)} }}",
                f"    http-request set-path {quote(rest)} if {cond} !{{ path -m str / }}",
            ]
    return lines


def _when(line: str, cond: str) -> str:
    return f"{line} if {cond}" if cond else line


def _weighted(refs: tuple[BackendRef, ...], cond: str, action: str = "http-request") -> list[str]:
    """use_backend lines that split traffic by weight (`action` sets the pick: http-request
    or tcp-request content). The share of a missing backend is answered 500 (TCP: closed)."""
    refused = (
        "    http-request return status 500"
        if action == "http-request"
        else "    tcp-request content reject"
    )
    live = [r for r in refs if r.weight > 0]
    if not live:
        # Gateway API: a rule whose backends get no traffic answers 500 (TCP: closed)
        return [_when(refused, cond)]
    if len(live) == 1:
        if live[0].missing:
            return [_when(refused, cond)]
        return [_when(f"    use_backend {backend_id(live[0].backend)}", cond)]
    total = sum(r.weight for r in live)
    lines = [_when(f"    {action} set-var(txn.pick) rand({total})", cond)]
    upto = 0
    for ref in live:
        low, upto = upto, upto + ref.weight
        if ref.missing:
            pick = f"{{ var(txn.pick) -m int ge {low} }} {{ var(txn.pick) -m int lt {upto} }}"
            lines.append(_when(refused, f"{cond} {pick}".strip()))
            continue
        pick = f"{{ var(txn.pick) -m int lt {upto} }}"
        lines.append(_when(f"    use_backend {backend_id(ref.backend)}", f"{cond} {pick}".strip()))
    return lines


def _simple(vhost: routing.VirtualHost) -> bool:
    """A virtual host whose one entry matches every request (an Ingress host with path
    Prefix '/'): its rule is looked up by host, no condition to evaluate."""
    if len(vhost.entries) != 1:
        return False
    m = vhost.entries[0].match
    return (
        m.path.type == PathType.PREFIX
        and routing.prefix_base(m.path.value) == "/"
        and not (m.method or m.headers or m.query_params)
    )


def _live(rule: HTTPRule) -> list[BackendRef]:
    return [r for r in rule.backends if r.weight > 0]


def _plain(rule: HTTPRule) -> bool:
    """A rule that only sends to one backend (no redirect, rewrite or header modifier)."""
    live = _live(rule)
    return (
        rule.redirect is None
        and rule.rewrite is None
        and rule.request_headers is None
        and rule.response_headers is None
        and len(live) == 1
        and not live[0].missing
    )


def _map_file(rows: list[tuple[str, str]]) -> str:
    return "".join(f"{k} {v}\n" for k, v in rows)


def _http_frontend(
    config: GatewayConfig, listener: Listener, paths: Paths, behind: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The frontend's lines and its map files. Exact hostnames are found in a map (one
    lookup, whatever their number); wildcards and the catch-all follow in order; a simple
    virtual host's rule comes from a map too, and a single-backend rule's backend."""
    lines = [
        f"frontend {frontend_id(listener.name)}",
        "    mode http",
        _bind(listener, paths, behind),
        "    option forwardfor",
    ]
    if listener.protocol == Protocol.HTTPS:
        lines += _sni_certificate(listener, paths)
    if listener.protocol == Protocol.HTTPS:
        lines.append("    http-request set-header X-Forwarded-Proto https")
    else:
        lines.append("    http-request set-header X-Forwarded-Proto http")
    tls = listener.protocol == Protocol.HTTPS
    vhosts = routing.table(config, listener.name)
    host_of_request = "req.hdr(host),field(1,:),lower"
    hosts_map, rules_map, backends_map = (
        paths.map(listener.name, "hosts"),
        paths.map(listener.name, "rules"),
        paths.map(listener.name, "backends"),
    )
    exact = [v for v in vhosts if v.hostname is not None and not hosts.is_wildcard(v.hostname)]
    # The fast path: an exact host whose one rule sends everything to one backend, with
    # nothing else to do, is a single lookup: host -> backend.
    fast = [v for v in exact if _simple(v) and _plain(v.entries[0].rule)]
    fast_map = paths.map(listener.name, "fast")
    fast_ids = {v.vhost_id for v in fast}  # (ids: comparing the dataclasses is slow)
    # Only the fast path: no host variable, no rule variable (fewer steps per request).
    only_fast = len(fast) == len(vhosts) > 0
    if not only_fast or tls:
        lines.append(f"    http-request set-var(txn.host) {host_of_request}")
    if tls:
        lines += _misdirected(listener, paths)
    skip = ""
    if fast:
        host = host_of_request if only_fast and not tls else "var(txn.host)"
        lines.append(f"    http-request set-var(txn.be) {host},map_str({quote(str(fast_map))})")
        skip = "!{ var(txn.be) -m found }"
    exact = [v for v in exact if v.vhost_id not in fast_ids]
    exact_ids = {v.vhost_id for v in exact}
    if exact:
        lines.append(
            _when(
                f"    http-request set-var(txn.vh) var(txn.host),map_str({quote(str(hosts_map))})",
                skip,
            )
        )
    unset = f"!{{ var(txn.vh) -m found }} {skip}".strip()
    for v in vhosts:
        if v.vhost_id not in exact_ids and v.vhost_id not in fast_ids:
            host = _host_condition(v)
            lines.append(
                f"    http-request set-var(txn.vh) str({v.vhost_id}) if {unset} {host}".rstrip()
            )
    vhosts = [v for v in vhosts if v.vhost_id not in fast_ids]
    simple = [v for v in vhosts if _simple(v)]
    simple_ids = {v.vhost_id for v in simple}
    if simple:
        lines.append(
            _when(
                f"    http-request set-var(txn.rule) var(txn.vh),map_str({quote(str(rules_map))})",
                "{ var(txn.vh) -m found }",
            )
        )
    unset_rule = "!{ var(txn.rule) -m found }"
    for v in vhosts:
        if v.vhost_id in simple_ids:
            continue
        in_vhost = f"{{ var(txn.vh) -m str {v.vhost_id} }}"
        for e in v.entries:
            cond = _and([unset_rule, in_vhost, *_match_conditions(e.match)])
            lines.append(f"    http-request set-var(txn.rule) str({e.rule_id}) if {cond}")
    missing = skip if only_fast else f"{unset_rule} {skip}".strip()
    lines.append(f"    http-request return status 404 if {missing}")
    actions: list[str] = []  # HAProxy runs every http-request rule before use_backend
    direct: list[tuple[str, str]] = []
    done: set[str] = set()
    for v in vhosts:
        for e in v.entries:
            if e.rule_id in done:
                continue
            done.add(e.rule_id)
            cond = f"{{ var(txn.rule) -m str {e.rule_id} }}"
            rule = e.rule
            if rule.redirect is not None:
                lines += _redirect_lines(rule, listener, cond)
                continue
            lines += _header_lines("http-request", rule.request_headers, cond)
            lines += _rewrite_lines(rule, cond)
            lines += _header_lines("http-response", rule.response_headers, cond)
            live = _live(rule)
            if len(live) == 1 and not live[0].missing:
                direct.append((e.rule_id, backend_id(live[0].backend)))
                continue
            for line in _weighted(rule.backends, cond):
                (actions if line.startswith("    use_backend") else lines).append(line)
    if fast:  # (alone, the 404 above has made sure it is set)
        lines.append(
            _when("    use_backend %[var(txn.be)]", "" if only_fast else "{ var(txn.be) -m found }")
        )
    lines += actions
    if direct:
        lines.append(f"    use_backend %[var(txn.rule),map_str({quote(str(backends_map))})]")
    lines.append("")
    maps = {
        str(fast_map): _map_file(
            [(v.hostname or "", backend_id(_live(v.entries[0].rule)[0].backend)) for v in fast]
        ),
        str(hosts_map): _map_file([(v.hostname or "", v.vhost_id) for v in exact]),
        str(rules_map): _map_file([(v.vhost_id, v.entries[0].rule_id) for v in simple]),
        str(backends_map): _map_file(direct),
    }
    return lines, maps


def _certificate_of(
    listener: Listener, paths: Paths, var: str, name: str, action: str, cond: str = ""
) -> list[str]:
    """Rules that set `var` to the certificate `name` (a sample) chooses, found the way
    HAProxy picks one by SNI: the exact name, else the wildcard of its first label's parent
    (`*.a.example` covers one label, as in TLS), else none ('-': the gateway's own). Two
    maps (each name in one only: see `offered`): the wildcard's lookup first, with '-' as
    its default, then the exact name's over it (a lookup that finds nothing leaves the
    variable as it was); a wildcard's key is its parent, `a.example` for `*.a.example`."""
    exact = quote(str(paths.map(listener.name, "certs")))
    wild = quote(str(paths.map(listener.name, "certs-wild")))
    return [
        _when(f"    {action} set-var({var}) {name},field(2,.,0),"
              f"map_str({wild},{NO_CERTIFICATE})", cond),
        _when(f"    {action} set-var({var}) {name},map_str({exact})", cond),
    ]  # fmt: skip


def _sni_certificate(listener: Listener, paths: Paths) -> list[str]:
    """The certificate the connection's SNI chose, once per connection (`tcp-request
    session`: after the handshake, before any request), in `sess.sni_crt`; without SNI it
    stays unset. Computed then, it is the one the connection got, also while a new
    certificate's names are being added to the maps."""
    return _certificate_of(
        listener, paths, "sess.sni_crt", "ssl_fc_sni,lower", "tcp-request session"
    )


def _misdirected(listener: Listener, paths: Paths) -> list[str]:
    """421 Misdirected Request (RFC 9110 section 15.5.20) for a request whose Host would
    not have chosen the certificate its connection's SNI chose (another tenant's name over
    a tenant's connection, HTTP/2 reuse across names, a tenant's name without SNI): the
    Host's certificate found as the SNI's was (`_sni_certificate`) and the two compared.

    A Host equal to the SNI chose the same certificate: then (most requests) nothing is
    looked up: one comparison, then a variable found or not per rule (cheaper than fetching
    and comparing again).
    """
    differ = "{ var(txn.tls_other) -m found }"
    sni = "{ var(sess.sni_crt) -m found }"
    same = "{ var(sess.sni_crt),strcmp(txn.host_crt) eq 0 }"
    unnamed = f"!{{ var(txn.host_crt) -m str -- {NO_CERTIFICATE} }}"
    return [
        "    http-request set-var(txn.tls_other) bool(1)"
        " if !{ ssl_fc_sni,lower,strcmp(txn.host) eq 0 }",  # (true without SNI too)
        *_certificate_of(listener, paths, "txn.host_crt", "var(txn.host)", "http-request", differ),
        f"    http-request return status 421 if {differ} {sni} !{same}",
        # no SNI: the gateway's own certificate, misdirected for a name that has another
        f"    http-request return status 421 if {differ} !{sni} {unnamed}",
    ]


def _sni_condition(hostname: str) -> str:
    name = hostname.lower()
    if hosts.is_wildcard(name):
        return f"{{ req.ssl_sni -m end {quote(name[1:])} }}"
    return f"{{ req.ssl_sni -m str {quote(name)} }}"


def _tcp_frontend(
    config: GatewayConfig, listener: Listener, paths: Paths, terminating: str | None = None
) -> list[str]:
    """`terminating`: the HTTPS listener on the same socket, which gets every connection
    whose SNI no passthrough route takes (and those without SNI)."""
    lines = [f"frontend {frontend_id(listener.name)}", "    mode tcp", _bind(listener, paths)]
    if listener.protocol == Protocol.TLS_PASSTHROUGH:
        lines += [
            "    tcp-request inspect-delay 5s",
            "    tcp-request content accept if { req.ssl_hello_type 1 }",
        ]
        choices: list[tuple[tuple[object, ...], str, tuple[BackendRef, ...]]] = []
        for tls in config.tls_routes:
            if listener.name in tls.listeners:
                for name in tls.hostnames:
                    kind, length = hosts.specificity(name)
                    key = (-kind, -length, tls.created, name)
                    choices.append((key, name, tls.backends))
        for _key, name, refs in sorted(choices, key=lambda c: c[0]):
            lines += _weighted(refs, _sni_condition(name), "tcp-request content")
        if terminating is not None:
            lines.append(f"    default_backend {hop_id(terminating)}")
    else:
        for tcp in config.tcp_routes:
            if listener.name in tcp.listeners:
                lines += _weighted(tcp.backends, "", "tcp-request content")
    lines.append("")
    return lines


def _server_line(backend: Backend, index: int, slot: Slot) -> tuple[str, str]:
    """The server line as rendered and as its structure (address and state masked)."""
    opts = []
    if backend.health_check is not None:
        hc = backend.health_check
        opts.append(f"check inter {hc.interval_ms} rise {hc.rise} fall {hc.fall}")
        if hc.tls:
            opts.append("check-ssl verify none")
        if backend.proxy_protocol:
            opts.append("check-send-proxy")
    if backend.proxy_protocol:
        opts.append("send-proxy-v2")
    e = slot.endpoint
    if e is None:
        where, state = EMPTY_SLOT, " disabled"
    else:
        where, state = host_port(e.address, e.port), "" if e.ready else " disabled"
    tail = (" " + " ".join(opts)) if opts else ""
    name = server_name(index)
    return f"    server {name} {where}{tail}{state}", f"    server {name} {SLOT_MASK}{tail}"


def expected_status(codes: str | None) -> str:
    """A status regular expression from Octavia's form (`200`, `200,202`, `200-204`);
    None: any 2xx or 3xx."""
    if codes is None:
        return "^[23]"
    found: list[str] = []
    for part in codes.split(","):
        low, _, high = part.partition("-")
        found += [str(c) for c in range(int(low), int(high or low) + 1) if str(c) not in found]
    return f"^({'|'.join(found)})$"


def _http_check(hc: HealthCheck) -> list[str]:
    if hc.http_version is None and hc.http_host is None and hc.http_method == "GET":
        lines = [f"    option httpchk GET {quote(hc.http_path or '/')}"]
    else:
        send = f"meth {hc.http_method} uri {quote(hc.http_path or '/')}"
        if hc.http_version is not None:
            send += f" ver {hc.http_version}"
        if hc.http_host is not None:
            send += f" hdr Host {quote(hc.http_host)}"
        lines = ["    option httpchk", f"    http-check send {send}"]
    return [*lines, f"    http-check expect rstatus {expected_status(hc.expect_status)}"]


def _backend(backend: Backend, slots: tuple[Slot, ...], http: bool) -> tuple[list[str], list[str]]:
    head = [f"backend {backend_id(backend.name)}", f"    mode {'http' if http else 'tcp'}"]
    head.append("    balance roundrobin")
    hc = backend.health_check
    if hc is not None and hc.timeout_ms is not None:
        head.append(f"    timeout check {hc.timeout_ms}")
    if hc is not None and hc.http_path is not None and http:
        head += _http_check(hc)
    text, structure = list(head), list(head)
    for i, slot in enumerate(slots):
        line, masked = _server_line(backend, i, slot)
        text.append(line)
        structure.append(masked)
    text.append("")
    structure.append("")
    return text, structure


def _http_backends(config: GatewayConfig) -> set[str]:
    names: set[str] = set()
    for route in config.http_routes:
        for rule in route.rules:
            names.update(r.backend for r in rule.backends)
    return names


def offered(config: GatewayConfig, listener: Listener) -> list[tuple[str, tuple[str, ...]]]:
    """The certificates of an HTTPS listener, each with the names (SNI) it is offered for,
    in the listener's order. A name goes to the first certificate that has it, so that
    the certificate HAProxy picks for it is the one the certificate maps say; a
    certificate left with no name is not offered (it would never be picked). The default
    certificate's own filter is nobody else's."""
    taken = {DEFAULT_SNI}
    out: list[tuple[str, tuple[str, ...]]] = []
    by_name = {c.name: c for c in reversed(config.certificates)}  # (the first of a name)
    for name in listener.certificates:
        cert = by_name.get(name)
        if cert is None:
            continue
        names = tuple(h for h in dict.fromkeys(h.lower() for h in cert.hostnames) if h not in taken)
        taken.update(names)
        if names:
            out.append((name, names))
    return out


def chosen_certificate(config: GatewayConfig, listener: Listener, name: str) -> str | None:
    """The certificate an HTTPS listener presents for SNI `name`, as HAProxy picks it from
    the crt-list and as the 421 check's maps say: the exact name, else the wildcard of its
    parent; None: the gateway's own."""
    name = name.lower()
    by_name = {h: cert for cert, names in offered(config, listener) for h in names}
    _, dot, parent = name.partition(".")
    return by_name.get(name) or (by_name.get(f"*.{parent}") if dot else None)


def crt_list(config: GatewayConfig, listener: Listener, paths: Paths) -> str:
    """The crt-list of an HTTPS listener: the gateway's own certificate first (the
    default), then one certificate per line with the names it is offered for."""
    lines = [f"{paths.certificate(DEFAULT_CERTIFICATE)} {DEFAULT_SNI}"]
    for name, names in offered(config, listener):
        lines.append(f"{paths.certificate(name)} {' '.join(names)}")
    return "\n".join(lines) + "\n"


def certificate_maps(config: GatewayConfig, listener: Listener, paths: Paths) -> dict[str, str]:
    """The two maps `_misdirected` looks names up in: exact name -> certificate, and the
    parent of a wildcard (`a.example` for `*.a.example`) -> certificate."""
    exact: list[tuple[str, str]] = []
    wild: list[tuple[str, str]] = []
    for name, names in offered(config, listener):
        for host in names:
            if hosts.is_wildcard(host):
                wild.append((host[2:], name))
            else:
                exact.append((host, name))
    return {
        str(paths.map(listener.name, "certs")): _map_file(exact),
        str(paths.map(listener.name, "certs-wild")): _map_file(wild),
    }


def render(
    config: GatewayConfig,
    slots: SlotTable,
    paths: Paths,
    pems: Mapping[str, str],
    previous: Rendered | None = None,
) -> Rendered:
    """The HAProxy files for `config` (UDP listeners are nginx's, see gateway.nginx).

    `pems` holds each certificate's PEM (certificate chain and key) by certificate name.
    `previous`: an earlier rendering whose parts are reused where their inputs are equal
    (an HTTP frontend: the listener and the config's HTTP routes; a backend: itself and its
    slots); the result is the same as without it, only cheaper.
    """
    before = previous.parts if previous is not None else None
    text = _global(paths)
    structure = list(text)
    map_files: dict[str, str] = {}
    shared = shared_sockets(config)
    routes = config.http_routes
    frontends: dict[str, HTTPFrontend] = {}
    for listener in config.listeners:
        partner = shared.get(listener.name)
        if listener.protocol in (Protocol.HTTP, Protocol.HTTPS):
            behind = partner is not None
            kept = before.frontends.get(listener.name) if before is not None else None
            if kept is None or not kept.made_from(listener, behind, paths, routes):
                made, maps = _http_frontend(config, listener, paths, behind)
                kept = HTTPFrontend(listener, behind, paths, routes, tuple(made), maps)
            frontends[listener.name] = kept
            lines, maps = list(kept.lines), kept.maps
        elif listener.protocol in (Protocol.TCP, Protocol.TLS_PASSTHROUGH):
            lines, maps = _tcp_frontend(config, listener, paths, partner), {}
            if partner is not None:
                lines += _hop_backend(partner, paths)
        else:
            continue
        text += lines
        structure += lines
        map_files.update(maps)
        for path, content in maps.items():  # the maps are the frontend's structure too
            structure += [f"# map {path}", *(f"#  {row}" for row in content.splitlines())]
    if before is not None and before.routes == routes:
        http_backends = before.http_backends
    else:
        http_backends = frozenset(_http_backends(config))
    udp_backends = {r.backend for route in config.udp_routes for r in route.backends}
    sections_kept: dict[str, BackendSection] = {}
    for backend in config.backends:
        if backend.name in udp_backends and backend.name not in http_backends:
            continue
        http = backend.name in http_backends
        own = slots.get(backend.name, ())
        section = before.backends.get(backend.name) if before is not None else None
        if section is None or not (
            section.slots == own and section.http == http and section.backend == backend
        ):
            t, s = _backend(backend, own, http)
            section = BackendSection(backend, own, http, tuple(t), tuple(s))
        sections_kept[backend.name] = section
        text += section.text
        structure += section.structure
    files = {str(paths.config): "\n".join(text), **map_files}
    certificates: dict[str, str] = {}
    crt_lists: dict[str, str] = {}
    cert_maps: dict[str, str] = {}
    for listener in config.listeners:
        if listener.protocol == Protocol.HTTPS:
            listing = crt_list(config, listener, paths)
            files[str(paths.crt_list(listener.name))] = listing
            crt_lists[str(paths.crt_list(listener.name))] = listing
            cert_maps.update(certificate_maps(config, listener, paths))
            default = paths.certificate(DEFAULT_CERTIFICATE)
            certificates[str(default)] = pems.get(DEFAULT_CERTIFICATE, "")
            for name, _names in offered(config, listener):
                certificates[str(paths.certificate(name))] = pems.get(name, "")
    files.update(cert_maps)
    parts = Parts(routes, http_backends, frontends, sections_kept)
    return Rendered(files, "\n".join(structure), slots, certificates, crt_lists, cert_maps, parts)


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(section header, body) of a rendered configuration: what the diff names."""
    header, body = "", list[str]()
    for line in text.splitlines():
        if line and not line.startswith(" ") and not line.startswith("#"):
            if header or body:
                yield header, "\n".join(body)
            header, body = line, []
        else:
            body.append(line)
    if header or body:
        yield header, "\n".join(body)
