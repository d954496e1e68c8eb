"""When two Services may hold the same IP.

Only Services that carry the same sharing key may share, and only when traffic for the IP
can still be told apart and delivered the same way for both: no (protocol, port) used by
both, and the same externalTrafficPolicy, where `Local` also needs the same pod selector
(the nodes announcing the IP are those with local endpoints, so both Services must have
the same endpoints' nodes).
"""

from __future__ import annotations

from teapot_lb.ipam.outcome import RefusalReason
from teapot_lb.ipam.request import ServiceRequest, TrafficPolicy


def _key_text(request: ServiceRequest) -> str:
    if request.sharing_key is None:
        return "no sharing key"
    return f"sharing key {request.sharing_key!r}"


def sharing_refusal(
    request: ServiceRequest, holder: ServiceRequest
) -> tuple[RefusalReason, str] | None:
    """Why `request` may not share an IP that `holder` holds, or None when it may."""
    if request.sharing_key is None or request.sharing_key != holder.sharing_key:
        return (
            RefusalReason.IP_IN_USE,
            f"it is held by {holder.key} ({_key_text(holder)}; {request.key} has "
            f"{_key_text(request)})",
        )
    clash = request.ports & holder.ports
    if clash:
        ports = ", ".join(f"{proto}/{port}" for proto, port in sorted(clash))
        return (
            RefusalReason.PORT_CONFLICT,
            f"{holder.key} shares it (sharing key {holder.sharing_key!r}) and already uses {ports}",
        )
    if request.external_traffic_policy != holder.external_traffic_policy:
        return (
            RefusalReason.TRAFFIC_POLICY_MISMATCH,
            f"{holder.key} shares it with externalTrafficPolicy "
            f"{holder.external_traffic_policy}, {request.key} has "
            f"{request.external_traffic_policy}",
        )
    if request.external_traffic_policy is TrafficPolicy.LOCAL and dict(request.selector) != dict(
        holder.selector
    ):
        return (
            RefusalReason.SELECTOR_MISMATCH,
            f"{holder.key} shares it with externalTrafficPolicy Local and another pod selector "
            f"({dict(holder.selector)} vs {dict(request.selector)})",
        )
    return None
