"""What the long-running commands share: their options (cluster, metrics, webhook, Lease)
and one serve frame (`serve_component`): set up, serve /metrics and the probes (and the
admission webhook, given a certificate), run until SIGTERM/SIGINT, then stop in order."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from teapot_lb import log
from teapot_lb.cli import cancel_on_signals
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.longlived import freeze_after_slow_full_passes, release_large_blocks

if TYPE_CHECKING:  # standalone modes need not load the Kubernetes client
    from teapot_lb.kube.client import KubeClient
    from teapot_lb.kube.leader import LeaseConfig
    from teapot_lb.webhook import WebhookServer

Decorator = Callable[[Callable[..., None]], Callable[..., None]]


@dataclass
class Served:
    """A component ready to serve: its work, its monitoring server, how to make its
    webhook (None: it has none), what to stop after the work (before the servers), and
    the API clients to close last."""

    run: Callable[[], Awaitable[None]]
    monitoring: MonitoringServer
    webhook: Callable[[], WebhookServer] | None = None
    stop: Sequence[Callable[[], Awaitable[None]]] = ()
    clients: Sequence[KubeClient] = ()


async def serve_component(
    name: str,
    setup: Callable[[], Awaitable[Served]],
    *,
    metrics_addr: str | None,
    webhook_addr: str | None = None,
) -> None:
    """Run a component until cancelled (SIGTERM/SIGINT): `setup` (connect, build), then
    /metrics and probes on `metrics_addr` and the webhook on `webhook_addr` (each when
    given), then its work; at the end stop it, the webhook, the monitoring server, and
    close its clients (their errors ignored: the process is going). Full garbage
    collections are kept short (`teapot_lb.longlived`): a long one stalls the event loop,
    and with it the Lease renewals."""
    logger = log.get(name)
    cancel_on_signals()
    stop_freezing = freeze_after_slow_full_passes()
    release_large_blocks()
    served = await setup()
    webhook = None
    try:
        if metrics_addr:
            await served.monitoring.start(*parse_address(metrics_addr))
            logger.info("serving metrics and probes", address=metrics_addr)
        if served.webhook is not None and webhook_addr:
            webhook = served.webhook()
            await webhook.start(*parse_address(webhook_addr))
            logger.info("serving the admission webhook", address=webhook_addr)
        await served.run()
    except asyncio.CancelledError:
        logger.info("shutting down")
    finally:
        for stop in served.stop:
            await stop()
        if webhook is not None:
            await webhook.stop()
        await served.monitoring.stop()
        for client in served.clients:
            with contextlib.suppress(Exception):
                await client.close()
        stop_freezing()


# -- options ----------------------------------------------------------------------------


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value:
        try:
            parse_address(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    return value


def kubeconfig_option(help_text: str, *, must_exist: bool = True) -> Decorator:
    """`--kubeconfig`: which cluster it is, and its default, are the command's to say."""
    if must_exist:
        path = click.Path(exists=True, dir_okay=False, path_type=Path)
        return click.option("--kubeconfig", type=path, help=help_text)
    return click.option("--kubeconfig", help=help_text)


def context_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option("--context", help="Kubeconfig context (default: the current one).")(command)


def config_namespace_option(help_text: str) -> Decorator:
    return click.option(
        "--config-namespace", default="teapot-lb-system", show_default=True, help=help_text
    )


def metrics_address_option(
    default: str, *names: str, help_text: str = "HOST:PORT ('' off)."
) -> Decorator:
    """The monitoring server's address (parameter `metrics_addr`), checked as given."""
    return click.option(
        *(names or ("--metrics-addr",)),
        "metrics_addr",
        default=default,
        show_default=True,
        callback=_address,
        help=help_text,
    )


METRICS_HELP = "HOST:PORT for /metrics, /healthz and /readyz ('' to disable)."
LEASE_NAMESPACE_HELP = (
    "Namespace of the Lease (default: $POD_NAMESPACE, else the config namespace)."
)


def _stacked(*options: Decorator) -> Decorator:
    """The options in the order given, as if stacked in that order above the command."""

    def add(command: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(options):
            command = option(command)
        return command

    return add


def webhook_options(default_addr: str) -> Decorator:
    """`--webhook-addr`, `--webhook-cert`, `--webhook-key` (the webhook serves only with
    both of the last two: `webhook_certificate`)."""
    return _stacked(
        click.option(
            "--webhook-addr",
            default=default_addr,
            show_default=True,
            callback=_address,
            help="HOST:PORT.",
        ),
        click.option(
            "--webhook-cert",
            type=click.Path(dir_okay=False, path_type=Path),
            help="TLS certificate (PEM) of the admission webhook; reloaded when it changes.",
        ),
        click.option(
            "--webhook-key",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Its private key.",
        ),
    )


def webhook_certificate(cert: Path | None, key: Path | None) -> tuple[Path, Path] | None:
    """The webhook's certificate and key, both or neither."""
    if (cert is None) != (key is None):
        raise click.UsageError("--webhook-cert and --webhook-key go together")
    return (cert, key) if cert and key else None


def lease_options(lease_name: str) -> Decorator:
    """`--leader-elect`, `--lease-namespace`, `--lease-name`, `--identity`."""
    return _stacked(
        click.option(
            "--leader-elect/--no-leader-elect",
            default=True,
            show_default=True,
            help="Elect one writing replica through a Lease.",
        ),
        click.option("--lease-namespace", help=LEASE_NAMESPACE_HELP),
        click.option("--lease-name", default=lease_name, show_default=True),
        click.option(
            "--identity", help="Name in the Lease (default: $POD_NAME, else the hostname)."
        ),
    )


def lease_config(
    leader_elect: bool,
    lease_namespace: str | None,
    config_namespace: str,
    lease_name: str,
    identity: str | None = None,
) -> LeaseConfig | None:
    """The Lease to hold (None: no election). Namespace: the option, else $POD_NAMESPACE,
    else the configuration namespace; identity: the option, else $POD_NAME, else the
    hostname."""
    from teapot_lb.kube.leader import LeaseConfig

    if not leader_elect:
        return None
    namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or config_namespace
    if not namespace:
        raise click.UsageError("--lease-namespace is needed with --config-namespace ''")
    identity = identity or os.environ.get("POD_NAME") or socket.gethostname()
    return LeaseConfig(namespace, lease_name, identity)
