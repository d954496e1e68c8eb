"""A TERMINATED_HTTPS listener's certificates against its Tenant (the check is pure; the
names come from the `openssl` binary, as the gateway's own certificate check does).

Octavia fetches a listener's certificate containers with its certificate manager
(Barbican in production) before it calls the driver; the driver then holds their PEM.
The shared gateway offers a tenant's certificate only for the hostnames its routes were
vetted for, so a certificate naming another tenant's hostname would never be served for
it; the driver still refuses it in the call, by name, so the user learns at once rather
than from a certificate the gateway never shows:

- a certificate that does not parse, whose key is not its own, or that has expired;
- a certificate with a DNS name (its subjectAltName DNS entries, or its subject CN when
  it has none) outside the Tenant's DNS domains.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from teapot_lb.model.tenancy import Tenant
from teapot_lb.tenancy.l7cert import certificate_names, certificate_problem
from teapot_lb.tenancy.l7vet import hostname_refusal

Names = Callable[[bytes], list[str]]


def _text(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value or "").encode()


def container_names(container: Mapping[str, Any]) -> tuple[str, ...]:
    """The DNS names of the certificate in one of Octavia's TLS containers."""
    return tuple(certificate_names(_text(container.get("certificate"))))


def containers_with_refs(listener: Mapping[str, Any]) -> list[tuple[str, Any, Mapping[str, Any]]]:
    """(option, reference, container data) of a listener's certificates as Octavia gives
    them to the driver: the default one, then the SNI ones."""
    out: list[tuple[str, Any, Mapping[str, Any]]] = []
    default = listener.get("default_tls_container_data")
    if default:
        ref = listener.get("default_tls_container_ref")
        out.append(("default_tls_container_ref", ref, default))
    refs = list(listener.get("sni_container_refs") or [])
    for i, data in enumerate(listener.get("sni_container_data") or []):
        if data:
            ref = refs[i] if i < len(refs) else i
            out.append(("sni_container_refs", ref, data))
    return out


def certificate_refusals(
    listener: Mapping[str, Any], tenant: Tenant, names: Names = certificate_names
) -> list[str]:
    """Why the listener's certificates cannot be served for `tenant` (each naming the
    listener, the option and the reference); [] when they can."""
    ident = listener.get("listener_id") or listener.get("id") or "(new)"
    out: list[str] = []
    for option, ref, data in containers_with_refs(listener):
        cert = _text(data.get("certificate"))
        key = _text(data.get("private_key"))
        where = f"listener {ident}: {option} {ref}"
        problem = certificate_problem(cert, key)
        if problem is not None:
            out.append(f"{where}: {problem}")
            continue
        found = names(cert)
        if not found:
            out.append(f"{where}: the certificate names no DNS hostname")
        for name in found:
            refusal = hostname_refusal(name, tenant, "certificate")
            if refusal is not None:
                out.append(f"{where}: certificate name {refusal.message} [{refusal.rule}]")
    return out


__all__ = ["certificate_names", "certificate_refusals", "container_names", "containers_with_refs"]
