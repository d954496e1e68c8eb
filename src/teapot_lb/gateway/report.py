"""What the gateway's HAProxy knows of its backends, as one small document (pure): each
backend's owner, counters, and each endpoint's server state and last check.

`teapot-lb gateway` serves it at ``/gateway/backends`` on its metrics port, built from
the same ``show stat`` snapshot its metrics read. Readers (the Octavia provider agent)
parse it with the same models. Counters are HAProxy's own: they restart from zero when
HAProxy reloads, so a reader that needs totals keeps them itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import ip_address

from teapot_lb.gateway.config import GatewayConfig, Owner
from teapot_lb.gateway.render import backend_id
from teapot_lb.gateway.runtime import StatRow
from teapot_lb.model.common import KubeModel

PATH = "/gateway/backends"


class BackendCounters(KubeModel):
    bytes_in: int = 0
    bytes_out: int = 0
    current: int = 0
    """Connections open now."""
    sessions: int = 0
    """Connections (HTTP: streams) handled since HAProxy started."""
    errors: int = 0
    """HTTP: 5xx answers; TCP: connection and response errors."""


class ServerState(KubeModel):
    address: str
    port: int
    status: str
    """HAProxy's: UP, DOWN, MAINT, "UP 1/3" (going down), "DOWN 1/2" (going up),
    "no check" (not probed), ..."""
    check: str = ""
    """The last check's result (L4OK, L7OK, L4CON, L7STS, ...); empty: not probed."""


class BackendState(KubeModel):
    name: str
    owner: Owner = Owner()
    health_checked: bool = False
    counters: BackendCounters = BackendCounters()
    servers: tuple[ServerState, ...] = ()


class BackendsReport(KubeModel):
    stats_age_seconds: float | None = None
    """How old the counters are (None: no snapshot yet)."""
    backends: tuple[BackendState, ...] = ()


def _address(text: str) -> tuple[str, int] | None:
    host, _, port = text.rpartition(":")
    try:
        return str(ip_address(host.strip("[]"))), int(port)
    except ValueError:
        return None


def backends_report(
    config: GatewayConfig | None, rows: Sequence[StatRow], age_s: float | None
) -> BackendsReport:
    """The report for the served `config` from one ``show stat`` snapshot: every backend,
    and of its servers those holding one of its endpoints (empty slots are left out)."""
    if config is None:
        return BackendsReport(stats_age_seconds=age_s)
    by_proxy: dict[str, list[StatRow]] = {}
    for row in rows:
        by_proxy.setdefault(row.proxy, []).append(row)
    out = []
    for backend in config.backends:
        endpoints = {(str(e.address), e.port) for e in backend.endpoints}
        counters = BackendCounters()
        servers = []
        for row in by_proxy.get(backend_id(backend.name), []):
            if row.service == "BACKEND":
                counters = BackendCounters(
                    bytes_in=row.bytes_in, bytes_out=row.bytes_out, current=row.current,
                    sessions=row.sessions, errors=row.errors,
                )  # fmt: skip
            elif row.service != "FRONTEND":
                where = _address(row.address)
                if where is not None and where in endpoints:
                    servers.append(ServerState(address=where[0], port=where[1],
                                               status=row.status, check=row.check))  # fmt: skip
        out.append(
            BackendState(
                name=backend.name,
                owner=backend.owner,
                health_checked=backend.health_check is not None,
                counters=counters,
                servers=tuple(sorted(servers, key=lambda s: (s.address, s.port))),
            )
        )
    return BackendsReport(stats_age_seconds=age_s, backends=tuple(out))


__all__ = [
    "PATH",
    "BackendCounters",
    "BackendState",
    "BackendsReport",
    "ServerState",
    "backends_report",
]
