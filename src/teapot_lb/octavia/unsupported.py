"""What the driver refuses (pure): one table of rules, each naming the Octavia option and
why teapot-lb cannot honour it.

Octavia calls the driver synchronously for every create and update; a refusal there
becomes `UnsupportedOptionError` and the API's answer to the user (the object is not
created). Rules read octavia-lib's provider dictionaries, so they see exactly what the
user set. HTTP and TERMINATED_HTTPS listeners, their L7 policies and rules go to the
gateway; what it cannot serve of them is refused by :func:`teapot_lb.octavia.l7.l7_refusals`
on the whole tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import TypeAdapter, ValidationError

from teapot_lb.gateway.config import Hostname
from teapot_lb.octavia.tree import LoadBalancer, Mode, pools_in

L4_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
VIP_PROTOCOLS = L4_PROTOCOLS | {"HTTPS"}
"""Listeners served on the VIP itself: HTTPS is TLS passed through, a TCP port."""
LISTENER_PROTOCOLS = VIP_PROTOCOLS | {"HTTP", "TERMINATED_HTTPS"}
POOL_PROTOCOLS = L4_PROTOCOLS | {"HTTP", "HTTPS"}
ALGORITHMS = frozenset({"ROUND_ROBIN", "SOURCE_IP_PORT"})

_GATEWAY = "the gateway (teapot-lb's L7 and TLS proxy) does not serve it"


class ObjectKind(StrEnum):
    """Octavia's object kinds, as the keys of a status update."""

    LOADBALANCER = "loadbalancers"
    LISTENER = "listeners"
    POOL = "pools"
    MEMBER = "members"
    HEALTHMONITOR = "healthmonitors"
    L7POLICY = "l7policies"
    L7RULE = "l7rules"

    @property
    def singular(self) -> str:
        return {
            ObjectKind.LOADBALANCER: "load balancer",
            ObjectKind.LISTENER: "listener",
            ObjectKind.POOL: "pool",
            ObjectKind.MEMBER: "member",
            ObjectKind.HEALTHMONITOR: "health monitor",
            ObjectKind.L7POLICY: "L7 policy",
            ObjectKind.L7RULE: "L7 rule",
        }[self]


@dataclass(frozen=True)
class Unsupported:
    """One option teapot-lb does not support on one object."""

    kind: ObjectKind
    id: str
    option: str
    value: object
    why: str

    def __str__(self) -> str:
        return (
            f"{self.kind.singular} {self.id}: option {self.option}={self.value!r} is not "
            f"supported by the teapot provider: {self.why}"
        )


def _set(value: Any) -> bool:
    return value not in (None, "", [], {}, ())


@dataclass(frozen=True)
class OptionRule:
    """Refuse `option` of a `kind` when `refuses(value, mode)`; `why` tells the user."""

    kind: ObjectKind
    option: str
    refuses: Callable[[Any, Mode], bool]
    why: str


def _when_set(value: Any, _: Mode) -> bool:
    return _set(value)


def _true(value: Any, _: Mode) -> bool:
    return value is True


def _outside_seconds(value: Any, _: Mode) -> bool:
    return value is not None and not 1 <= value <= 3600


_HOSTNAME: TypeAdapter[str] = TypeAdapter(Hostname)


def _not_hostname(value: Any, _: Mode) -> bool:
    try:
        _HOSTNAME.validate_python(value)
    except ValidationError:
        return value is not None
    return False


