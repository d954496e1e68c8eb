"""`teapot-lb ovn`: program the OVN Northbound database for the Services of OVN pools.

One writer per cluster: the Northbound database is central, so in Kubernetes the command
runs in a Deployment and writes only while it holds a Lease (like the controller). With
``--manifests DIR`` it is standalone: the directory is the cluster (IPs assigned by the
same core as ``teapot-lb run``) and there is no election.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from teapot_lb.kube.client import KubeClient
    from teapot_lb.kube.leader import LeaseConfig
    from teapot_lb.speaker.kube_source import KubeSource

from teapot_lb import log
from teapot_lb.cli.run import service_class_options
from teapot_lb.cli.serve import (
    LEASE_NAMESPACE_HELP,
    METRICS_HELP,
    Served,
    config_namespace_option,
    kubeconfig_option,
    lease_config,
    metrics_address_option,
    serve_component,
)
from teapot_lb.cluster import Store
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.httpserve.server import Check
from teapot_lb.ovn.desired import READ_KINDS
from teapot_lb.ovn.metrics import ovn_registry, readiness
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.writer import NorthboundLoop, OVNWriter

_OWNER_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _owner(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not _OWNER_RE.match(value):
        raise click.BadParameter(
            f"{value!r}: a DNS label (lowercase letters, digits, '-'): it names our rows"
        )
    return value


async def _serve(
    writer: OVNWriter, source: Callable[[], Coroutine[None, None, None]] | None = None
) -> None:
    """Run the writer, and the `source` filling its Store if given, until cancelled."""
    logger = log.get("ovn")
    writer.loop.start()
    tasks = [asyncio.create_task(writer.run(), name="ovn-writer")]
    if source is not None:
        tasks.append(asyncio.create_task(source(), name="source"))
    logger.info("started", remote=writer.loop.connection.remote, owner=writer.owner)
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        writer.loop.stop()
        logger.info("stopped")


def _monitoring(writer: OVNWriter, *checks: Check) -> MonitoringServer:
    """/metrics, /healthz and /readyz (the writer's and `checks`) for the whole process
    (standbys included)."""
    return MonitoringServer(ovn_registry(writer), readiness=[partial(readiness, writer), *checks])


async def _standalone(
    writer: OVNWriter, source: Callable[[], Coroutine[None, None, None]]
) -> Served:
    return Served(run=partial(_serve, writer, source), monitoring=_monitoring(writer))


async def _kube(
    writer: OVNWriter,
    kubeconfig: str | None,
    config_namespace: str | None,
    lease: LeaseConfig | None,
) -> Served:
    # Here, not at the top: standalone mode need not load the Kubernetes client.
    from teapot_lb.kube.client import connect
    from teapot_lb.model.kinds import REGISTRY
    from teapot_lb.speaker.kube_source import KubeSource

    client = await connect(kubeconfig)
    source = KubeSource(
        client,
        writer.store,
        writer.notify,
        config_namespace=config_namespace,
        kinds=[REGISTRY[kind] for kind in READ_KINDS],
    )
    return Served(
        run=partial(_lead, writer, client, source, lease),
        monitoring=_monitoring(writer, source.readiness),
        clients=[client],
    )


async def _lead(
    writer: OVNWriter, client: KubeClient, source: KubeSource, lease: LeaseConfig | None
) -> None:
    """Run the informers; write while holding the Lease (always, without election)."""
    from teapot_lb.kube.leader import LeaderElector, lead_when_elected

    async def lead() -> None:
        for informer in source.informers.values():
            await informer.wait_synced()
        writer.notify()  # a half-filled cache would delete what other kinds hold up
        await _serve(writer)

    elector = LeaderElector(client, lease) if lease is not None else None
    informers = asyncio.create_task(source.run(), name="informers")
    try:
        await lead_when_elected(elector, lead)
    finally:
        informers.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await informers


@click.command("ovn")
@click.option(
    "--ovn-nb",
    required=True,
    envvar="OVN_NB_DB",
    help="The Northbound database: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT.",
)
@click.option("--ovn-nb-private-key", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ovn-nb-certificate", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--ovn-nb-ca-cert", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--cluster-name",
    default="default",
    show_default=True,
    callback=_owner,
    help="Names and tags our rows: two clusters sharing a Northbound need different names.",
)
@click.option(
    "--manifests",
    type=click.Path(path_type=Path),
    help="Standalone: read the cluster from this directory instead of Kubernetes.",
)
@kubeconfig_option("Default: in-cluster, else $KUBECONFIG.", must_exist=False)
@config_namespace_option("Namespace of the lb.teapot.io objects ('' for every namespace).")
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Write only while holding the Lease teapot-lb-ovn (Kubernetes only).",
)
@click.option("--lease-namespace", help=LEASE_NAMESPACE_HELP)
@metrics_address_option(":7472", "--metrics-address", help_text=METRICS_HELP)
@service_class_options
def ovn(
    ovn_nb: str,
    ovn_nb_private_key: Path | None,
    ovn_nb_certificate: Path | None,
    ovn_nb_ca_cert: Path | None,
    cluster_name: str,
    manifests: Path | None,
    kubeconfig: str | None,
    config_namespace: str,
    leader_elect: bool,
    lease_namespace: str | None,
    metrics_addr: str,
    load_balancer_class: str,
    class_only: bool,
) -> None:
    """Keep one OVN Load_Balancer per Service IP and protocol of the OVNAdvertisements' pools.

    Rows are tagged with the cluster name in external_ids; rows and references of others
    (ovn-kubernetes, Neutron) are never touched.
    """
    try:
        connection = Connection(ovn_nb, ovn_nb_private_key, ovn_nb_certificate, ovn_nb_ca_cert)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--ovn-nb") from err
    options = ControllerOptions(load_balancer_class, class_only)
    store = Store()
    writer = OVNWriter(store, NorthboundLoop(connection, cluster_name), cluster_name, options)
    setup: Callable[[], Awaitable[Served]]
    if manifests is not None:
        from teapot_lb.standalone.runner import ManifestSource

        source = ManifestSource(manifests, store, options=options, on_change=writer.notify)
        setup = partial(_standalone, writer, source.run)
    else:
        lease = lease_config(leader_elect, lease_namespace, config_namespace, "teapot-lb-ovn")
        setup = partial(_kube, writer, kubeconfig, config_namespace or None, lease)
    asyncio.run(serve_component("ovn", setup, metrics_addr=metrics_addr))


if __name__ == "__main__":
    log.configure("info", json=True, component="ovn")
    ovn.main(args=sys.argv[1:], prog_name="teapot-lb ovn")
