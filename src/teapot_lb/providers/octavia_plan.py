"""What Octavia should hold for one request, what it holds, and the calls between (pure).

:func:`wanted` turns a :class:`~teapot_lb.providers.base.LoadBalancerSpec` into the tree
the ``ovn`` provider can build: one load balancer (the VIP the manager assigned), per
listener a listener and its default pool (SOURCE_IP_PORT: the only algorithm OVN hashes
by besides SOURCE_IP) with the members, and a health monitor on the member's own port
(TCP, or UDP-CONNECT; OVN has none for SCTP and probes no other port). :func:`existing`
reads Octavia's JSON answers into the same shapes, and :func:`plan` lists the fewest
calls that turn one into the other: a whole tree is one call (Octavia's fully populated
create), a new listener one (with its pool, members and monitor), a pool's members one
(the batch update replaces the list), and a listener whose port or protocol changed is
deleted and made again (Octavia cannot change either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any

from teapot_lb.model.service import Protocol
from teapot_lb.providers.base import LoadBalancerSpec, Member, owner_tag
from teapot_lb.providers.octavia_config import HealthMonitor

ALGORITHM = "SOURCE_IP_PORT"
SETTINGS = ("delay", "timeout", "max_retries", "max_retries_down")
"""A health monitor's fields the config sets (changed in place by an update)."""
MONITOR_TYPES = {Protocol.TCP: "TCP", Protocol.UDP: "UDP-CONNECT"}
"""The monitor the ovn provider has for each protocol (none for SCTP)."""


@dataclass(frozen=True)
class WantedListener:
    protocol: str
    port: int
    members: frozenset[Member]
    """Of the VIP's address family."""
    monitor: str | None
    """The health monitor's type, None for none."""

    @property
    def name(self) -> str:
        return f"{self.protocol.lower()}-{self.port}"


@dataclass(frozen=True)
class Wanted:
    """The tree one request wants built."""

    name: str
    tag: str
    project: str
    vip_address: str
    listeners: tuple[WantedListener, ...]
    left_out: tuple[str, ...] = ()
    """Members of another address family than the VIP's (OVN does not mix them)."""


def wanted(spec: LoadBalancerSpec, project: str, monitor: HealthMonitor) -> Wanted:
    vip = spec.addresses[0]
    left_out: list[str] = []
    listeners = []
    for listener in spec.listeners:
        members = set()
        for member in listener.members:
            if member.address.version != vip.version:
                left_out.append(f"{member.node} ({member.address})")
                continue
            members.add(member)
        kind = MONITOR_TYPES.get(listener.protocol) if monitor.enabled else None
        listeners.append(WantedListener(str(listener.protocol), listener.port,
                                        frozenset(members), kind))  # fmt: skip
    return Wanted(
        name=spec.key.replace("/", "-"),
        tag=owner_tag(spec.uid),
        project=project,
        vip_address=str(vip),
        listeners=tuple(sorted(listeners, key=lambda li: (li.port, li.protocol))),
        left_out=tuple(sorted(set(left_out))),
    )


@dataclass(frozen=True)
class ExistingMember:
    id: str
    name: str
    address: str
    port: int
    operating_status: str = ""
    """ONLINE, NO_MONITOR, or (its health monitor's verdict) ERROR or OFFLINE."""


@dataclass(frozen=True)
class ExistingPool:
    id: str
    protocol: str
    members: tuple[ExistingMember, ...]
    monitor_id: str | None
    monitor_type: str | None
    monitor_settings: tuple[int, ...] | None = None
    """Its monitor's :data:`SETTINGS`, in that order (None: not all known)."""


@dataclass(frozen=True)
class ExistingListener:
    id: str
    protocol: str
    port: int
    pool_id: str | None


@dataclass(frozen=True)
class Existing:
    """One load balancer as Octavia holds it."""

    id: str
    provisioning_status: str
    operating_status: str
    vip_address: str
    listeners: tuple[ExistingListener, ...] = ()
    pools: tuple[ExistingPool, ...] = ()

    @property
    def pending(self) -> bool:
        return self.provisioning_status.startswith("PENDING_")

    def pool(self, pool_id: str | None) -> ExistingPool | None:
        return next((p for p in self.pools if p.id == pool_id), None)


GOING = frozenset({"PENDING_DELETE", "DELETED"})
"""A member's provisioning statuses that mean it is on its way out: as good as gone. The
ovn provider handles a batch update as its members updated, then the others deleted, and
reports the load balancer ACTIVE after the first: read as still there, a member being
deleted would be asked out again by a second batch, which queues behind the first."""


