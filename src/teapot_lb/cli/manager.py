"""`teapot-lb manager`: Teapot's management side — vets and allocates tenants' requests."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import click
import yaml

from teapot_lb import log
from teapot_lb.cli.serve import (
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
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.kube.client import connect
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.model.common import IPAddress, parse_ip
from teapot_lb.model.gateway_api_schema import unevaluable_rules
from teapot_lb.providers import table
from teapot_lb.providers.base import Provider
from teapot_lb.standalone.teapot import run_manager
from teapot_lb.webhook import ReloadingCertificate, WebhookServer


@click.command("manager")
@kubeconfig_option("Management cluster kubeconfig. Default: the pod's service account.")
@context_option
@config_namespace_option("Namespace of the AddressPools tenants' allocations name.")
@metrics_address_option(":7473")
@webhook_options(":9444")
@lease_options("teapot-lb-manager")
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
@click.option(
    "--gateway-service",
    metavar="NAMESPACE/NAME",
    help="With --gateway-address: the shared gateway's LoadBalancer Service, copied with "
    "each tenant's dedicated gateway address, and each address a Gateway-mode request "
    "(provider proxy) is served on, pinned so the speakers announce it too.",
)
@click.option(
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME=CONFIG_FILE",
    help="Run the external provider NAME (e.g. octavia) with its configuration (a YAML "
    "file); repeat per provider. Tenants list it in spec.providers (docs/teapot.md, "
    "Providers); route and proxy always run.",
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
    gateway_service: str | None = None,
    providers: tuple[str, ...] = (),
) -> None:
    """Vet, allocate and report tenants' TenantLoadBalancers (Teapot management cluster).

    Writes their status (Accepted/Programmed, addresses, next hops) and Events, Tenant
    usage, per-tenant metrics; serves the validating webhook with --webhook-cert/-key.
    """
    if manifests is not None:
        asyncio.run(run_manager(manifests, once=once))
        return
    cert = webhook_certificate(webhook_cert, webhook_key)
    lease = lease_config(leader_elect, lease_namespace, config_namespace, lease_name, identity)
    config = ManagerConfig(
        config_namespace=config_namespace,
        lease=lease,
        workers=workers,
        gateway_services=gateway_service is not None,
        providers=external_providers(providers),
    )
    try:
        gateway = tuple(parse_ip(a) for a in gateway_addresses)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--gateway-address") from None
    if gateway_service is not None and not all(gateway_service.partition("/")[::2]):
        raise click.BadParameter(
            f"{gateway_service!r} is not NAMESPACE/NAME", param_hint="--gateway-service"
        )
    setup = partial(_setup, kubeconfig, context, config, cert, gateway, gateway_service)
    asyncio.run(
        serve_component("manager", setup, metrics_addr=metrics_addr, webhook_addr=webhook_addr)
    )


def external_providers(options: tuple[str, ...]) -> dict[str, Provider]:
    """`--provider NAME=CONFIG_FILE` options as providers built from their files."""
    out: dict[str, Provider] = {}
    for option in options:
        name, _, path = option.partition("=")
        if not name or not path:
            raise click.BadParameter(f"{option!r} is not NAME=CONFIG_FILE", param_hint="--provider")
        if name in out or name in table.BUILTIN:
            why = "given twice" if name in out else "built in, always run"
            raise click.BadParameter(f"provider {name!r}: {why}", param_hint="--provider")
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise click.BadParameter(f"{name}: {path}: {err}", param_hint="--provider") from None
        if not isinstance(config, dict):
            raise click.BadParameter(
                f"{name}: {path} is not a mapping of options", param_hint="--provider"
            )
        try:
            out[name] = table.load(name, config)
        except ValueError as err:
            raise click.BadParameter(f"{name}: {path}: {err}", param_hint="--provider") from None
    return out


async def _setup(
    kubeconfig: Path | None,
    context: str | None,
    config: ManagerConfig,
    cert: tuple[Path, Path] | None,
    gateway: tuple[IPAddress, ...] = (),
    gateway_service: str | None = None,
) -> Served:
    client = await connect(kubeconfig, context=context, user_agent="teapot-lb-manager")
    metrics = ManagerMetrics()
    runner = KubeManager(client, config, metrics=metrics)
    control = (
        GatewayControl(
            client,
            gateway,
            statuses=lambda: runner.is_leader,
            on_translation=runner.gateway_translated,
            registry=metrics.registry,
            config_namespace=config.config_namespace,
            address_service=gateway_service,
        )
        if gateway
        else None
    )
    readiness = [runner.readiness, *([control.readiness] if control else [])]

    def webhook() -> WebhookServer:
        assert cert is not None
        for rule in unevaluable_rules() if control else []:
            log.get("manager").warning("gateway api rule not evaluated", rule=rule)
        return WebhookServer(
            runner.objects,
            certificate=ReloadingCertificate(*cert),
            ready=runner.readiness,
            observe=lambda kind, allowed: metrics.webhook_requests.labels(
                kind, str(allowed).lower()
            ).inc(),
            l7=control.admission if control else None,
        )

    async def run() -> None:
        if control is None:
            await runner.run()
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(runner.run())
            group.create_task(control.run())

    return Served(
        run=run,
        monitoring=MonitoringServer(metrics.registry, readiness=readiness),
        webhook=webhook if cert is not None else None,
        clients=[client],
    )
