"""A listener's frontend: HTTP(S) (routing in three steps, with its map files) and TCP or
TLS passthrough (by SNI; the rest handed to the HTTPS listener on the same socket)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teapot_lb.gateway import hosts, routing
from teapot_lb.gateway.config import (
    BackendRef,
    GatewayConfig,
    HTTPRoute,
    Listener,
    PathType,
    Protocol,
    RouteMatch,
)

from .actions import header_lines, live_refs, plain, redirect_lines, rewrite_lines, weighted
from .certificates import misdirected, sni_certificate
from .conditions import all_of, host_condition, match_conditions
from .paths import Paths
from .words import frontend_id, hop_id, host_port, map_file, quote, section_id, when


def bind(listener: Listener, paths: Paths, behind: bool = False) -> str:
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


def _every_request(m: RouteMatch) -> bool:
    """A match every request meets (path Prefix '/', nothing else)."""
    return (
        m.path.type == PathType.PREFIX
        and routing.prefix_base(m.path.value) == "/"
        and not (m.method or m.headers or m.query_params)
    )


def _simple(vhost: routing.VirtualHost) -> bool:
    """A virtual host whose one entry matches every request (an Ingress host with path
    Prefix '/'): its rule is looked up by host, no condition to evaluate."""
    return len(vhost.entries) == 1 and _every_request(vhost.entries[0].match)


def fast_route(route: HTTPRoute) -> bool:
    """A route each hostname of which is a fast virtual host (see `http_frontend`) as long
    as no other route of the listener has that hostname: exact hostnames, one rule that
    every request matches and that only sends to one backend."""
    if not route.hostnames or len(route.rules) != 1:
        return False
    rule = route.rules[0]
    matches = rule.matches or (RouteMatch(),)
    return (
        len(matches) == 1
        and _every_request(matches[0])
        and plain(rule)
        and not any(hosts.is_wildcard(h) for h in route.hostnames)
    )


def fast_backend(route: HTTPRoute) -> str:
    """The backend a `fast_route` sends to."""
    return live_refs(route.rules[0])[0].backend


def fast_order(host: str) -> tuple[int, str]:
    """The order of the fast map's rows: the routing table's order of exact hosts (longer
    first, then by name)."""
    return (-hosts.specificity(host)[1], host)


def fast_map(rows: Mapping[str, str], ids: Mapping[str, str] | None) -> str:
    """The fast map file: each fast host -> its backend's section."""
    return map_file([(host, section_id(backend, ids)) for host, backend in rows.items()])


@dataclass(frozen=True)
class Made:
    """An HTTP(S) frontend as rendered: its lines, its maps but the fast one, the fast
    map's rows (host -> backend name, in the map's order), the section id of each backend
    the lines and those maps send to, and how many virtual hosts are not fast."""

    lines: tuple[str, ...]
    maps: dict[str, str]
    fast: dict[str, str]
    sent_to: dict[str, str]
    others: int

    @property
    def only_fast(self) -> bool:
        return self.others == 0 and len(self.fast) > 0