RULES: tuple[OptionRule, ...] = (
    OptionRule(ObjectKind.LOADBALANCER, "vip_qos_policy_id", _when_set,
               "the VIP is not a Neutron port; QoS policies do not apply"),
    OptionRule(ObjectKind.LOADBALANCER, "vip_sg_ids", _when_set,
               "the VIP is not a Neutron port; security groups do not apply"),
    OptionRule(ObjectKind.LOADBALANCER, "additional_vips", _when_set,
               "one VIP per load balancer for now"),
    OptionRule(ObjectKind.LOADBALANCER, "availability_zone", _when_set,
               "teapot-lb has no availability zones"),
    OptionRule(ObjectKind.LISTENER, "protocol", lambda v, _: v not in LISTENER_PROTOCOLS,
               "TCP, UDP, SCTP and HTTPS (TLS passed through) listeners (on the VIP) and "
               "HTTP and TERMINATED_HTTPS listeners (on the gateway) are served"),
    OptionRule(ObjectKind.LISTENER, "connection_limit", lambda v, _: v not in (None, -1),
               "no connection limits (route mode has no proxy in the path)"),
    OptionRule(ObjectKind.LISTENER, "allowed_cidrs", _when_set,
               "no source filtering of the VIP yet"),
    OptionRule(ObjectKind.LISTENER, "insert_headers", _when_set,
               "the gateway always sets X-Forwarded-For and X-Forwarded-Proto, nothing else"),
    OptionRule(ObjectKind.LISTENER, "client_ca_tls_container_ref", _when_set, _GATEWAY),
    OptionRule(ObjectKind.LISTENER, "client_crl_container_ref", _when_set, _GATEWAY),
    OptionRule(ObjectKind.LISTENER, "client_authentication",
               lambda v, _: v not in (None, "NONE"), _GATEWAY),
    OptionRule(ObjectKind.POOL, "protocol", lambda v, _: v not in POOL_PROTOCOLS,
               f"TCP, UDP, SCTP, HTTP and HTTPS (behind an HTTPS listener) pools are "
               f"served (no PROXY protocol); {_GATEWAY}"),
    OptionRule(ObjectKind.POOL, "lb_algorithm", lambda v, _: v not in (None, *ALGORITHMS),
               "traffic is spread per flow by the router's ECMP hash: ROUND_ROBIN or "
               "SOURCE_IP_PORT"),
    OptionRule(ObjectKind.POOL, "session_persistence", _when_set,
               "no session persistence (flows are spread by the router's ECMP hash)"),
    OptionRule(ObjectKind.POOL, "tls_enabled", _true, _GATEWAY),
    OptionRule(ObjectKind.POOL, "tls_container_ref", _when_set, _GATEWAY),
    OptionRule(ObjectKind.POOL, "ca_tls_container_ref", _when_set, _GATEWAY),
    OptionRule(ObjectKind.POOL, "crl_container_ref", _when_set, _GATEWAY),
    OptionRule(ObjectKind.MEMBER, "backup", _true,
               "no backup members: every ready member receives traffic"),
    OptionRule(ObjectKind.MEMBER, "monitor_address", _when_set,
               "members are not probed at another address"),
    OptionRule(ObjectKind.MEMBER, "monitor_port", _when_set,
               "members are not probed at another port"),
    OptionRule(ObjectKind.HEALTHMONITOR, "type", lambda v, _: v in ("PING", "TLS-HELLO"),
               "the gateway's HAProxy probes with HTTP, HTTPS or TCP checks: it cannot send "
               "ICMP echoes (PING), and an HTTP pool's members answer HTTP, not a bare TLS "
               "hello (TLS-HELLO)"),
    OptionRule(ObjectKind.HEALTHMONITOR, "delay", _outside_seconds,
               "the gateway checks between every second and once an hour (1 to 3600 s)"),
    OptionRule(ObjectKind.HEALTHMONITOR, "timeout", _outside_seconds,
               "a check waits from 1 s to an hour (1 to 3600 s)"),
    OptionRule(ObjectKind.HEALTHMONITOR, "domain_name", _not_hostname,
               "the check's Host is a DNS name without a trailing dot or underscores"),
)  # fmt: skip


ID_KEYS = {
    ObjectKind.LOADBALANCER: "loadbalancer_id",
    ObjectKind.LISTENER: "listener_id",
    ObjectKind.POOL: "pool_id",
    ObjectKind.MEMBER: "member_id",
    ObjectKind.HEALTHMONITOR: "healthmonitor_id",
    ObjectKind.L7POLICY: "l7policy_id",
    ObjectKind.L7RULE: "l7rule_id",
}