def existing(
    lb: Mapping[str, Any],
    listeners: Sequence[Mapping[str, Any]] = (),
    pools: Sequence[Mapping[str, Any]] = (),
    members: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    monitors: Sequence[Mapping[str, Any]] = (),
) -> Existing:
    """The load balancer from Octavia's JSON: the load balancer, its listeners and pools,
    each pool's members by pool id, and the health monitors."""
    kinds = {m["id"]: m.get("type") for m in monitors}
    settings = {m["id"]: tuple(m[k] for k in SETTINGS) for m in monitors
                if all(isinstance(m.get(k), int) for k in SETTINGS)}  # fmt: skip
    members = members or {}
    return Existing(
        id=lb["id"],
        provisioning_status=lb.get("provisioning_status") or "",
        operating_status=lb.get("operating_status") or "",
        vip_address=lb.get("vip_address") or "",
        listeners=tuple(
            ExistingListener(
                li["id"], li["protocol"], li["protocol_port"], li.get("default_pool_id")
            )
            for li in listeners
        ),
        pools=tuple(
            ExistingPool(
                id=p["id"],
                protocol=p["protocol"],
                members=tuple(
                    ExistingMember(
                        m["id"],
                        m.get("name") or "",
                        m["address"],
                        m["protocol_port"],
                        m.get("operating_status") or "",
                    )
                    for m in members.get(p["id"], ())
                    if m.get("provisioning_status") not in GOING
                ),
                monitor_id=p.get("healthmonitor_id"),
                monitor_type=kinds.get(p.get("healthmonitor_id"))
                if p.get("healthmonitor_id")
                else None,
                monitor_settings=settings.get(p.get("healthmonitor_id") or ""),
            )
            for p in pools
        ),
    )


OUT_OF_SERVICE = frozenset({"ERROR", "OFFLINE"})
"""A member's operating statuses that mean it gets no new connection: ERROR, its health
monitor's probes fail; OFFLINE, the ovn provider's word for a member it stopped
monitoring, or one disabled."""


def out_of_service(have: Existing) -> tuple[str, ...]:
    """The members no new connection goes to, "node (address port N) STATUS", sorted."""
    found = {f"{m.name or m.id} ({m.address} port {m.port}) {m.operating_status}"
             for pool in have.pools for m in pool.members
             if m.operating_status in OUT_OF_SERVICE}  # fmt: skip
    return tuple(sorted(found))


@dataclass(frozen=True)
class Step:
    """One call to Octavia's API: `method` on `path` (under /lbaas) with `body`."""

    method: str
    path: str
    body: Mapping[str, Any] | None
    what: str
    """For the log and the status message."""


def _member_body(member: Member, subnet: str | None, tag: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": member.node, "address": str(member.address),
                            "protocol_port": member.port, "tags": [tag]}  # fmt: skip
    if subnet is not None:
        body["subnet_id"] = subnet
    return body


def _monitor_settings(monitor: HealthMonitor) -> dict[str, int]:
    return {k: getattr(monitor, k) for k in SETTINGS}


def _monitor_body(kind: str, monitor: HealthMonitor, tag: str) -> dict[str, Any]:
    return {"type": kind, **_monitor_settings(monitor), "tags": [tag]}


def _members(listener: WantedListener, subnet: str | None, tag: str) -> list[dict[str, Any]]:
    ordered = sorted(listener.members, key=lambda m: (m.address, m.port, m.node))
    return [_member_body(m, subnet, tag) for m in ordered]


def _pool_body(
    want: Wanted, listener: WantedListener, subnet: str | None, monitor: HealthMonitor
) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": listener.name,
        "protocol": listener.protocol,
        "lb_algorithm": ALGORITHM,
        "tags": [want.tag],
        "members": _members(listener, subnet, want.tag),
    }
    if listener.monitor is not None:
        pool["healthmonitor"] = _monitor_body(listener.monitor, monitor, want.tag)
    return pool


def _listener_body(
    want: Wanted, listener: WantedListener, subnet: str | None, monitor: HealthMonitor
) -> dict[str, Any]:
    return {
        "name": listener.name,
        "protocol": listener.protocol,
        "protocol_port": listener.port,
        "tags": [want.tag],
        "default_pool": _pool_body(want, listener, subnet, monitor),
    }


def create(
    want: Wanted,
    provider: str,
    vip: Mapping[str, str],
    member_subnet: str | None,
    monitor: HealthMonitor,
) -> Step:
    """The one call that builds the whole tree (`vip`: vip_subnet_id or vip_network_id)."""
    body = {
        "name": want.name,
        "project_id": want.project,
        "provider": provider,
        "vip_address": want.vip_address,
        **vip,
        "tags": [want.tag],
        "listeners": [_listener_body(want, li, member_subnet, monitor) for li in want.listeners],
    }
    return Step("POST", "/lbaas/loadbalancers", {"loadbalancer": body},
                f"create load balancer {want.name} ({len(want.listeners)} listeners)")  # fmt: skip


def delete_load_balancer(lb_id: str, why: str) -> Step:
    return Step("DELETE", f"/lbaas/loadbalancers/{lb_id}?cascade=true", None,
                f"delete load balancer {lb_id} ({why})")  # fmt: skip


