"""What the gateways observe → Octavia's operating statuses and listener statistics
(pure; the provider agent, :mod:`.agent`, does the I/O).

Inputs per load balancer: its tree and the manager's answer (from its
TenantLoadBalancer), and the gateways' reports (:mod:`teapot_lb.gateway.report`). A pool
the gateway serves is its backend owned by Service ``pool-<id>`` in the Tenant's
namespace; a member is the backend's server at the member's address and port.

Statuses follow Octavia's meanings:

- member: ONLINE while a check passes (HAProxy's ``UP``, ``UP 1/3`` still up), ERROR
  while it fails (``DOWN``, ``DOWN 1/2`` not up again yet), NO_MONITOR when not probed,
  OFFLINE when disabled (admin down, weight 0: DRAINING). Several gateways: ONLINE when
  one reaches it (each HAProxy avoids a member it cannot reach), ERROR when none does.
  No gateway reports it (unreachable, not yet applied): unknown, its status stays (the
  last one the agent saw, or nothing sent at all);
- pool: ERROR when every probed member is in ERROR, DEGRADED when some are, else ONLINE;
- listener: DEGRADED when a pool it sends to is DEGRADED or ERROR, ERROR when all are;
- load balancer: DEGRADED when one of its pools is DEGRADED or ERROR (as Amphora's
  health manager says it).

Everything not probed keeps what :func:`teapot_lb.octavia.mapping.status_update` says of
it (the manager's answer). Statistics are per L7 listener, summed over the backends of
the pools it sends to and over the gateways; HAProxy's counters restart at a reload, so
:class:`CounterTotals` keeps monotonic totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from teapot_lb.gateway.config import RouteKind
from teapot_lb.gateway.report import BackendCounters, BackendsReport, BackendState
from teapot_lb.octavia.l7 import gateway_pools, is_l7, service_name
from teapot_lb.octavia.mapping import (
    DEGRADED,
    ERROR,
    NO_MONITOR,
    OFFLINE,
    ONLINE,
    Answer,
    status_update,
)
from teapot_lb.octavia.monitor import probed
from teapot_lb.octavia.tree import Listener, LoadBalancer, Pool
from teapot_lb.octavia.unsupported import ObjectKind

Key = tuple[str, str]
"""(kind, id) of one Octavia object, the kind as a status update's key."""
Statuses = dict[Key, str]
"""Operating status per object."""
Update = dict[str, list[dict[str, str]]]
"""octavia-lib's `update_loadbalancer_status` dictionary."""


def server_status(haproxy_status: str) -> str | None:
    """A member's operating status from one HAProxy server status (None: says nothing,
    as a server in maintenance while its endpoint is not ready)."""
    word = haproxy_status.split(" ", 1)[0].upper()
    if word == "UP":
        return ONLINE
    if word == "DOWN":
        return ERROR
    if haproxy_status.lower() == "no check":
        return NO_MONITOR
    return None


def _combined(found: Iterable[str]) -> str | None:
    seen = set(found)
    for status in (ONLINE, ERROR, NO_MONITOR):
        if status in seen:
            return status
    return None


def _backends_of(
    reports: Iterable[BackendsReport], namespace: str, pool_id: str
) -> list[BackendState]:
    service = service_name(pool_id)
    return [
        b
        for r in reports
        for b in r.backends
        if b.owner.kind is RouteKind.SERVICE
        and b.owner.namespace == namespace
        and b.owner.name == service
    ]


def _listener_pools(listener: Listener) -> list[str]:
    ids = [listener.default_pool_id] if listener.default_pool_id else []
    ids += [p.redirect_pool_id for p in listener.l7policies
            if p.action == "REDIRECT_TO_POOL" and p.redirect_pool_id]  # fmt: skip
    return list(dict.fromkeys(ids))


def _pool_status(members: list[str]) -> str:
    probed_members = [s for s in members if s in (ONLINE, ERROR, NO_MONITOR)]
    down = [s for s in probed_members if s == ERROR]
    if down and len(down) == len(probed_members):
        return ERROR
    return DEGRADED if down else ONLINE


def _worst(statuses: list[str]) -> str | None:
    bad = [s for s in statuses if s in (DEGRADED, ERROR)]
    if not bad:
        return None
    return ERROR if len(bad) == len(statuses) and all(s == ERROR for s in bad) else DEGRADED


def operating_statuses(
    lb: LoadBalancer,
    answer: Answer,
    namespace: str,
    reports: Iterable[BackendsReport],
    last: Mapping[Key, str] | None = None,
) -> Statuses:
    """Every object's operating status: the answer's (:func:`status_update`), with what
    the gateways' `reports` say of the probed pools' members; a member no report names
    keeps its `last` status (what was sent before), and one never observed (nor its pool,
    when none of its enabled members was) is left out: its status stays as it is."""
    reports = list(reports)
    last = last or {}
    out: Statuses = {}
    for kind, entries in status_update(lb, answer).items():
        for entry in entries:
            if "operating_status" in entry:
                out[(kind, entry["id"])] = entry["operating_status"]
    member, pool_kind = ObjectKind.MEMBER.value, ObjectKind.POOL.value
    pools: dict[str, str] = {}
    for pool in probed_pools(lb):
        if out.get((pool_kind, pool.id)) == OFFLINE:
            continue
        backends = _backends_of(reports, namespace, pool.id)
        statuses, unknown = [], 0
        for m in pool.members:
            key = (member, m.id)
            if out.get(key) in (ONLINE, NO_MONITOR):  # enabled and serving
                found = _combined(
                    status
                    for b in backends
                    for s in b.servers
                    if (s.address, s.port) == (m.address, m.protocol_port)
                    and (status := server_status(s.status)) is not None
                )
                if (known := found or last.get(key)) is None:
                    del out[key]  # never observed: nothing to say yet
                    unknown += 1
                    continue
                out[key] = known
            statuses.append(out[key])
        if unknown and not any(s in (ONLINE, ERROR, NO_MONITOR) for s in statuses):
            del out[(pool_kind, pool.id)]  # nothing observed of its enabled members
            continue
        pools[pool.id] = out[(pool_kind, pool.id)] = _pool_status(statuses)
    listener_kind = ObjectKind.LISTENER.value
    for listener in lb.listeners:
        key = (listener_kind, listener.id)
        mine = [pools[p] for p in _listener_pools(listener) if p in pools]
        worst = _worst(mine)
        if worst is not None and out.get(key) == ONLINE:
            out[key] = worst
    lb_key = (ObjectKind.LOADBALANCER.value, lb.id)
    if out.get(lb_key) == ONLINE and _worst(list(pools.values())) is not None:
        out[lb_key] = DEGRADED
    return out


