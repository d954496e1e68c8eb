"""The OVN Northbound rows teapot-lb owns, as plain data: what we want and what the NB holds.

One :class:`NBState` describes both sides, so the diff (:mod:`teapot_lb.ovn.diff`) compares
like with like. Only our rows appear in it: a ``Load_Balancer`` is ours when its
``external_ids`` carry our owner key with this cluster's name; a ``Load_Balancer_Group``
(which has no ``external_ids``) when its name starts with our prefix. Attachments are the
references from a ``Logical_Router`` / ``Logical_Switch`` to our rows only: what others
attached there is not in the state and never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from teapot_lb.addresses import IPAddress

OWNER_KEY = "lb.teapot.io/owner"  # external_ids: which teapot-lb (cluster) owns the row
SERVICE_KEY = "lb.teapot.io/service"  # external_ids: the Service (namespace/name)
IP_KEY = "lb.teapot.io/ip"  # external_ids: the Service IP
ROUTER_KEY = "lb.teapot.io/router"  # external_ids: the gateway router of a Local row

Pairs = tuple[tuple[str, str], ...]  # a string map as sorted (key, value) pairs


def pairs(mapping: Mapping[str, str]) -> Pairs:
    return tuple(sorted(mapping.items()))


def name_prefix(owner: str) -> str:
    """The start of every row name of this owner (cluster)."""
    return f"teapot-lb/{owner}/"


def vip_text(ip: IPAddress, port: int) -> str:
    """`ip:port` as OVN writes a VIP or a backend (IPv6 in brackets)."""
    return f"{ip}:{port}" if ip.version == 4 else f"[{ip}]:{port}"


class Table(StrEnum):
    ROUTER = "Logical_Router"
    SWITCH = "Logical_Switch"


class Target(NamedTuple):
    """A logical router or switch, by name, that load balancers are attached to."""

    table: Table
    name: str

    def __str__(self) -> str:
        kind = "router" if self.table is Table.ROUTER else "switch"
        return f"{kind} {self.name}"


@dataclass(frozen=True)
class HealthCheck:
    """A Load_Balancer_Health_Check: probe the backends of `vip`."""

    vip: str
    options: Pairs


@dataclass(frozen=True)
class LoadBalancer:
    """One Load_Balancer row: the VIPs of one Service IP and protocol and their backends."""

    name: str
    protocol: str  # tcp, udp, sctp
    vips: Pairs  # "ip:port" → "backend:port,backend:port"
    options: Pairs = ()
    external_ids: Pairs = ()
    health_checks: tuple[HealthCheck, ...] = ()
    ip_port_mappings: Pairs = ()  # backend IP → "logical_port:source_ip" (health checks)

    def backends(self) -> dict[str, list[str]]:
        """The VIPs with their backends as lists."""
        return {vip: [b for b in text.split(",") if b] for vip, text in self.vips}


def _frozen() -> Mapping[str, frozenset[str]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class NBState:
    """Our part of the Northbound database.

    `load_balancers` by name; `groups`: our Load_Balancer_Groups by name → member names;
    `attached`: per router/switch, our load balancers it references directly;
    `group_attached`: per router/switch, our groups it references. `targets`: the routers
    and switches that exist (observed side only; None on the desired side).
    """

    load_balancers: Mapping[str, LoadBalancer] = field(default_factory=dict)
    groups: Mapping[str, frozenset[str]] = field(default_factory=_frozen)
    attached: Mapping[Target, frozenset[str]] = field(default_factory=dict)
    group_attached: Mapping[Target, frozenset[str]] = field(default_factory=dict)
    targets: frozenset[Target] | None = None
