"""`teapot-lb gateway`: run HAProxy (and nginx for UDP) from a gateway config.

Standalone input is a config file in the shape of `teapot_lb.gateway.config.GatewayConfig`
(YAML or JSON; see docs/gateway.md), re-read when it changes. In a Teapot cloud the control
plane builds the same config from the tenants' vetted objects and calls
`gateway.service.Gateway.apply` with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

from teapot_lb import log
from teapot_lb.cli import cancel_on_signals
from teapot_lb.gateway import explain, metrics
from teapot_lb.gateway.service import Gateway
from teapot_lb.gateway.source import load_config, watch_config
from teapot_lb.httpserve import MonitoringServer, parse_address


@click.command("gateway")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Gateway config file (YAML or JSON, the GatewayConfig shape); re-read on change.",
)
@click.option(
    "--state-dir",
    default="/run/teapot-lb/gateway",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where haproxy.cfg, certificates, sockets and nginx.conf live.",
)
@click.option("--metrics-addr", default=":7475", show_default=True, help="HOST:PORT ('' off).")
@click.option("--netns", help="Run HAProxy and nginx in this network namespace (labs).")
@click.option("--check", is_flag=True, help="Only check the config file; print problems.")
@click.option("--explain", "explain_host", metavar="HOST[/PATH]",
              help="Print who serves this hostname (and path) and exit.")  # fmt: skip
def gateway(
    config_path: Path,
    state_dir: Path,
    metrics_addr: str,
    netns: str | None,
    check: bool,
    explain_host: str | None,
) -> None:
    """Serve tenants' HTTP(S), TLS passthrough, TCP and UDP routes on HAProxy and nginx.

    Endpoint and certificate changes go over HAProxy's runtime API (no reload); a
    changed listener or route reloads it seamlessly; an invalid config is refused and
    the last good one keeps serving.
    """
    if check or explain_host:
        config, found = load_config(config_path)
        for problem in found:
            click.echo(problem, err=True)
        if config is None:
            sys.exit(1)
        if explain_host:
            host, slash, path = explain_host.partition("/")
            click.echo("\n".join(explain.explain(config, host, slash + path)))
        else:
            click.echo(f"{config_path}: ok")
        return
    if metrics_addr:
        try:
            parse_address(metrics_addr)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    wrap = ["ip", "netns", "exec", netns] if netns else []
    asyncio.run(_serve(config_path, state_dir, metrics_addr, wrap))


async def _serve(config_path: Path, state_dir: Path, metrics_addr: str, wrap: list[str]) -> None:
    logger = log.get("gateway")
    cancel_on_signals()
    node = Gateway(state_dir, wrap=wrap)
    registry = CollectorRegistry()
    metrics.register(registry, node)
    monitoring = MonitoringServer(registry, liveness=[node.liveness], readiness=[node.readiness])
    stats = asyncio.create_task(node.poll_stats())
    try:
        if metrics_addr:
            await monitoring.start(*parse_address(metrics_addr))
        async for config, found in watch_config(config_path):
            if config is None:
                logger.error("gateway config refused", problems=found)
                continue
            applied = await node.apply(config)
            logger.info(
                "gateway config applied",
                reload=applied.change.reload,
                reasons=list(applied.change.reasons),
                runtime_actions=len(applied.change.actions),
                errors=list(applied.errors),
            )
    except asyncio.CancelledError:
        logger.info("shutting down")
    finally:
        stats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stats
        await monitoring.stop()
        await node.stop()
