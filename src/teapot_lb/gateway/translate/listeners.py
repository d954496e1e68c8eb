"""A Gateway's listeners → the config's listeners, with each listener's conditions."""

from __future__ import annotations

from teapot_lb.gateway.config import Protocol
from teapot_lb.model.gateway_api import Gateway, ListenerProtocol
from teapot_lb.model.gateway_api import Listener as ApiListener
from teapot_lb.model.tenancy import Tenant

from .build import Build
from .results import Condition, ListenerResult, ObjectResult

_PROTOCOL = {
    ListenerProtocol.HTTP: Protocol.HTTP,
    ListenerProtocol.HTTPS: Protocol.HTTPS,
    ListenerProtocol.TLS: Protocol.TLS_PASSTHROUGH,
    ListenerProtocol.TCP: Protocol.TCP,
    ListenerProtocol.UDP: Protocol.UDP,
}


def config_listeners(build: Build, listener: ApiListener, gateway: ObjectResult) -> tuple[str, ...]:
    """The config's listeners of a Gateway listener: HTTP, HTTPS and TLS on their shared
    ports, TCP and UDP on a port of their own (on the Gateway's dedicated address, if any)."""
    protocol = _PROTOCOL[ListenerProtocol(listener.protocol)]
    if protocol in (Protocol.TCP, Protocol.UDP):
        return build.exclusive(protocol, listener.port, gateway)
    return build.shared(protocol, gateway)


def add_gateway(build: Build, obj: Gateway, tenant: Tenant, result: ObjectResult) -> None:
    """A Gateway's listeners, each with its conditions (a certificate not synced: not
    programmed)."""
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
        config_listeners(build, listener, result)
        lr.conditions += [
            Condition("Accepted", True, "Accepted"),
            Condition("Programmed", refs_ok, "Programmed" if refs_ok else "Invalid"),
        ]


__all__ = ["add_gateway", "config_listeners"]
