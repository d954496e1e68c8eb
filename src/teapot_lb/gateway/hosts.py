"""Hostnames and wildcards, exactly as Ingress and HTTPRoute define them.

- Ingress: `*.foo.com` matches `bar.foo.com`, not `baz.bar.foo.com` and not `foo.com`
  (the wildcard is one DNS label).
- HTTPRoute (and TLSRoute): `*.foo.com` matches `bar.foo.com` and `baz.bar.foo.com`,
  not `foo.com`.
Names compare case-insensitively; a trailing dot is not part of a name.
"""

from __future__ import annotations

from teapot_lb.gateway.config import RouteSemantics


def normalize(hostname: str) -> str:
    return hostname.lower().rstrip(".")


def is_wildcard(pattern: str) -> bool:
    return pattern.startswith("*.")


def matches(pattern: str, hostname: str, semantics: RouteSemantics) -> bool:
    """Whether a request for `hostname` is covered by the route hostname `pattern`."""
    pattern, hostname = normalize(pattern), normalize(hostname)
    if not is_wildcard(pattern):
        return pattern == hostname
    suffix = pattern[1:]  # ".foo.com"
    if not hostname.endswith(suffix) or len(hostname) == len(suffix):
        return False
    head = hostname[: -len(suffix)]
    if semantics == RouteSemantics.INGRESS:
        return "." not in head
    return True


def specificity(pattern: str | None) -> tuple[int, int]:
    """Sort key, most specific first when sorted descending: exact names before wildcards,
    then longer ones; no hostname (every host) last."""
    if pattern is None:
        return (0, 0)
    pattern = normalize(pattern)
    return (1, len(pattern)) if is_wildcard(pattern) else (2, len(pattern))