def plan(
    want: Wanted, have: Existing, member_subnet: str | None, monitor: HealthMonitor
) -> list[Step]:
    """The calls that turn `have` into `want`, deletions first (empty: converged). Each
    puts the load balancer in PENDING_UPDATE: they are made one after the other."""
    if have.vip_address and ip_address(have.vip_address) != ip_address(want.vip_address):
        return [delete_load_balancer(have.id, f"its VIP is {have.vip_address}, "
                                               f"wanted {want.vip_address}")]  # fmt: skip
    steps: list[Step] = []
    by_key = {(li.protocol, li.port): li for li in want.listeners}
    kept: dict[tuple[str, int], ExistingListener] = {}
    for li in have.listeners:
        key = (li.protocol, li.port)
        if key in by_key and key not in kept:
            kept[key] = li
            continue
        steps.append(Step("DELETE", f"/lbaas/listeners/{li.id}", None,
                          f"delete listener {li.protocol} {li.port}"))  # fmt: skip
    used = {li.pool_id for li in kept.values()}
    for pool in have.pools:
        if pool.id not in used:
            steps.append(Step("DELETE", f"/lbaas/pools/{pool.id}", None,
                              f"delete pool {pool.id}"))  # fmt: skip
    for key, listener in by_key.items():
        old = kept.get(key)
        if old is None:
            body = _listener_body(want, listener, member_subnet, monitor)
            body["loadbalancer_id"] = have.id
            steps.append(Step("POST", "/lbaas/listeners", {"listener": body},
                              f"create listener {listener.protocol} {listener.port}"))  # fmt: skip
            continue
        old_pool = have.pool(old.pool_id)
        if old_pool is None:
            body = _pool_body(want, listener, member_subnet, monitor)
            body["listener_id"] = old.id
            what = f"create pool of listener {listener.protocol} {listener.port}"
            steps.append(Step("POST", "/lbaas/pools", {"pool": body}, what))
            continue
        steps.extend(_pool_steps(want, listener, old_pool, member_subnet, monitor))
    return steps


def _pool_steps(
    want: Wanted,
    listener: WantedListener,
    pool: ExistingPool,
    member_subnet: str | None,
    monitor: HealthMonitor,
) -> list[Step]:
    steps = []
    have = {Member(m.name, ip_address(m.address), m.port) for m in pool.members}
    gone = [m for m in pool.members
            if Member(m.name, ip_address(m.address), m.port) not in listener.members]  # fmt: skip
    if len(gone) == 1 and listener.members <= have and len(pool.members) == len(have):
        # One member out, nothing else: its own DELETE. A batch would have the ovn provider
        # update every member kept before it deletes this one (0.3 - 0.4 s more here).
        what = f"members of {listener.name}: 0 in, 1 out ({gone[0].address})"
        steps.append(Step("DELETE", f"/lbaas/pools/{pool.id}/members/{gone[0].id}", None, what))
    elif have != listener.members or len(pool.members) != len(have):
        added = len(listener.members - have)
        removed = len(pool.members) - len(have & listener.members)
        steps.append(Step("PUT", f"/lbaas/pools/{pool.id}/members",
                          {"members": _members(listener, member_subnet, want.tag)},
                          f"members of {listener.name}: {added} in, {removed} out"))  # fmt: skip
    if pool.monitor_type != listener.monitor:
        if pool.monitor_id is not None:
            steps.append(Step("DELETE", f"/lbaas/healthmonitors/{pool.monitor_id}", None,
                              f"delete health monitor of {listener.name}"))  # fmt: skip
        if listener.monitor is not None:
            body = _monitor_body(listener.monitor, monitor, want.tag) | {"pool_id": pool.id}
            steps.append(Step("POST", "/lbaas/healthmonitors", {"healthmonitor": body},
                              f"create health monitor of {listener.name}"))  # fmt: skip
    elif pool.monitor_id is not None and pool.monitor_settings is not None:
        settings = _monitor_settings(monitor)
        held = dict(zip(SETTINGS, pool.monitor_settings, strict=True))
        if held != settings:
            changed = ", ".join(f"{k} {held[k]} -> {v}" for k, v in settings.items()
                                if held[k] != v)  # fmt: skip
            steps.append(Step("PUT", f"/lbaas/healthmonitors/{pool.monitor_id}",
                              {"healthmonitor": settings},
                              f"health monitor of {listener.name}: {changed}"))  # fmt: skip
    return steps


__all__ = [
    "ALGORITHM",
    "MONITOR_TYPES",
    "OUT_OF_SERVICE",
    "SETTINGS",
    "Existing",
    "ExistingListener",
    "ExistingMember",
    "ExistingPool",
    "Step",
    "Wanted",
    "WantedListener",
    "create",
    "delete_load_balancer",
    "existing",
    "out_of_service",
    "plan",
    "wanted",
]
