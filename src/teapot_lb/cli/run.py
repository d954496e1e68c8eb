"""`teapot-lb run`: standalone mode — controller and speaker of one node from manifests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from teapot_lb import log
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.cluster import Store
from teapot_lb.controller import ControllerOptions
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.membership.core import Timing
from teapot_lb.membership.udp import DEFAULT_PORT
from teapot_lb.speaker.bgp_backend import BGPBackend, real_speaker
from teapot_lb.speaker.l2_backend import L2Backend
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.standalone.runner import ManifestSource, StatusWriter, default_state_dir

MODES = ("bgp", "l2", "vip")


@dataclass(frozen=True)
class RunConfig:
    manifests: Path
    node: str
    state_dir: Path
    modes: tuple[str, ...] = MODES
    bgp_port: int | None = 179
    l2_port: int = DEFAULT_PORT
    heartbeat_interval_s: float = 0.02
    keepalived: str = "keepalived"
    poll_s: float = 0.2
    metrics_address: str | None = None
    controller: ControllerOptions = field(default_factory=ControllerOptions)


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class RunMarker:
    """A file that exists while teapot-lb runs: found at start, the previous run of this
    node did not stop gracefully (crash, SIGKILL, OOM kill) and this start is a restart.

    Then BGP sessions open with the graceful-restart R and F bits (RFC 4724 §3): a router
    that kept our routes as stale keeps forwarding to them until our End-of-RIB.

    The marker records the kernel's boot id. A marker from another boot means the node
    rebooted since: the data plane restarted with it, so claiming preserved forwarding
    state (the F bit) would be false, and the start is a fresh one. That keeps the answer
    right when the state directory outlives reboots (a hostPath, /var/lib). A marker
    without a boot id (older versions, or no readable ``boot_id_path``) counts as a restart.
    """

    NAME = "running"

    def __init__(self, state_dir: Path, *, boot_id_path: Path = BOOT_ID) -> None:
        self.path = state_dir / self.NAME
        self.boot_id_path = boot_id_path

    def begin(self) -> bool:
        """Write the marker; True if the previous run left one in this boot (it did not stop
        cleanly and the node did not reboot since)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        boot_id = self._boot_id()
        left = self._read()
        self.path.write_text(json.dumps({"pid": os.getpid(), "boot_id": boot_id}) + "\n")
        if left is None:
            return False
        previous = left.get("boot_id")
        if boot_id and isinstance(previous, str) and previous and previous != boot_id:
            log.get("run-marker").info(
                "the run marker is from an earlier boot: the node rebooted, so this is a "
                "fresh start, not a graceful restart (no forwarding state survives a reboot)",
                previous_boot_id=previous,
                boot_id=boot_id,
            )
            return False
        log.get("run-marker").warning(
            "the previous run did not stop gracefully; restarting (BGP graceful restart)",
            state_dir=str(self.path.parent),
        )
        return True

    def end(self) -> None:
        """A graceful stop: the next start is a fresh start."""
        self.path.unlink(missing_ok=True)

    def _read(self) -> dict[str, Any] | None:
        """The marker a previous run left: None if none; {} if it holds no JSON object (the
        pid-only format of older versions, or a truncated write)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _boot_id(self) -> str | None:
        try:
            return self.boot_id_path.read_text().strip() or None
        except OSError:
            return None


def build_speaker(config: RunConfig, store: Store, *, restarting: bool = False) -> NodeSpeaker:
    """The node speaker with the backends of the enabled modes (shared with `speaker`).

    ``restarting``: the previous run did not stop gracefully (see :class:`RunMarker`)."""
    options = PlanOptions(
        load_balancer_class=config.controller.load_balancer_class,
        handle_unclassed=not config.controller.class_only,
    )
    speaker = NodeSpeaker(config.node, store, options=options)
    if "bgp" in config.modes:
        speaker.bgp = BGPBackend(
            real_speaker(config.bgp_port, speaker.on_bgp_event, restarting=restarting)
        )
    if "l2" in config.modes:
        speaker.l2 = L2Backend(
            config.node,
            on_change=speaker.notify,
            timing=Timing(interval=config.heartbeat_interval_s),
            port=config.l2_port,
        )
    if "vip" in config.modes:
        speaker.vip = VIPBackend(
            config.node,
            config.state_dir / "keepalived",
            binary=config.keepalived,
            on_change=speaker.notify,
        )
    return speaker


async def run_node(config: RunConfig, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set), then withdraw everything and return."""
    logger: Any = log.get("standalone").bind(node=config.node)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    marker = RunMarker(config.state_dir)
    restarting = marker.begin()
    store = Store()
    speaker = build_speaker(config, store, restarting=restarting)
    source = ManifestSource(
        config.manifests,
        store,
        state_dir=config.state_dir,
        options=config.controller,
        poll_s=config.poll_s,
        on_change=speaker.notify,
    )
    writer = StatusWriter(config.node, config.state_dir, source)
    writer.speaker = speaker
    speaker.reporter = writer
    stop = stop or stop_on_signals()
    monitor: MonitoringServer | None = None
    if config.metrics_address:
        host, port = parse_address(config.metrics_address)
        monitor = MonitoringServer(
            speaker_registry(speaker),
            liveness=[lambda: [f"last step failed: {speaker.stats.last_error}"]
                      if speaker.stats.step_errors and speaker.last is None else []],
            readiness=[lambda: [] if speaker.last is not None else ["no plan applied yet"]],
        )  # fmt: skip
        await monitor.start(host, port)
    source.reload_if_changed()
    logger.info("started", manifests=str(config.manifests), state_dir=str(config.state_dir))
    tasks = [
        asyncio.create_task(source.run(), name="manifests"),
        asyncio.create_task(speaker.run(), name="speaker"),
    ]
    speaker.notify()
    try:
        await stop.wait()
    finally:
        logger.info("stopping")
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await speaker.shutdown()
        writer.stopped = True
        writer.write(speaker.last)
        if monitor is not None:
            await monitor.stop()
        marker.end()
        logger.info("stopped")


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise click.BadParameter(f"unknown mode(s) {', '.join(bad)}; use {', '.join(MODES)}")
    return modes


