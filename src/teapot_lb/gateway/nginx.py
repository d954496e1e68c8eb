"""UDP listeners through nginx's stream module (HAProxy OSS has no UDP).

`render` is pure: the UDP listeners and routes of a GatewayConfig → nginx.conf, one
upstream per route holding the ready endpoints of its backends (weight = the backendRef's
weight), one `server { listen IP:PORT udp; }` per listener. `Nginx` runs it like the
HAProxy driver: check (`nginx -t`) before installing, SIGHUP to reload (nginx starts new
workers and lets the old ones finish), restart on death. nginx has no runtime API for
upstream members in its free version, so an endpoint change is a reload; UDP has no
connections to break, and the old workers answer their last datagrams. Listeners use
`reuseport`: the check (`nginx -t` binds) and a reload's new workers share the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from teapot_lb.gateway.config import GatewayConfig, Protocol
from teapot_lb.gateway.process import Daemon, DaemonFailed, check_config, write_atomic
from teapot_lb.gateway.render import host_port

STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
_NO_SERVER = "127.0.0.1:1 down"  # an upstream must have a server; this one takes nothing


@dataclass(frozen=True)
class NginxPaths:
    base: PurePath

    @property
    def config(self) -> PurePath:
        return self.base / "nginx.conf"

    @property
    def pid_file(self) -> PurePath:
        return self.base / "nginx.pid"

    @property
    def error_log(self) -> PurePath:
        return self.base / "error.log"


def has_udp(config: GatewayConfig) -> bool:
    return any(x.protocol == Protocol.UDP for x in config.listeners)


def render(
    config: GatewayConfig, paths: NginxPaths, stream_module: str | None = STREAM_MODULE
) -> str:
    """nginx.conf for the UDP listeners of `config` (stream_module None: built in)."""
    lines = [f"load_module {stream_module};"] if stream_module else []
    lines += [
        "daemon off;",
        "worker_processes 1;",
        f"pid {paths.pid_file};",
        f"error_log {paths.error_log} warn;",
        "events { worker_connections 4096; }",
        "stream {",
    ]
    for i, route in enumerate(config.udp_routes):
        servers = []
        for ref in route.backends:
            backend = config.backend(ref.backend)
            if backend is None or ref.weight == 0:
                continue
            servers += [
                f"server {host_port(e.address, e.port)} weight={ref.weight};"
                for e in backend.endpoints
                if e.ready
            ]
        lines.append(f"    upstream udp_{i} {{")
        lines += [f"        {s}" for s in servers or [f"server {_NO_SERVER};"]]
        lines.append("    }")
        for name in route.listeners:
            listener = config.listener(name)
            if listener is None or listener.protocol != Protocol.UDP:
                continue
            lines += [
                "    server {",
                f"        listen {host_port(listener.address, listener.port)} udp reuseport;",
                f"        proxy_pass udp_{i};",
                "        proxy_responses 1;",
                "        proxy_timeout 10s;",
                "    }",
            ]
    lines.append("}")
    return "\n".join(lines) + "\n"


class Nginx:
    """One nginx for the gateway's UDP listeners. `apply(config)` is level-triggered."""

    def __init__(self, state_dir: Path, *, binary: str = "nginx", wrap: Sequence[str] = ()) -> None:
        self.paths = NginxPaths(Path(state_dir))
        self._staging = NginxPaths(Path(state_dir) / "staging")
        self.binary = (
            shutil.which(binary, path="/usr/sbin:/sbin:" + os.environ.get("PATH", "")) or binary
        )
        self.stream_module = STREAM_MODULE if Path(STREAM_MODULE).exists() else None
        self.wrap = list(wrap)  # the check binds the sockets: same namespace
        self.reloads = 0
        self.running: str | None = None
        self._lock = asyncio.Lock()
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        self.daemon = Daemon(
            "nginx",
            [*wrap, self.binary, "-e", str(self.paths.error_log), "-c", str(self.paths.config)],
            Path(state_dir) / "nginx.out",
            ready=self._pid_written,
            before_start=self._remove_pid,
            lock=self._lock,
        )

    async def apply(self, config: GatewayConfig) -> str | None:
        """Serve the UDP part of `config`; returns nginx's complaint if it refused it."""
        async with self._lock:
            if not has_udp(config):
                if self.daemon.pid is not None:
                    await self.daemon.stop()
                    self.running = None
                return None
            text = render(config, self.paths, self.stream_module)
            if text == self.running and self.daemon.pid is not None:
                return None
            staged = render(config, self._staging, self.stream_module)
            write_atomic(Path(self._staging.config), staged)
            error = await check_config(
                [*self.wrap, self.binary, "-t", "-q", "-e", str(self._staging.error_log),
                 "-c", str(self._staging.config)],
                str(self._staging.base),
                str(self.paths.base),
            )  # fmt: skip
            if error is not None:
                return f"nginx refused the configuration: {error}"
            write_atomic(Path(self.paths.config), text)
            pid = self.daemon.pid
            if pid is None:
                try:
                    await self.daemon.start()
                except (DaemonFailed, TimeoutError, OSError) as exc:
                    return f"nginx did not start: {exc}"
            else:
                # Died since we looked: the supervisor restarts it from the file just written.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGHUP)
                    self.reloads += 1
            self.running = text
            return None

    async def stop(self) -> None:
        await self.daemon.stop()

    async def _pid_written(self) -> bool:
        return await asyncio.to_thread(os.path.exists, self.paths.pid_file)

    def _remove_pid(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            Path(self.paths.pid_file).unlink()
