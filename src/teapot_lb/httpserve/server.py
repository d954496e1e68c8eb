"""aiohttp server for Prometheus metrics and health/readiness probes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], Sequence[str]]
"""Returns why the component is not alive/ready; an empty sequence means it is."""


def parse_address(text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """`host:port`, `:port` or `[v6]:port` into `(host, port)`; ValueError if malformed."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r} is not an address; write HOST:PORT or :PORT")
    host = host.strip("[]") or default_host
    return host, int(port_text)


class MonitoringServer:
    """Serves `/metrics` from `registry`, `/healthz` from `liveness` checks and `/readyz`
    from `readiness` checks (200 `ok`, or 503 with one reason per line)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        liveness: Sequence[Check] = (),
        readiness: Sequence[Check] = (),
    ) -> None:
        self.registry = registry
        self.liveness = list(liveness)
        self.readiness = list(readiness)
        self._runner: web.AppRunner | None = None
        self.port = 0

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._probe(self.liveness))
        app.router.add_get("/livez", self._probe(self.liveness))
        app.router.add_get("/readyz", self._probe(self.readiness))
        return app

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @staticmethod
    def _probe(checks: Sequence[Check]) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            failing = [reason for check in checks for reason in check()]
            if failing:
                return web.Response(status=503, text="\n".join(failing) + "\n")
            return web.Response(text="ok\n")

        return handler

    async def start(self, host: str = "0.0.0.0", port: int = 0) -> int:
        """Listen; returns the port (useful with port 0)."""
        self._runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server: Any = site._server
        self.port = int(server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
