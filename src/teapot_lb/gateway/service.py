"""The gateway process's core: one HAProxy (HTTP, HTTPS, passthrough, TCP) and one nginx
(UDP) driven from one GatewayConfig, with readiness and a stats snapshot for metrics.

This is what the control plane calls: `await gateway.apply(config)` with the whole
desired config whenever anything changed (level-triggered; unchanged parts cost nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.gateway import nginx, plan
from teapot_lb.gateway.config import GatewayConfig
from teapot_lb.gateway.haproxy import HAProxy, Refused
from teapot_lb.gateway.runtime import StatRow


def _log() -> Any:
    return log.get("gateway")


@dataclass(frozen=True)
class GatewayApplied:
    """What one apply did: HAProxy's change, whether nginx reloaded, and the errors (a
    refused part keeps serving its last good configuration)."""

    change: plan.Change
    errors: tuple[str, ...] = ()


@dataclass
class StatsSnapshot:
    rows: list[StatRow] = field(default_factory=list)
    taken_at: float = 0.0


class Gateway:
    """HAProxy and nginx for one gateway node, under `state_dir`."""

    def __init__(self, state_dir: Path, *, wrap: Sequence[str] = ()) -> None:
        self.haproxy = HAProxy(state_dir / "haproxy", wrap=wrap)
        self.nginx = nginx.Nginx(state_dir / "nginx", wrap=wrap)
        self.config: GatewayConfig | None = None
        self.last_errors: tuple[str, ...] = ()
        self.applies = 0
        self.stats = StatsSnapshot()

    async def apply(self, config: GatewayConfig) -> GatewayApplied:
        applied = await self.haproxy.apply(config)
        errors = [applied.error] if applied.error else []
        udp_error = await self.nginx.apply(config)
        if udp_error:
            errors.append(udp_error)
        self.applies += 1
        self.last_errors = tuple(errors)
        if not errors:
            self.config = config
        return GatewayApplied(applied.change, self.last_errors)

    def readiness(self) -> list[str]:
        """Why the gateway is not ready: nothing applied yet, HAProxy not running."""
        reasons = []
        if self.haproxy.running is None:
            reasons.append(
                "no configuration applied yet (it comes from --config, --manifests or the"
                " management cluster's gateway objects through --kubeconfig; a refused one"
                " is logged as `gateway config refused`)"
            )
        elif self.haproxy.master_pid is None:
            reasons.append(f"haproxy is not running (its files: {self.haproxy.paths.base})")
        if self.config is not None and nginx.has_udp(self.config) and self.nginx.daemon.pid is None:
            reasons.append("nginx (UDP) is not running")
        return reasons

    def liveness(self) -> list[str]:
        return []

    async def refresh_stats(self) -> None:
        if self.haproxy.master_pid is None:
            return
        with contextlib.suppress(Refused, OSError, TimeoutError):
            self.stats = StatsSnapshot(await self.haproxy.stats(), time.monotonic())

    async def poll_stats(self, every_s: float = 5.0) -> None:
        """Refresh the stats snapshot the metrics read, forever."""
        while True:
            await self.refresh_stats()
            await asyncio.sleep(every_s)

    async def stop(self) -> None:
        await self.nginx.stop()
        await self.haproxy.stop()