def refusals(kind: ObjectKind, obj: Mapping[str, Any], mode: Mode) -> list[Unsupported]:
    """Every option of one provider dictionary that the rules refuse."""
    ident = str(obj.get(ID_KEYS[kind]) or "(new)")
    return [
        Unsupported(kind, ident, rule.option, obj.get(rule.option), rule.why)
        for rule in RULES
        if rule.kind is kind and rule.refuses(obj.get(rule.option), mode)
    ]


def refusals_in_load_balancer(lb: Mapping[str, Any], mode: Mode) -> list[Unsupported]:
    """A load balancer created with its listeners, pools, members and monitors at once
    (Octavia's graph create): every refused option of every object in it."""
    out = refusals(ObjectKind.LOADBALANCER, lb, mode)
    for listener in lb.get("listeners") or []:
        out += refusals(ObjectKind.LISTENER, listener, mode)
    for pool in pools_in(lb):
        out += refusals(ObjectKind.POOL, pool, mode)
        for member in pool.get("members") or []:
            out += refusals(ObjectKind.MEMBER, member, mode)
        if pool.get("healthmonitor"):
            out += refusals(ObjectKind.HEALTHMONITOR, pool["healthmonitor"], mode)
    return out


def tree_refusals(lb: LoadBalancer) -> list[Unsupported]:
    """What a whole load balancer cannot be, whatever its single objects are.

    Route mode routes the VIP, every port of it, to the members: they receive the
    listener's port on the VIP (so a member's port must be its listener's), and every
    listener reaches the same members (so their default pools must have the same
    addresses). Proxy mode gives each listener one port on the members (a pool's members
    share one protocol_port). Members must be of the VIP's address family.
    """
    out: list[Unsupported] = []
    addresses: dict[str, frozenset[str]] = {}
    for listener in lb.listeners:
        if listener.protocol not in VIP_PROTOCOLS:
            continue  # the gateway's (teapot_lb.octavia.l7)
        pool = lb.pool(listener.default_pool_id) if listener.default_pool_id else None
        if pool is None:
            continue
        for member in pool.members:
            if lb.mode is Mode.ROUTE and member.protocol_port != listener.protocol_port:
                out.append(
                    Unsupported(
                        ObjectKind.MEMBER, member.id, "protocol_port", member.protocol_port,
                        f"route mode delivers the VIP's traffic unchanged, so members of "
                        f"listener {listener.id} must listen on its port "
                        f"{listener.protocol_port} (or use a flavor with mode proxy)",
                    )
                )  # fmt: skip
            if lb.vip_address and (":" in member.address) != (":" in lb.vip_address):
                out.append(
                    Unsupported(
                        ObjectKind.MEMBER, member.id, "address", member.address,
                        f"not of the address family of the VIP {lb.vip_address}",
                    )
                )  # fmt: skip
        ports = {m.protocol_port for m in pool.members}
        if lb.mode is Mode.PROXY and len(ports) > 1:
            out.append(
                Unsupported(
                    ObjectKind.POOL, pool.id, "members.protocol_port", sorted(ports),
                    "proxy mode reaches one port on the members of a pool",
                )
            )  # fmt: skip
        addresses[listener.id] = frozenset(m.address for m in pool.members)
    if lb.mode is Mode.ROUTE and len(set(addresses.values())) > 1:
        listeners = ", ".join(sorted(addresses))
        out.append(
            Unsupported(
                ObjectKind.LOADBALANCER, lb.id, "pools.members", listeners,
                "route mode routes the whole VIP to one set of members: the default "
                "pools of all listeners must have the same member addresses (or use a "
                "flavor with mode proxy)",
            )
        )  # fmt: skip
    return out


__all__ = [
    "ALGORITHMS",
    "ID_KEYS",
    "L4_PROTOCOLS",
    "LISTENER_PROTOCOLS",
    "POOL_PROTOCOLS",
    "RULES",
    "VIP_PROTOCOLS",
    "ObjectKind",
    "OptionRule",
    "Unsupported",
    "refusals",
    "refusals_in_load_balancer",
    "tree_refusals",
]
