"""The manager's decisions about an external provider's request (pure): the spec it is
given, the `Programmed` condition its status becomes, and when to ask it again."""

from __future__ import annotations

from teapot_lb.addresses import IPAddress
from teapot_lb.model.service import ExternalTrafficPolicy
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.providers.base import (
    Listener,
    LoadBalancerSpec,
    Member,
    Phase,
    ProviderStatus,
    tenant_words,
)
from teapot_lb.tenancy.book import Programmed


def load_balancer_spec(
    key: str, request: TenantLoadBalancer, tenant: str, addresses: tuple[IPAddress, ...]
) -> LoadBalancerSpec:
    """What `request`, vetted and given `addresses`, wants built.

    Members: every backend node's address of a VIP's family at each port's nodePort;
    with `externalTrafficPolicy: Local` only the nodes holding a ready endpoint (kube-proxy
    on another node drops the traffic), with the Service's healthCheckNodePort to check
    them by. A port without a nodePort has no members (the provider may refuse it).
    """
    spec = request.spec
    local = spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
    backends = [b for b in spec.backends if b.ready or not local]
    versions = {ip.version for ip in addresses}
    listeners = tuple(
        Listener(
            protocol=port.protocol,
            port=port.port,
            members=tuple(
                Member(b.node, address, port.node_port)
                for b in backends
                for address in b.addresses
                if address.version in versions
            )
            if port.node_port is not None
            else (),
            health_check_port=spec.health_check_node_port if local else None,
        )
        for port in spec.ports
    )
    uid = request.metadata.uid or ""
    return LoadBalancerSpec(key, uid, tenant, addresses, listeners)


BUILDING = "the load balancer is being built"
"""The condition's message while a provider builds and has no words for the tenant."""


def programmed(status: ProviderStatus) -> Programmed:
    """The `Programmed` condition a provider's status is: True only when Active; the
    provider's reason; as its message (which the tenant's agent reads) the provider's
    words for the tenant, else the sentence of its phase; what the tenant's Service is
    told (:func:`~teapot_lb.providers.base.tenant_words`); and the provider's (operator's)
    message as the detail, kept off the tenant's namespace."""
    told = tenant_words(status)
    shown = status.tenant_message or told or BUILDING
    detail = status.message if status.message and status.message != shown else None
    return Programmed(status.phase is Phase.ACTIVE, status.reason, shown, told, detail)


def retry_delay(
    status: ProviderStatus | None, failures: int, *, base_s: float = 1.0, cap_s: float = 60.0
) -> float | None:
    """When to ask the provider again after `status` (None: a delete that finished, or an
    Active build, which the periodic resync checks). An error backs off from the
    provider's `retry_after` doubling per consecutive failure; Provisioning is polled at
    `retry_after`; never more than `cap_s`, never never (no status stays Provisioning)."""
    if status is None or status.phase is Phase.ACTIVE:
        return None
    asked = status.retry_after if status.retry_after is not None else base_s
    if status.phase is Phase.ERROR:
        asked = max(asked, base_s * 2.0 ** min(failures, 16))
    return min(cap_s, max(asked, 0.0))


__all__ = ["BUILDING", "load_balancer_spec", "programmed", "retry_delay"]
