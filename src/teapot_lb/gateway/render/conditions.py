"""A virtual host's and a route match's HAProxy conditions (ACLs), and their conjunction."""

from __future__ import annotations

from teapot_lb.gateway import hosts, routing
from teapot_lb.gateway.config import PathType, RouteMatch, RouteSemantics, ValueMatchType

from .words import quote


def host_condition(vhost: routing.VirtualHost) -> str:
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


def match_conditions(match: RouteMatch) -> list[str]:
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


def all_of(conds: list[str]) -> str:
    """HAProxy conditions: juxtaposition is AND, `||` is OR with lower precedence; an OR
    inside one condition (the prefix case) is distributed over the rest."""
    alternatives = [""]
    for cond in conds:
        parts = cond.split(" || ")
        alternatives = [f"{a} {p}".strip() for a in alternatives for p in parts]
    return " || ".join(alternatives)


__all__ = ["all_of", "host_condition", "match_conditions"]