@click.command("run")
@click.option(
    "--manifests",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="Directory (or file) of YAML manifests: pools, peers, advertisements, Nodes, Services.",
)
@click.option("--node", required=True, help="This node's name (a Node in the manifests).")
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where status.json, events.log, keepalived files and the restart marker go "
    "[default: MANIFESTS/.state/NODE].",
)
@click.option("--modes", default=",".join(MODES), show_default=True, help="Backends to run.")
@click.option(
    "--bgp-port",
    default=179,
    show_default=True,
    help="Port our BGP speaker listens on (0: ephemeral, -1: do not listen).",
)
@click.option("--l2-port", default=DEFAULT_PORT, show_default=True, help="Heartbeat UDP port.")
@click.option(
    "--heartbeat-interval", default=0.02, show_default=True, help="L2 heartbeat interval (s)."
)
@click.option("--keepalived", default="keepalived", show_default=True, help="keepalived binary.")
@click.option("--poll-interval", default=0.2, show_default=True, help="Manifest poll period (s).")
@click.option(
    "--metrics-address", default=None, help="Serve /metrics, /healthz and /readyz on HOST:PORT."
)
@click.option("--class-only", is_flag=True, help="Serve only Services naming our class.")
def run(
    manifests: Path,
    node: str,
    state_dir: Path | None,
    modes: str,
    bgp_port: int,
    l2_port: int,
    heartbeat_interval: float,
    keepalived: str,
    poll_interval: float,
    metrics_address: str | None,
    class_only: bool,
) -> None:
    """Standalone mode: assign IPs and announce them for one node, from a manifest directory.

    Every node runs one `teapot-lb run` on the same manifests; they agree on every IP
    without talking (see docs/modes.md). Edits to the directory apply within the poll
    interval; a bad manifest is reported in status.json and the rest keeps running.
    SIGTERM withdraws BGP routes, releases L2 ownership and stops keepalived first.
    """
    config = RunConfig(
        manifests=manifests,
        node=node,
        state_dir=state_dir or default_state_dir(manifests, node),
        modes=parse_modes(modes),
        bgp_port=None if bgp_port < 0 else bgp_port,
        l2_port=l2_port,
        heartbeat_interval_s=heartbeat_interval,
        keepalived=keepalived,
        poll_s=poll_interval,
        metrics_address=metrics_address,
        controller=ControllerOptions(class_only=class_only),
    )
    asyncio.run(run_node(config))


if __name__ == "__main__":
    log.configure("info", json=True, component="run")
    run.main(args=sys.argv[1:], prog_name="teapot-lb run")
