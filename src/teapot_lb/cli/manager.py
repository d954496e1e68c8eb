"""`teapot-lb manager`: Teapot's management side — vets and allocates tenants' requests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from pathlib import Path

import click

from teapot_lb import log
from teapot_lb.cli import cancel_on_signals
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.kube.client import connect
from teapot_lb.kube.leader import LeaseConfig
from teapot_lb.model.common import IPAddress, parse_ip
from teapot_lb.tenancy.kube_l7gateway import GatewayControl
from teapot_lb.tenancy.kube_manager import KubeManager, ManagerConfig
from teapot_lb.tenancy.metrics import ManagerMetrics
from teapot_lb.tenancy.standalone import run_manager
from teapot_lb.webhook import ReloadingCertificate, WebhookServer


@click.command("manager")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Management cluster kubeconfig. Default: the pod's service account.",
)
@click.option("--context", help="Kubeconfig context (default: the current one).")
@click.option(
    "--config-namespace",
    default="teapot-lb-system",
    show_default=True,
    help="Namespace of the AddressPools tenants' allocations name.",
)
@click.option("--metrics-addr", default=":7473", show_default=True, help="HOST:PORT ('' off).")
@click.option("--webhook-addr", default=":9444", show_default=True, help="HOST:PORT.")
@click.option("--webhook-cert", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--webhook-key", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option("--lease-namespace", help="Default: $POD_NAMESPACE, else the config namespace.")
@click.option("--lease-name", default="teapot-lb-manager", show_default=True)
@click.option("--identity", help="Name in the Lease (default: $POD_NAME, else the hostname).")
@click.option(
    "--manifests",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Standalone: ROOT with management/, tenants/NAME/; status goes to ROOT/status/.",
)
@click.option("--once", is_flag=True, help="Standalone: one pass, then exit.")
@click.option("--workers", default=32, show_default=True, type=click.IntRange(1, 256))
@click.option(
    "--gateway-address",
    "gateway_addresses",
    multiple=True,
    help="The shared gateway's IP (repeat per family): also vet the tenants' mirrored "
    "Ingresses and Gateway API objects (webhook and reconcile) and write their status.",
)
def manager(
    kubeconfig: Path | None,
    context: str | None,
    config_namespace: str,
    metrics_addr: str,
    webhook_addr: str,
    webhook_cert: Path | None,
    webhook_key: Path | None,
    leader_elect: bool,
    lease_namespace: str | None,
    lease_name: str,
    identity: str | None,
    manifests: Path | None,
    once: bool,
    workers: int,
    gateway_addresses: tuple[str, ...] = (),
) -> None:
    """Vet, allocate and report tenants' TenantLoadBalancers (Teapot management cluster).

    Writes their status (Accepted/Programmed, addresses, next hops) and Events, Tenant
    usage, per-tenant metrics; serves the validating webhook with --webhook-cert/-key.
    """
    if manifests is not None:
        asyncio.run(run_manager(manifests, once=once))
        return
    if (webhook_cert is None) != (webhook_key is None):
        raise click.UsageError("--webhook-cert and --webhook-key go together")
    for value in (metrics_addr, webhook_addr):
        if value:
            try:
                parse_address(value)
            except ValueError as err:
                raise click.BadParameter(str(err)) from None
    lease = None
    if leader_elect:
        identity = identity or os.environ.get("POD_NAME") or socket.gethostname()
        namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or config_namespace
        lease = LeaseConfig(namespace, lease_name, identity)
    config = ManagerConfig(config_namespace=config_namespace, lease=lease, workers=workers)
    cert = (webhook_cert, webhook_key) if webhook_cert and webhook_key else None
    try:
        gateway = tuple(parse_ip(a) for a in gateway_addresses)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--gateway-address") from None
    asyncio.run(_serve(kubeconfig, context, config, metrics_addr, webhook_addr, cert, gateway))


async def _serve(
    kubeconfig: Path | None,
    context: str | None,
    config: ManagerConfig,
    metrics_addr: str,
    webhook_addr: str,
    cert: tuple[Path, Path] | None,
    gateway: tuple[IPAddress, ...] = (),
) -> None:
    logger = log.get("manager")
    cancel_on_signals()
    client = await connect(kubeconfig, context=context, user_agent="teapot-lb-manager")
    metrics = ManagerMetrics()
    runner = KubeManager(client, config, metrics=metrics)
    control = (
        GatewayControl(
            client, gateway, statuses=lambda: runner.is_leader, registry=metrics.registry
        )
        if gateway
        else None
    )
    readiness = [runner.readiness, *([control.readiness] if control else [])]
    monitoring = MonitoringServer(metrics.registry, readiness=readiness)
    webhook = None
    try:
        if metrics_addr:
            await monitoring.start(*parse_address(metrics_addr))
        if cert is not None and webhook_addr:
            webhook = WebhookServer(
                runner.objects,
                certificate=ReloadingCertificate(*cert),
                ready=runner.readiness,
                observe=lambda kind, allowed: metrics.webhook_requests.labels(
                    kind, str(allowed).lower()
                ).inc(),
                l7=control.admission if control else None,
            )
            await webhook.start(*parse_address(webhook_addr))
            logger.info("serving the admission webhook", address=webhook_addr)
        if control is None:
            await runner.run()
        else:
            async with asyncio.TaskGroup() as group:
                group.create_task(runner.run())
                group.create_task(control.run())
    except asyncio.CancelledError:
        logger.info("shutting down")
    finally:
        if webhook is not None:
            await webhook.stop()
        await monitoring.stop()
        with contextlib.suppress(Exception):
            await client.close()
