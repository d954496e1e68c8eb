"""`teapot-lb run`: standalone mode — controller and speaker of one node from manifests."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.controller import ControllerOptions
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.longlived import freeze_after_slow_full_passes, release_large_blocks
from teapot_lb.membership.key import KeyFileError, read_key_file
from teapot_lb.membership.udp import DEFAULT_PORT
from teapot_lb.model import LOAD_BALANCER_CLASS
from teapot_lb.speaker.hop_prober import HOP_INTERVAL_S, attach_hop_prober
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.run_marker import RunMarker
from teapot_lb.speaker.wiring import MODES, build_speaker
from teapot_lb.standalone.runner import ManifestSource, StatusWriter, default_state_dir


@dataclass(frozen=True)
class RunConfig:
    manifests: Path
    node: str
    state_dir: Path
    modes: tuple[str, ...] = MODES
    bgp_port: int | None = 179
    l2_port: int = DEFAULT_PORT
    heartbeat_interval_s: float = 0.02
    heartbeat_key: bytes | None = field(default=None, repr=False)  # --heartbeat-key-file
    keepalived: str = "keepalived"
    poll_s: float = 0.2
    metrics_address: str | None = None
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    ovn_sb: str | None = None  # --ovn-sb: follow OVN's gateway ports (docs/ovn.md)
    tenant_hop_interval_s: float = HOP_INTERVAL_S  # route mode's probes of tenant next hops


async def run_node(config: RunConfig, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set), then withdraw everything and return."""
    logger = log.get("standalone").bind(node=config.node)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    marker = RunMarker(config.state_dir)
    restarting = marker.begin()
    store = Store()
    # The manifest watch reloads a burst of edits once (inotify settles 2 ms, polling reads
    # the whole directory): no debounce on top, it would only delay create → announce.
    speaker = build_speaker(config, store, restarting=restarting, debounce_s=0.0)
    attach_hop_prober(speaker, config.tenant_hop_interval_s)  # idle without tenant routes
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
    stop_freezing = freeze_after_slow_full_passes()  # (a lasting 100k-Service heap)
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
        stop_freezing()
        logger.info("stopped")


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def _ovn_remote(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value and value.partition(":")[0] not in ("unix", "tcp"):
        raise click.BadParameter(f"{value!r}: write unix:PATH or tcp:HOST:PORT")
    return value or None


def ovn_sb_option() -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--ovn-sb`: the OVN Southbound to follow for gateway ports (`run` and `speaker`)."""
    return click.option(
        "--ovn-sb",
        default=None,
        envvar="OVN_SB_DB",
        callback=_ovn_remote,
        help="OVN Southbound (unix:PATH or tcp:HOST:PORT): pools an OVNAdvertisement and a "
        "BGPAdvertisement both select are announced only by the node whose chassis holds "
        "the gateway port (docs/ovn.md).",
    )


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise click.BadParameter(f"unknown mode(s) {', '.join(bad)}; use {', '.join(MODES)}")
    return modes


def heartbeat_key_option(
    ctx: click.Context, param: click.Parameter, path: Path | None
) -> bytes | None:
    """The key in `--heartbeat-key-file`, or a usage error naming the file and why."""
    if path is None:
        return None
    try:
        return read_key_file(path)
    except KeyFileError as err:
        raise click.BadParameter(str(err), ctx=ctx, param=param) from err


HEARTBEAT_KEY_HELP = (
    "File holding the L2 heartbeats' shared key (raw bytes, one trailing newline ignored, "
    "at least 16 bytes; the same on every node): heartbeats are authenticated with "
    "HMAC-SHA256 and forged ones dropped. Read at start: restart to rotate it."
)


def tenant_hop_interval_option(command: Callable[..., None]) -> Callable[..., None]:
    """`--tenant-hop-interval`, as `run` (standalone announcer) and `speaker --tenancy`
    take it (route mode's probes of tenant next hops, teapot_lb.announce.hop_health)."""
    return click.option(
        "--tenant-hop-interval",
        default=HOP_INTERVAL_S,
        show_default=True,
        help="Route mode: seconds between rounds of probes of the tenant next hops (TCP "
        "connect to the nodePort, timeout twice this); a hop failing 3 rounds in a row is "
        "withheld while another hop of its route answers (0: no probes, the tenant's "
        "readiness alone decides).",
    )(command)


def service_class_options(command: Callable[..., None]) -> Callable[..., None]:
    """`--class-only` and `--load-balancer-class`, as `controller` and `speaker` both take
    them (the speaker must serve the controller's Services)."""
    command = click.option(
        "--load-balancer-class",
        default=LOAD_BALANCER_CLASS,
        show_default=True,
        help="The spec.loadBalancerClass served.",
    )(command)
    return click.option(
        "--class-only",
        is_flag=True,
        help="Serve only Services whose spec.loadBalancerClass is ours (not unclassed ones).",
    )(command)


def heartbeat_key_file() -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--heartbeat-key-file`, as `run` and `speaker` both take it."""
    return click.option(
        "heartbeat_key",
        "--heartbeat-key-file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        callback=heartbeat_key_option,
        help=HEARTBEAT_KEY_HELP,
    )


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
@heartbeat_key_file()
@click.option("--keepalived", default="keepalived", show_default=True, help="keepalived binary.")
@click.option(
    "--poll-interval",
    default=0.2,
    show_default=True,
    help="Manifest poll period (s) where inotify is unavailable (not Linux, out of "
    "inotify instances or watches). With inotify, edits apply at once and the directory "
    "is also re-checked every 2 s.",
)
@click.option(
    "--metrics-address", default=None, help="Serve /metrics, /healthz and /readyz on HOST:PORT."
)
@click.option("--class-only", is_flag=True, help="Serve only Services naming our class.")
@ovn_sb_option()
@tenant_hop_interval_option
def run(
    manifests: Path,
    node: str,
    state_dir: Path | None,
    modes: str,
    bgp_port: int,
    l2_port: int,
    heartbeat_interval: float,
    heartbeat_key: bytes | None,
    keepalived: str,
    poll_interval: float,
    metrics_address: str | None,
    class_only: bool,
    ovn_sb: str | None,
    tenant_hop_interval: float,
) -> None:
    """Standalone mode: assign IPs and announce them for one node, from a manifest directory.

    Every node runs one `teapot-lb run` on the same manifests; they agree on every IP
    without talking (see docs/modes.md). Edits to the directory apply at once (inotify;
    without it, within the poll interval); a bad manifest is reported in status.json and
    the rest keeps running.
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
        heartbeat_key=heartbeat_key,
        keepalived=keepalived,
        poll_s=poll_interval,
        metrics_address=metrics_address,
        controller=ControllerOptions(class_only=class_only),
        ovn_sb=ovn_sb or None,
        tenant_hop_interval_s=tenant_hop_interval,
    )
    release_large_blocks()  # (a lasting 100k-Service heap beside large temporaries)
    asyncio.run(run_node(config))


if __name__ == "__main__":
    log.configure("info", json=True, component="run")
    run.main(args=sys.argv[1:], prog_name="teapot-lb run")
