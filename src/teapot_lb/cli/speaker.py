"""`teapot-lb speaker --node NAME`: announce this node's share of the Service IPs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import click

from teapot_lb import log
from teapot_lb.cli.run import (
    RunConfig,
    heartbeat_key_file,
    ovn_sb_option,
    parse_modes,
    service_class_options,
    stop_on_signals,
    tenant_hop_interval_option,
)
from teapot_lb.cluster import Store
from teapot_lb.cluster.projection import speaker_projection
from teapot_lb.controller import ControllerOptions
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.kube.client import connect
from teapot_lb.longlived import freeze_after_slow_full_passes, release_large_blocks
from teapot_lb.membership.udp import DEFAULT_PORT
from teapot_lb.speaker.hop_prober import attach_hop_prober
from teapot_lb.speaker.kube_reporter import KubeReporter
from teapot_lb.speaker.kube_source import KubeSource
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.run_marker import RunMarker
from teapot_lb.speaker.wiring import MODES, build_speaker


async def run_speaker(
    config: RunConfig,
    kubeconfig: str | None,
    config_namespace: str | None,
    stop: asyncio.Event | None = None,
    *,
    tenancy: bool = False,
) -> NodeSpeaker:
    """Run until SIGTERM/SIGINT (or `stop` is set); returns the speaker after shutdown."""
    logger = log.get("speaker").bind(node=config.node)
    marker = RunMarker(config.state_dir)
    restarting = marker.begin()
    store = Store()
    speaker = build_speaker(config, store, restarting=restarting)
    if tenancy:  # route mode: probe the tenant next hops
        attach_hop_prober(speaker, config.tenant_hop_interval_s)
    stop = stop or stop_on_signals()
    async with await connect(kubeconfig) as client:
        source = KubeSource(
            client,
            store,
            speaker.notify,
            config_namespace=config_namespace,
            tenancy=tenancy,
            project=speaker_projection,
        )
        reporter = KubeReporter(client, config.node)
        speaker.reporter = reporter
        monitor: MonitoringServer | None = None
        if config.metrics_address:
            host, port = parse_address(config.metrics_address)
            monitor = MonitoringServer(
                speaker_registry(speaker),
                readiness=[source.readiness],
            )
            await monitor.start(host, port)
        tasks = [
            asyncio.create_task(source.run(), name="informers"),
            asyncio.create_task(_run_when_synced(source, speaker), name="speaker"),
        ]
        logger.info("started")
        stop_freezing = freeze_after_slow_full_passes()  # (a lasting 100k-Service heap)
        try:
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            await speaker.shutdown()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(reporter.flush(), 5)
            await reporter.close()
            if monitor is not None:
                await monitor.stop()
            marker.end()
            stop_freezing()
            logger.info("stopped")
    return speaker


async def _run_when_synced(source: KubeSource, speaker: NodeSpeaker) -> None:
    # Planning from a half-filled cache would withdraw what other kinds have not yet shown.
    for informer in source.informers.values():
        await informer.wait_synced()
    speaker.notify()
    await speaker.run()


@click.command("speaker")
@click.option("--node", required=True, envvar="NODE_NAME", help="This node's name.")
@click.option("--kubeconfig", default=None, help="Default: in-cluster, else $KUBECONFIG.")
@click.option(
    "--config-namespace",
    default="teapot-lb-system",
    show_default=True,
    help="Namespace of the lb.teapot.io objects ('' for every namespace; the shipped RBAC "
    "grants only teapot-lb-system).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    default=Path("/var/lib/teapot-lb"),
    show_default=True,
    help="keepalived files and the restart marker (a file present while the speaker runs: "
    "found at start, BGP opens with the graceful-restart R bit). Must outlive the container "
    "(the manifests mount a hostPath here).",
)
@click.option("--modes", default=",".join(MODES), show_default=True)
@click.option("--bgp-port", default=179, show_default=True)
@click.option("--l2-port", default=DEFAULT_PORT, show_default=True)
@click.option("--heartbeat-interval", default=0.02, show_default=True)
@heartbeat_key_file()
@click.option("--keepalived", default="keepalived", show_default=True)
@click.option("--metrics-address", default=":7472", show_default=True)
@click.option(
    "--tenancy/--no-tenancy",
    default=False,
    show_default=True,
    help="Teapot management cluster: also announce the TenantLoadBalancers the manager "
    "programmed (route mode: one BGP path per tenant node).",
)
@tenant_hop_interval_option
@service_class_options
@ovn_sb_option()
def speaker(
    node: str,
    kubeconfig: str | None,
    config_namespace: str | None,
    state_dir: Path,
    modes: str,
    bgp_port: int,
    l2_port: int,
    heartbeat_interval: float,
    heartbeat_key: bytes | None,
    keepalived: str,
    metrics_address: str,
    load_balancer_class: str,
    class_only: bool,
    tenancy: bool,
    ovn_sb: str | None,
    tenant_hop_interval: float,
) -> None:
    """Announce the Service IPs this node should announce (BGP, L2, VIP), from the API.

    SIGTERM withdraws BGP routes, releases L2 ownership and stops keepalived first.
    """
    config = RunConfig(
        manifests=Path("."),
        node=node,
        state_dir=state_dir,
        modes=parse_modes(modes),
        bgp_port=None if bgp_port < 0 else bgp_port,
        l2_port=l2_port,
        heartbeat_interval_s=heartbeat_interval,
        heartbeat_key=heartbeat_key,
        keepalived=keepalived,
        metrics_address=metrics_address or None,
        controller=ControllerOptions(load_balancer_class, class_only),
        ovn_sb=ovn_sb or None,
        tenant_hop_interval_s=tenant_hop_interval,
    )
    release_large_blocks()  # (a lasting 100k-Service heap beside large temporaries)
    asyncio.run(run_speaker(config, kubeconfig, config_namespace or None, tenancy=tenancy))


if __name__ == "__main__":
    log.configure("info", json=True, component="speaker")
    speaker.main(args=sys.argv[1:], prog_name="teapot-lb speaker")
