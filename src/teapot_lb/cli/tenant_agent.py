"""`teapot-lb tenant-agent`: cloud-provider-teapot, in each tenant cluster."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

from teapot_lb import log
from teapot_lb.cli.serve import Served, kubeconfig_option, metrics_address_option, serve_component
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.kube.client import connect
from teapot_lb.standalone.teapot import run_agent
from teapot_lb.tenancy.request import TEAPOT_CLOUD_CLASS
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent


@click.command("tenant-agent")
@kubeconfig_option("Tenant cluster kubeconfig. Default: the pod's service account.")
@click.option(
    "--management-kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kubeconfig for the management cluster (RBAC: the tenant's namespace only).",
)
@click.option(
    "--management-namespace",
    help="The tenant's namespace there (default: the management kubeconfig's namespace).",
)
@click.option("--cluster-name", required=True, help="This cluster's name, unique per tenant.")
@click.option("--load-balancer-class", default=TEAPOT_CLOUD_CLASS, show_default=True)
@click.option(
    "--unclassed/--class-only",
    default=False,
    show_default=True,
    help="Also serve LoadBalancer Services without a loadBalancerClass.",
)
@click.option(
    "--gateway/--no-gateway",
    default=False,
    show_default=True,
    help="Also be the Teapot ingress controller: mirror Ingresses of class teapot (and "
    "Gateway API routes) for the shared gateway.",
)
@click.option(
    "--gateway-api/--no-gateway-api",
    default=True,
    show_default=True,
    help="With --gateway: Gateway API objects too (their CRDs must be installed).",
)
@click.option(
    "--manifests",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Standalone: this cluster's manifest directory (Services, Nodes, EndpointSlices).",
)
@click.option(
    "--teapot-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Standalone: the manager's ROOT (requests go to ROOT/tenants/TENANT/).",
)
@click.option("--tenant", help="Standalone: the tenant's name (its directory under ROOT).")
@click.option("--once", is_flag=True, help="Standalone: one pass, then exit.")
@metrics_address_option(":7474")
def tenant_agent(
    kubeconfig: Path | None,
    management_kubeconfig: Path | None,
    management_namespace: str | None,
    cluster_name: str,
    load_balancer_class: str,
    unclassed: bool,
    gateway: bool,
    gateway_api: bool,
    manifests: Path | None,
    teapot_root: Path | None,
    tenant: str | None,
    once: bool,
    metrics_addr: str,
) -> None:
    """Fulfil this cluster's LoadBalancer Services through the Teapot management cluster.

    Writes a TenantLoadBalancer per Service there, copies the assigned IPs into the
    Service's status.loadBalancer, records refusals as Events on the Service.
    """
    if manifests is not None:
        if teapot_root is None or not tenant:
            raise click.UsageError("--manifests needs --teapot-root and --tenant")
        asyncio.run(
            run_agent(
                manifests,
                teapot_root,
                tenant,
                cluster_name,
                once=once,
                load_balancer_class=load_balancer_class,
                unclassed=unclassed,
            )
        )
        return
    if management_kubeconfig is None:
        raise click.UsageError("--management-kubeconfig is needed (or --manifests)")
    setup = partial(
        _setup,
        kubeconfig,
        management_kubeconfig,
        management_namespace,
        cluster_name,
        load_balancer_class,
        unclassed,
        gateway,
        gateway_api,
    )
    asyncio.run(serve_component("tenant-agent", setup, metrics_addr=metrics_addr))


async def _setup(
    kubeconfig: Path | None,
    management_kubeconfig: Path,
    management_namespace: str | None,
    cluster: str,
    load_balancer_class: str,
    unclassed: bool,
    gateway: bool = False,
    gateway_api: bool = True,
) -> Served:
    tenant = await connect(kubeconfig, user_agent="teapot-lb-tenant-agent")
    management = await connect(management_kubeconfig, user_agent="teapot-lb-tenant-agent")
    config = AgentConfig(
        cluster=cluster,
        namespace=management_namespace or management.namespace,
        load_balancer_class=load_balancer_class,
        unclassed=unclassed,
        gateway=gateway,
        gateway_api=gateway_api,
    )
    agent = TenantAgent(tenant, management, config)

    async def run() -> None:
        log.get("tenant-agent").info("serving", cluster=cluster, namespace=config.namespace)
        await agent.run()

    return Served(
        run=run,
        monitoring=MonitoringServer(CollectorRegistry(), readiness=[agent.readiness]),
        clients=[tenant, management],
    )
