"""Hostnames a tenant may serve: a Tenant's `dnsDomains` entry `a.example` holds
`a.example` and every name under it; `*.a.example` holds every name under `a.example` but
not `a.example` itself. A hostname `*.s` (a wildcard) needs the whole of `s`: `*.a.example`
is not within `b.example`, nor within a tenant that holds only `x.a.example`."""

from __future__ import annotations

import re

from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7vet.refusal import L7Refusal, L7Rule

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
HOSTNAME_RE = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")


def domain_holds(domain: str, hostname: str) -> bool:
    """Whether a Tenant's DNS domain entry holds every name `hostname` can match."""
    domain = domain.lower().rstrip(".")
    strict = domain.startswith("*.")
    base = domain[2:] if strict else domain
    if hostname.startswith("*."):
        # Every name under `s`: held when `s` is the base or under it.
        s = hostname[2:]
        return s == base or s.endswith("." + base)
    if hostname == base:
        return not strict
    return hostname.endswith("." + base)


def hostname_refusal(hostname: str | None, tenant: Tenant, where: str) -> L7Refusal | None:
    if hostname is None or hostname in ("", "*"):
        return L7Refusal(
            L7Rule.HOSTNAME_NOT_ALLOWED,
            where,
            "no hostname would catch every hostname of the shared gateway; name one within "
            f"the DNS domains of Tenant {tenant.name}",
        )
    if len(hostname) > 253 or not HOSTNAME_RE.match(hostname):
        return L7Refusal(
            L7Rule.INVALID_HOSTNAME,
            where,
            f"{hostname!r} is not a lowercase DNS name (a leading '*.' label is allowed)",
        )
    domains = tenant.spec.dns_domains
    if any(domain_holds(d, hostname) for d in domains):
        return None
    what = "the wildcard " if hostname.startswith("*.") else ""
    return L7Refusal(
        L7Rule.HOSTNAME_NOT_ALLOWED,
        where,
        f"{what}{hostname} is not within the DNS domains of Tenant {tenant.name} "
        f"({', '.join(domains) or 'none'})",
    )
