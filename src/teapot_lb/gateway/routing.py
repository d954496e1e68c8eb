"""The HTTP routing table of a listener: virtual hosts, each with its (route, rule, match)
entries in the order that decides which one serves a request.

Precedence (Kubernetes Ingress docs; Gateway API HTTPRoute spec, "Matches"):
1. hostname: the request's host picks ONE virtual host, the most specific pattern that
   covers it (an exact name, then wildcards, longer first, then routes without hostname),
   like nginx server blocks and Envoy virtual hosts: a request for an exact host whose
   paths do not match is a 404, it does not fall through to a wildcard route;
2. within it, path: Exact first (HTTPRoute; for Ingress the same, since a Prefix that
   matches an Exact path is never longer), then longer first (a Prefix's trailing '/' does
   not count: Ingress's "longest matching path"), RegularExpression before Prefix on equal
   length (the regex's length is its pattern's);
3. a method match before none; 4. more header matches; 5. more query parameter matches;
6. the older route (`created`), then namespace/name; then the rule's and match's order.
Within the virtual host the first entry whose conditions all hold wins: the renderer emits
them in this order and `winner` (explain, tests) walks them the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from teapot_lb.gateway import hosts
from teapot_lb.gateway.config import (
    GatewayConfig,
    HTTPRoute,
    HTTPRule,
    PathMatch,
    PathType,
    RouteMatch,
    RouteSemantics,
    ValueMatchType,
)

_PATH_RANK = {PathType.EXACT: 2, PathType.REGULAR_EXPRESSION: 1, PathType.PREFIX: 0}


@dataclass(frozen=True)
class Entry:
    """One line of the routing table: serve `rule` of `route` when the request's host
    matches `hostname` (None: any) and `match` holds. `rule_id` names the rule (rN)."""

    route: HTTPRoute
    route_index: int
    rule_index: int
    rule: HTTPRule
    hostname: str | None
    match: RouteMatch
    rule_id: str


def prefix_base(value: str) -> str:
    """A Prefix path without its trailing '/' ('/' itself stays '/')."""
    return value.rstrip("/") or "/"


def _path_key(path: PathMatch) -> tuple[int, int, int]:
    length = len(prefix_base(path.value)) if path.type == PathType.PREFIX else len(path.value)
    if path.type == PathType.PREFIX and path.value == "/":
        length = 0
    return (int(path.type == PathType.EXACT), length, _PATH_RANK[path.type])


@dataclass(frozen=True)
class VirtualHost:
    """The entries of one hostname pattern (None: routes without hostnames). A wildcard's
    reach depends on the API (`hosts.matches`), so it is part of the identity."""

    hostname: str | None
    semantics: RouteSemantics
    entries: tuple[Entry, ...]
    vhost_id: str

    def covers(self, host: str) -> bool:
        return self.hostname is None or hosts.matches(self.hostname, host, self.semantics)


def _vhost_key(hostname: str | None, semantics: RouteSemantics) -> tuple[object, ...]:
    kind, length = hosts.specificity(hostname)
    # On one wildcard, Ingress's (one label) is narrower than HTTPRoute's (any labels).
    return (-kind, -length, 0 if semantics == RouteSemantics.INGRESS else 1, hostname or "")


def _key(entry: Entry) -> tuple[object, ...]:
    exact, length, rank = _path_key(entry.match.path)
    m = entry.match
    route = entry.route
    return (
        -exact,
        -length,
        -rank,
        0 if m.method else 1,
        -len(m.headers),
        -len(m.query_params),
        route.created,
        route.owner.namespace,
        route.owner.name,
        entry.route_index,
        entry.rule_index,
    )


def _normal_semantics(hostname: str | None, semantics: RouteSemantics) -> RouteSemantics:
    # Exact names (and no name) mean the same under both APIs: one virtual host.
    if hostname is None or not hosts.is_wildcard(hostname):
        return RouteSemantics.HTTP_ROUTE
    return semantics


def table(config: GatewayConfig, listener: str) -> list[VirtualHost]:
    """The listener's virtual hosts, most specific first, each with its entries in order."""
    groups: dict[tuple[str | None, RouteSemantics], list[Entry]] = {}
    for ri, route in enumerate(config.http_routes):
        if listener not in route.listeners:
            continue
        for ui, rule in enumerate(route.rules):
            for hostname in route.hostnames or (None,):
                name = hosts.normalize(hostname) if hostname is not None else None
                group = groups.setdefault((name, _normal_semantics(name, route.semantics)), [])
                for match in rule.matches or (RouteMatch(),):
                    group.append(Entry(route, ri, ui, rule, name, match, f"r{ri}_{ui}"))
    ordered = sorted(groups.items(), key=lambda item: _vhost_key(*item[0]))
    return [
        VirtualHost(name, semantics, tuple(sorted(entries, key=_key)), f"v{i}")
        for i, ((name, semantics), entries) in enumerate(ordered)
    ]


# --- the same decision in Python (explain, and the specification the tests hold) ----------


@dataclass(frozen=True)
class Request:
    host: str
    path: str
    method: str = "GET"
    headers: Mapping[str, str] | None = None
    query: Mapping[str, str] | None = None


def path_matches(path: PathMatch, request_path: str) -> bool:
    """Ingress pathType semantics: Prefix by element ('/foo' matches '/foo' and '/foo/x',
    not '/foobar'); Exact is case-sensitive equality."""
    if path.type == PathType.EXACT:
        return request_path == path.value
    if path.type == PathType.REGULAR_EXPRESSION:
        return re.fullmatch(path.value, request_path) is not None
    base = prefix_base(path.value)
    if base == "/":
        return True
    return request_path == base or request_path.startswith(base + "/")


def _value_matches(kind: ValueMatchType, expected: str, actual: str | None) -> bool:
    if actual is None:
        return False
    if kind == ValueMatchType.EXACT:
        return actual == expected
    return re.search(expected, actual) is not None


def entry_matches(entry: Entry, request: Request) -> bool:
    """Whether the entry's conditions (not its hostname) hold for the request."""
    m = entry.match
    if not path_matches(m.path, request.path):
        return False
    if m.method is not None and m.method != request.method:
        return False
    headers = {k.lower(): v for k, v in (request.headers or {}).items()}
    for h in m.headers:
        if not _value_matches(h.type, h.value, headers.get(h.name.lower())):
            return False
    query = request.query or {}
    return all(_value_matches(q.type, q.value, query.get(q.name)) for q in m.query_params)


def virtual_host(vhosts: list[VirtualHost], host: str) -> VirtualHost | None:
    return next((v for v in vhosts if v.covers(host)), None)


def winner(vhosts: list[VirtualHost], request: Request) -> Entry | None:
    """The entry that serves `request`, or None (404)."""
    vhost = virtual_host(vhosts, request.host)
    if vhost is None:
        return None
    return next((e for e in vhost.entries if entry_matches(e, request)), None)
