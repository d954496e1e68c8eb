"""`teapot-lb controller`: IPs for LoadBalancer Services, the webhook, metrics and probes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path

import click

from teapot_lb import log
from teapot_lb.cli import cancel_on_signals
from teapot_lb.cli.run import service_class_options
from teapot_lb.controller import ControllerOptions
from teapot_lb.controller.kube_runner import KubeController, RunnerConfig
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.kube.client import connect
from teapot_lb.kube.leader import LeaseConfig
from teapot_lb.webhook import ReloadingCertificate, WebhookServer


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value:
        try:
            parse_address(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    return value


@click.command("controller")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kubeconfig file. Default: the pod's service account, else $KUBECONFIG or ~/.kube/config.",
)
@click.option("--context", help="Kubeconfig context (default: the current one).")
@service_class_options
@click.option(
    "--config-namespace",
    default="teapot-lb-system",
    show_default=True,
    help="Namespace of the AddressPools and advertisements ('' for every namespace).",
)
@click.option(
    "--metrics-address",
    "--metrics-addr",
    "metrics_addr",
    default=":7472",
    show_default=True,
    callback=_address,
    help="HOST:PORT for /metrics, /healthz and /readyz ('' to disable).",
)
@click.option(
    "--webhook-addr", default=":9443", show_default=True, callback=_address, help="HOST:PORT."
)
@click.option(
    "--webhook-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TLS certificate (PEM) of the admission webhook; reloaded when it changes.",
)
@click.option(
    "--webhook-key", type=click.Path(dir_okay=False, path_type=Path), help="Its private key."
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Elect one writing replica through a Lease.",
)
@click.option(
    "--lease-namespace",
    help="Namespace of the Lease (default: $POD_NAMESPACE, else the config namespace).",
)
@click.option("--lease-name", default="teapot-lb-controller", show_default=True)
@click.option("--identity", help="Name in the Lease (default: $POD_NAME, else the hostname).")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 256))
def controller(
    kubeconfig: Path | None,
    context: str | None,
    class_only: bool,
    load_balancer_class: str,
    config_namespace: str,
    metrics_addr: str | None,
    webhook_addr: str | None,
    webhook_cert: Path | None,
    webhook_key: Path | None,
    leader_elect: bool,
    lease_namespace: str | None,
    lease_name: str,
    identity: str | None,
    workers: int,
) -> None:
    """Assign IPs from AddressPools to LoadBalancer Services.

    Writes status.loadBalancer.ingress, the lb.teapot.io/allocated-from annotation,
    AddressPool statuses and Events; serves the validating webhook (with
    --webhook-cert/--webhook-key) and /metrics, /healthz, /readyz.
    """
    if (webhook_cert is None) != (webhook_key is None):
        raise click.UsageError("--webhook-cert and --webhook-key go together")
    identity = identity or os.environ.get("POD_NAME") or socket.gethostname()
    lease = None
    if leader_elect:
        namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or config_namespace
        if not namespace:
            raise click.UsageError("--lease-namespace is needed with --config-namespace ''")
        lease = LeaseConfig(namespace, lease_name, identity)
    config = RunnerConfig(
        options=ControllerOptions(load_balancer_class, class_only),
        config_namespace=config_namespace or None,
        lease=lease,
        workers=workers,
    )
    cert = (webhook_cert, webhook_key) if webhook_cert and webhook_key else None
    asyncio.run(_serve(kubeconfig, context, config, metrics_addr, webhook_addr, cert))


async def _serve(
    kubeconfig: Path | None,
    context: str | None,
    config: RunnerConfig,
    metrics_addr: str | None,
    webhook_addr: str | None,
    cert: tuple[Path, Path] | None,
) -> None:
    logger = log.get("controller")
    cancel_on_signals()
    client = await connect(kubeconfig, context=context, user_agent="teapot-lb-controller")
    metrics = ControllerMetrics()
    runner = KubeController(client, config, metrics=metrics)
    monitoring = MonitoringServer(metrics.registry, readiness=[runner.readiness])
    webhook = None
    try:
        if metrics_addr:
            await monitoring.start(*parse_address(metrics_addr))
            logger.info("serving metrics and probes", address=metrics_addr)
        if cert is not None and webhook_addr:
            webhook = WebhookServer(
                runner.config_objects,
                certificate=ReloadingCertificate(*cert),
                ready=runner.readiness,
                config_namespace=config.config_namespace,
                observe=lambda kind, allowed: metrics.webhook_requests.labels(
                    kind, str(allowed).lower()
                ).inc(),
                fail=lambda reason: metrics.webhook_errors.labels(reason).inc(),
            )
            await webhook.start(*parse_address(webhook_addr))
            logger.info("serving the admission webhook", address=webhook_addr)
        await runner.run()
    except asyncio.CancelledError:
        logger.info("shutting down")
    finally:
        if webhook is not None:
            await webhook.stop()
        await monitoring.stop()
        with contextlib.suppress(Exception):
            await client.close()


if __name__ == "__main__":
    log.configure("info", json=True, component="controller")
    controller.main(args=sys.argv[1:], prog_name="teapot-lb controller")
