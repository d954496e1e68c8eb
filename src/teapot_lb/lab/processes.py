"""The processes of a lab node: ``teapot-lb run`` and the HTTP workload, and what they leave.

Every lab (:mod:`teapot_lb.lab.network`, :mod:`teapot_lb.lab.lan`) starts a node's
speaker the way an operator runs standalone mode, and reads its ``status.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from teapot_lb.lab.manifests import SERVICE_PORT
from teapot_lb.netlab import Host


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """Stop a lab process: SIGTERM, SIGKILL when it has not exited within `timeout`."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def start_run(
    host: Host,
    name: str,
    *,
    manifests: Path,
    state_dir: Path,
    modes: Sequence[str],
    poll_interval: float | None,
    log_path: Path,
    extra: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``teapot-lb run`` for node ``name`` in its namespace, appending its log (JSON lines)
    to ``log_path``. ``poll_interval`` None: the command's default."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if poll_interval is not None:
        extra = ("--poll-interval", str(poll_interval), *extra)
    with log_path.open("ab") as log:
        return host.popen(
            [
                sys.executable, "-m", "teapot_lb.cli.run",
                "--manifests", str(manifests), "--node", name,
                "--state-dir", str(state_dir), "--modes", ",".join(modes), *extra,
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def start_workload(host: Host, name: str, port: int = SERVICE_PORT) -> subprocess.Popen[bytes]:
    """The HTTP server answering every request with ``name`` (:mod:`teapot_lb.lab.serve`)."""
    return host.popen(
        [sys.executable, "-m", "teapot_lb.lab.serve", "--name", name, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Restartable:
    """A command run as a process, SIGKILLed and started again (churn: a component that
    crashes at random points and comes back)."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.process: asyncio.subprocess.Process | None = None
        self.kills = 0

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(*self.argv)

    async def kill(self) -> None:
        """SIGKILL (no goodbye) and wait for the exit; counted in `kills`."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
            await self.process.wait()
            self.kills += 1


def tenant_agent_command(
    tenant_kubeconfig: Path, management_kubeconfig: Path, cluster: str
) -> list[str]:
    """The real ``teapot-lb tenant-agent`` of ``cluster``, warnings only, no metrics."""
    return [
        sys.executable, "-c", "from teapot_lb.cli import main; main()",
        "--log-level", "warning", "tenant-agent",
        "--kubeconfig", str(tenant_kubeconfig),
        "--management-kubeconfig", str(management_kubeconfig),
        "--cluster-name", cluster, "--metrics-addr", "",
    ]  # fmt: skip


def read_status(state_dir: Path) -> dict[str, Any]:
    """The node's ``status.json`` ({} while there is none, or while it is unreadable)."""
    try:
        doc = json.loads((state_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])