def http_frontend(
    config: GatewayConfig,
    listener: Listener,
    paths: Paths,
    behind: bool = False,
    ids: Mapping[str, str] | None = None,
) -> Made:
    """The frontend's lines and maps (`ids`: a pooled backend's section, see gateway.pool;
    any other is `be_<name>`); the fast map's text is `fast_map`'s.
    Exact hostnames are found in a map (one lookup, whatever their number); wildcards and
    the catch-all follow in order; a simple virtual host's rule comes from a map too, and
    a single-backend rule's backend.

    The fast path's hosts (an exact host whose one rule sends everything to one backend)
    appear in the fast map only, never in the lines, and the ids the lines and other maps
    give virtual hosts and rules count the others only: a fast host added or removed
    changes one map row, not the configuration (no reload)."""
    sent_to: dict[str, str] = {}

    def section(name: str) -> str:
        sent_to[name] = section_id(name, ids)
        return sent_to[name]

    lines = [
        f"frontend {frontend_id(listener.name)}",
        "    mode http",
        bind(listener, paths, behind),
        "    option forwardfor",
    ]
    if listener.protocol == Protocol.HTTPS:
        lines += sni_certificate(listener, paths)
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
    fast = [v for v in exact if _simple(v) and plain(v.entries[0].rule)]
    fast_path = paths.map(listener.name, "fast")
    fast_ids = {v.vhost_id for v in fast}  # (ids: comparing the dataclasses is slow)
    # Only the fast path: no host variable, no rule variable (fewer steps per request).
    only_fast = len(fast) == len(vhosts) > 0
    if not only_fast or tls:
        lines.append(f"    http-request set-var(txn.host) {host_of_request}")
    if tls:
        lines += misdirected(listener, paths)
    # The fast map is looked up even while it is empty, so that the first fast host
    # added is a row of it too, not a line (a reload).
    host = host_of_request if only_fast and not tls else "var(txn.host)"
    lines.append(f"    http-request set-var(txn.be) {host},map_str({quote(str(fast_path))})")
    skip = "!{ var(txn.be) -m found }"
    exact = [v for v in exact if v.vhost_id not in fast_ids]
    exact_ids = {v.vhost_id for v in exact}
    # The ids of the other virtual hosts and of their rules, in their order.
    vid = {
        v.vhost_id: f"v{k}" for k, v in enumerate(v for v in vhosts if v.vhost_id not in fast_ids)
    }
    rid: dict[str, str] = {}
    for v in vhosts:
        if v.vhost_id not in fast_ids:
            for e in v.entries:
                rid.setdefault(e.rule_id, f"r{len(rid)}")
    if exact:
        lines.append(
            when(
                f"    http-request set-var(txn.vh) var(txn.host),map_str({quote(str(hosts_map))})",
                skip,
            )
        )
    unset = f"!{{ var(txn.vh) -m found }} {skip}".strip()
    for v in vhosts:
        if v.vhost_id not in exact_ids and v.vhost_id not in fast_ids:
            host = host_condition(v)
            pick = f"set-var(txn.vh) str({vid[v.vhost_id]})"
            lines.append(f"    http-request {pick} if {unset} {host}".rstrip())
    vhosts = [v for v in vhosts if v.vhost_id not in fast_ids]
    simple = [v for v in vhosts if _simple(v)]
    simple_ids = {v.vhost_id for v in simple}
    if simple:
        lines.append(
            when(
                f"    http-request set-var(txn.rule) var(txn.vh),map_str({quote(str(rules_map))})",
                "{ var(txn.vh) -m found }",
            )
        )
    unset_rule = "!{ var(txn.rule) -m found }"
    for v in vhosts:
        if v.vhost_id in simple_ids:
            continue
        in_vhost = f"{{ var(txn.vh) -m str {vid[v.vhost_id]} }}"
        for e in v.entries:
            cond = all_of([unset_rule, in_vhost, *match_conditions(e.match)])
            lines.append(f"    http-request set-var(txn.rule) str({rid[e.rule_id]}) if {cond}")
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
            cond = f"{{ var(txn.rule) -m str {rid[e.rule_id]} }}"
            rule = e.rule
            if rule.redirect is not None:
                lines += redirect_lines(rule, listener, cond)
                continue
            lines += header_lines("http-request", rule.request_headers, cond)
            lines += rewrite_lines(rule, cond)
            lines += header_lines("http-response", rule.response_headers, cond)
            live = live_refs(rule)
            if len(live) == 1 and not live[0].missing:
                direct.append((rid[e.rule_id], section(live[0].backend)))
                continue
            for line in weighted(rule.backends, cond, section=section):
                (actions if line.startswith("    use_backend") else lines).append(line)
    # (alone, the 404 above has made sure it is set)
    found = "" if only_fast else "{ var(txn.be) -m found }"
    lines.append(when("    use_backend %[var(txn.be)]", found))
    lines += actions
    if direct:
        lines.append(f"    use_backend %[var(txn.rule),map_str({quote(str(backends_map))})]")
    lines.append("")
    maps = {
        str(hosts_map): map_file([(v.hostname or "", vid[v.vhost_id]) for v in exact]),
        str(rules_map): map_file([(vid[v.vhost_id], rid[v.entries[0].rule_id]) for v in simple]),
        str(backends_map): map_file(direct),
    }
    rows = {v.hostname or "": live_refs(v.entries[0].rule)[0].backend for v in fast}
    return Made(tuple(lines), maps, rows, sent_to, len(vhosts))


def _sni_condition(hostname: str) -> str:
    name = hostname.lower()
    if hosts.is_wildcard(name):
        return f"{{ req.ssl_sni -m end {quote(name[1:])} }}"
    return f"{{ req.ssl_sni -m str {quote(name)} }}"


def tcp_frontend(
    config: GatewayConfig, listener: Listener, paths: Paths, terminating: str | None = None
) -> list[str]:
    """`terminating`: the HTTPS listener on the same socket, which gets every connection
    whose SNI no passthrough route takes (and those without SNI)."""
    lines = [f"frontend {frontend_id(listener.name)}", "    mode tcp", bind(listener, paths)]
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
            lines += weighted(refs, _sni_condition(name), "tcp-request content")
        if terminating is not None:
            lines.append(f"    default_backend {hop_id(terminating)}")
    else:
        for tcp in config.tcp_routes:
            if listener.name in tcp.listeners:
                lines += weighted(tcp.backends, "", "tcp-request content")
    lines.append("")
    return lines


def hop_backend(listener: str, paths: Paths) -> list[str]:
    """The backend that hands a passthrough listener's other connections to HTTPS
    listener `listener` (PROXY v2: the client's address survives the hop)."""
    return [
        f"backend {hop_id(listener)}",
        "    mode tcp",
        f"    server hop {paths.hop(listener)} send-proxy-v2",
        "",
    ]


__all__ = [
    "Made",
    "bind",
    "fast_backend",
    "fast_map",
    "fast_order",
    "fast_route",
    "hop_backend",
    "http_frontend",
    "tcp_frontend",
]
