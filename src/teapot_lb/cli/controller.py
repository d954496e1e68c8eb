"""`teapot-lb controller`: IPs for LoadBalancer Services, the webhook, metrics and probes."""

from __future__ import annotations

import asyncio
import sys
from functools import partial
from pathlib import Path

import click

from teapot_lb import log
from teapot_lb.cli.run import service_class_options
from teapot_lb.cli.serve import (
    METRICS_HELP,
    Served,
    config_namespace_option,
    context_option,
    kubeconfig_option,
    lease_config,
    lease_options,
    metrics_address_option,
    serve_component,
    webhook_certificate,
    webhook_options,
)
from teapot_lb.controller import ControllerOptions
from teapot_lb.controller.kube_runner import KubeController, RunnerConfig
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.kube.client import connect
from teapot_lb.webhook import ReloadingCertificate, WebhookServer


@click.command("controller")
@kubeconfig_option(
    "Kubeconfig file. Default: the pod's service account, else $KUBECONFIG or ~/.kube/config."
)
@context_option
@service_class_options
@config_namespace_option(
    "Namespace of the AddressPools and advertisements ('' for every namespace)."
)
@metrics_address_option(":7472", "--metrics-address", "--metrics-addr", help_text=METRICS_HELP)
@webhook_options(":9443")
@lease_options("teapot-lb-controller")
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
    cert = webhook_certificate(webhook_cert, webhook_key)
    config = RunnerConfig(
        options=ControllerOptions(load_balancer_class, class_only),
        config_namespace=config_namespace or None,
        lease=lease_config(leader_elect, lease_namespace, config_namespace, lease_name, identity),
        workers=workers,
    )
    setup = partial(_setup, kubeconfig, context, config, cert)
    asyncio.run(
        serve_component("controller", setup, metrics_addr=metrics_addr, webhook_addr=webhook_addr)
    )


async def _setup(
    kubeconfig: Path | None,
    context: str | None,
    config: RunnerConfig,
    cert: tuple[Path, Path] | None,
) -> Served:
    client = await connect(kubeconfig, context=context, user_agent="teapot-lb-controller")
    metrics = ControllerMetrics()
    runner = KubeController(client, config, metrics=metrics)

    def webhook() -> WebhookServer:
        assert cert is not None
        return WebhookServer(
            runner.config_objects,
            certificate=ReloadingCertificate(*cert),
            ready=runner.readiness,
            config_namespace=config.config_namespace,
            observe=lambda kind, allowed: metrics.webhook_requests.labels(
                kind, str(allowed).lower()
            ).inc(),
            fail=lambda reason: metrics.webhook_errors.labels(reason).inc(),
        )

    return Served(
        run=runner.run,
        monitoring=MonitoringServer(metrics.registry, readiness=[runner.readiness]),
        webhook=webhook if cert is not None else None,
        clients=[client],
    )


if __name__ == "__main__":
    log.configure("info", json=True, component="controller")
    controller.main(args=sys.argv[1:], prog_name="teapot-lb controller")