def status_changes(statuses: Statuses, sent: Mapping[Key, str]) -> Update:
    """The update (octavia-lib's `update_loadbalancer_status` dictionary, operating
    statuses only: provisioning is the driver's) of what differs from `sent`."""
    out: Update = {}
    for (kind, ident), status in sorted(statuses.items()):
        if sent.get((kind, ident)) != status:
            out.setdefault(kind, []).append({"id": ident, "operating_status": status})
    return out


def provisioning_only(
    update: Mapping[str, list[dict[str, str]]],
) -> dict[str, list[dict[str, str]]]:
    """The driver's update without the operating statuses the agent owns (an object the
    change failed for keeps its ERROR: that is the change's outcome)."""
    out: Update = {}
    for kind, entries in update.items():
        out[kind] = [
            e if e.get("operating_status") == ERROR else
            {k: v for k, v in e.items() if k != "operating_status"}
            for e in entries
        ]  # fmt: skip
    return out


def resent(lb: LoadBalancer, answer: Answer, statuses: Mapping[Key, str]) -> Update:
    """The update of a whole tree whose statuses never reached Octavia (the provider
    agent re-sends it): every object ACTIVE, as the driver reports it after a change, with
    the agent's own operating statuses (`statuses`, from :func:`operating_statuses`)."""
    out: Update = {}
    for kind, entries in provisioning_only(status_update(lb, answer)).items():
        out[kind] = [
            {**e, "operating_status": statuses[(kind, e["id"])]}
            if (kind, e["id"]) in statuses else e
            for e in entries
        ]  # fmt: skip
    return out


# ------------------------------------------------------------------ statistics

_TOTALS = ("bytes_in", "bytes_out", "sessions", "errors")


@dataclass
class CounterTotals:
    """Monotonic totals of HAProxy's backend counters per (gateway, backend): a counter
    lower than last time means HAProxy restarted its counters (a reload), so all of the
    new value is new."""

    last: dict[Key, BackendCounters] = field(default_factory=dict)
    totals: dict[Key, dict[str, int]] = field(default_factory=dict)
    owners: dict[Key, tuple[str, str]] = field(default_factory=dict)
    current: dict[Key, int] = field(default_factory=dict)

    def observe(self, source: str, report: BackendsReport) -> None:
        """One gateway's report; its backends it no longer lists keep their totals and
        have no connections open."""
        for key in [k for k in self.current if k[0] == source]:
            self.current[key] = 0
        for backend in report.backends:
            key = (source, backend.name)
            raw, before = backend.counters, self.last.get(key)
            total = self.totals.setdefault(key, dict.fromkeys(_TOTALS, 0))
            for name in _TOTALS:
                now, then = getattr(raw, name), getattr(before, name) if before else 0
                total[name] += now - then if now >= then else now
            self.last[key] = raw
            self.current[key] = raw.current
            self.owners[key] = (backend.owner.namespace, backend.owner.name)

    def forget(self, source: str) -> None:
        """An unreachable gateway: its open connections are not known any more."""
        for key in [k for k in self.current if k[0] == source]:
            self.current[key] = 0

    def listener_statistics(self, lb: LoadBalancer, namespace: str) -> list[dict[str, int | str]]:
        """octavia-lib's listener statistics for the load balancer's L7 listeners."""
        out: list[dict[str, int | str]] = []
        for listener in lb.listeners:
            if not is_l7(listener):
                continue
            services = {(namespace, service_name(p)) for p in _listener_pools(listener)}
            keys = [k for k, owner in self.owners.items() if owner in services]
            sums = {n: sum(self.totals[k][n] for k in keys) for n in _TOTALS}
            out.append(
                {
                    "id": listener.id,
                    "bytes_in": sums["bytes_in"],
                    "bytes_out": sums["bytes_out"],
                    "active_connections": sum(self.current.get(k, 0) for k in keys),
                    "total_connections": sums["sessions"],
                    "request_errors": sums["errors"],
                }
            )
        return out


def probed_pools(lb: LoadBalancer) -> list[Pool]:
    """The pools whose members the gateway checks: its pools with an active monitor."""
    served = gateway_pools(lb)
    return [p for p in lb.pools if p.id in served and probed(p)]


__all__ = [
    "CounterTotals",
    "Key",
    "Statuses",
    "operating_statuses",
    "probed_pools",
    "provisioning_only",
    "server_status",
    "status_changes",
]
