"""`teapot-lb gateway`: run HAProxy (and nginx for UDP) from a gateway config.

Three sources of that config, one data plane (`gateway.service.Gateway.apply`):
- `--config FILE`: a file in the shape of `teapot_lb.gateway.config.GatewayConfig`;
- `--manifests DIR`: Tenants and their (mirrored) Ingresses, Gateway API objects,
  EndpointSlices and TLS Secrets, vetted and translated (`gateway.control.l7standalone`);
- neither: the management cluster (kubeconfig or the pod's service account), through the
  control plane's reconcile (`gateway.control.kube_l7gateway.GatewayControl`) without writing
  status (the manager's `--gateway-address` does).
Each is re-read on change. `--address` gives the gateway's IPs (those of the LoadBalancer
Service in front of the gateway pods, which the speaker makes highly available).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
from aiohttp import web
from prometheus_client import CollectorRegistry

from teapot_lb import log
from teapot_lb.cli import cancel_on_signals
from teapot_lb.gateway import explain, metrics, report
from teapot_lb.gateway.config import Certificate, GatewayConfig
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7standalone import translate_directory
from teapot_lb.gateway.default_certificate import from_files
from teapot_lb.gateway.service import Gateway
from teapot_lb.gateway.source import load_config, watch_config
from teapot_lb.gateway.translate import LoadBalancerResult, ObjectResult
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.kube.client import connect
from teapot_lb.longlived import freeze_after_slow_full_passes, release_large_blocks
from teapot_lb.model.common import IPAddress, parse_ip
from teapot_lb.model.gateway_api_schema import unevaluable_rules
from teapot_lb.standalone.first_seen import FirstSeen
from teapot_lb.standalone.teapot import DirectoryWake


class GatewayServer(MonitoringServer):
    """`/metrics`, the probes, and `/gateway/backends`: each backend's server states and
    counters (`gateway.report`), from a stats snapshot at most a second old."""

    def __init__(self, registry: CollectorRegistry, node: Gateway, **checks: Any) -> None:
        super().__init__(registry, **checks)
        self.node = node

    def make_app(self) -> web.Application:
        app = super().make_app()
        app.router.add_get(report.PATH, self._backends)
        return app

    async def _backends(self, request: web.Request) -> web.Response:
        stats = self.node.stats
        if time.monotonic() - stats.taken_at > 1.0:
            await self.node.refresh_stats()
            stats = self.node.stats
        age = time.monotonic() - stats.taken_at if stats.taken_at else None
        doc = report.backends_report(self.node.config, stats.rows, age)
        return web.json_response(text=doc.model_dump_json(by_alias=True))


_PEM_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("gateway")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Gateway config file (YAML or JSON, the GatewayConfig shape); re-read on change.",
)
@click.option(
    "--manifests",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Standalone control plane: a directory of Tenants and their mirrored objects.",
)
@click.option(
    "--address",
    "addresses",
    multiple=True,
    help="The gateway's IP (repeat per family), with --manifests or a cluster: the "
    "LoadBalancer Service's IP in front of the gateway pods.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Management cluster kubeconfig (without --config/--manifests). Default: the pod's "
    "service account.",
)
@click.option("--context", help="Kubeconfig context (default: the current one).")
@click.option(
    "--state-dir",
    default="/run/teapot-lb/gateway",
    show_default=True,
    # Absolute: HAProxy reads a socket path without a leading / as host:port.
    type=click.Path(file_okay=False, resolve_path=True, path_type=Path),
    help="Where haproxy.cfg, certificates, sockets and nginx.conf live.",
)
@click.option("--default-certificate", "default_cert", type=_PEM_FILE,
              help="The gateway's own certificate (PEM: the chain, and the key unless "
              "--default-key), shown to TLS clients without SNI or with a name no tenant's "
              "certificate is offered for. Default: one made at start (self-signed, CN "
              "'teapot-lb gateway default'). With --manifests or a cluster (a --config file "
              "sets defaultCertificate).")  # fmt: skip
@click.option("--default-key", type=_PEM_FILE,
              help="The key of --default-certificate, in a file of its own.")  # fmt: skip
@click.option(
    "--default-certificate-secret",
    "default_secret",
    metavar="NAMESPACE/NAME",
    help="A cluster: the TLS Secret (tls.crt, tls.key) holding the gateway's own certificate, "
    "followed when it changes (instead of --default-certificate).",
)
@click.option("--metrics-addr", default=":7475", show_default=True, help="HOST:PORT ('' off).")
@click.option("--netns", help="Run HAProxy and nginx in this network namespace (labs).")
@click.option(
    "--check", is_flag=True, help="Only check --config or --manifests; print problems and exit."
)
@click.option("--explain", "explain_host", metavar="HOST[/PATH]",
              help="Print who serves this hostname (and path) and exit.")  # fmt: skip
def gateway(
    config_path: Path | None,
    manifests: Path | None,
    addresses: tuple[str, ...],
    kubeconfig: Path | None,
    context: str | None,
    state_dir: Path,
    default_cert: Path | None,
    default_key: Path | None,
    default_secret: str | None,
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
    if config_path is not None and manifests is not None:
        raise click.UsageError("--config and --manifests exclude each other")
    try:
        ips = tuple(parse_ip(a) for a in addresses)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--address") from None
    if config_path is None and not ips:
        raise click.UsageError("--address is needed with --manifests or a cluster")
    if (check or explain_host) and config_path is None and manifests is None:
        raise click.UsageError("--check and --explain read --config or --manifests")
    default, secret = _default_certificate(
        config_path, manifests, default_cert, default_key, default_secret
    )
    if check or explain_host:
        if config_path is not None:
            config, found = load_config(config_path)
            what = str(config_path)
        else:
            assert manifests is not None
            # What the gateway would serve from the directory: every object vetted and
            # translated; a refused object is a problem, named with its rule.
            translation, problems = translate_directory(manifests, list(ips))
            config, what = translation.config, str(manifests)
            found = [str(p) for p in problems] + [
                line for result in translation.results.values() for line in report_lines(result)
            ]
            found += [
                line
                for request in translation.load_balancers.values()
                for line in load_balancer_lines(request)
            ]
            for rule in unevaluable_rules():  # none today; never skipped without a word
                click.echo(f"warning: Gateway API CRD rule not evaluated: {rule}", err=True)
        for problem in found:
            click.echo(problem, err=True)
        if config is None:
            sys.exit(1)
        if explain_host:
            host, slash, path = explain_host.partition("/")
            click.echo("\n".join(explain.explain(config, host, slash + path)))
        else:
            click.echo(f"{what}: ok" if not found else f"{what}: {len(found)} problem(s)")
            if found:
                sys.exit(1)
        return
    if metrics_addr:
        try:
            parse_address(metrics_addr)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    wrap = ["ip", "netns", "exec", netns] if netns else []
    if config_path is not None:
        source: Source = _file_source(config_path)
    elif manifests is not None:
        source = _directory_source(manifests, ips, state_dir, default)
    else:
        source = _cluster_source(kubeconfig, context, ips, default, secret)
    asyncio.run(_serve(source, state_dir, metrics_addr, wrap))


def _default_certificate(
    config_path: Path | None,
    manifests: Path | None,
    cert: Path | None,
    key: Path | None,
    secret: str | None,
) -> tuple[Certificate | None, tuple[str, str] | None]:
    """The operator's default certificate from the options (checked now: a wrong one is
    a usage error, not a gateway that cannot start), or the Secret to follow."""
    if key is not None and cert is None:
        raise click.UsageError("--default-key goes with --default-certificate")
    if config_path is not None and (cert is not None or secret is not None):
        raise click.UsageError(
            "with --config, the config file sets defaultCertificate (certFile, keyFile)"
        )
    if secret is not None:
        if cert is not None:
            raise click.UsageError("--default-certificate and --default-certificate-secret "
                                   "exclude each other")  # fmt: skip
        if manifests is not None:
            raise click.UsageError("--default-certificate-secret is for a cluster; with "
                                   "--manifests use --default-certificate")  # fmt: skip
        namespace, slash, name = secret.partition("/")
        if not (namespace and slash and name):
            raise click.BadParameter(f"{secret!r} is not NAMESPACE/NAME",
                                     param_hint="--default-certificate-secret")  # fmt: skip
        return None, (namespace, name)
    if cert is None:
        return None, None
    try:
        return from_files(cert, key), None
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--default-certificate") from None


Apply = Callable[[GatewayConfig], Awaitable[None]]
Source = Callable[[Apply, list[Callable[[], list[str]]]], Awaitable[None]]


def _file_source(path: Path) -> Source:
    async def run(apply: Apply, readiness: list[Callable[[], list[str]]]) -> None:
        async for config, found in watch_config(path):
            if config is None:
                log.get("gateway").error("gateway config refused", problems=found)
                continue
            await apply(config)

    return run


def load_balancer_lines(result: LoadBalancerResult) -> list[str]:
    """What `--check` prints of a Gateway-mode TenantLoadBalancer: each port or address
    not served (field, why, reason) and each note."""
    ref = result.request.ref
    lines = [f"{ref}: not served: {r} [{r.reason}]" for r in result.refusals]
    return lines + [f"{ref}: not served as written: {note}" for note in result.notes]


def report_lines(result: ObjectResult) -> list[str]:
    """What `--check` prints of one object: each refusal, part left out, parent that did
    not take it, reference that does not resolve and note, with its field and reason."""
    ref = result.obj.ref
    lines = [f"{ref}: refused: {r}" for r in result.refusals]
    lines += [f"{ref}: not served: {r}" for r in result.dropped]
    for reason, text in result.problems()[len(result.refusals) + len(result.dropped) :]:
        # A note: what an accepted object asks for and does not get (a backend without
        # endpoints, a certificate not offered); its status says it in a cluster.
        note = reason == "Note"
        lines.append(
            f"{ref}: " + (f"not served as written: {text}" if note else f"{text} [{reason}]")
        )
    return lines


def _directory_source(
    root: Path,
    ips: tuple[IPAddress, ...],
    state_dir: Path,
    default: Certificate | None = None,
) -> Source:
    """Translate the directory now and whenever it changes (inotify, as the standalone
    manager watches its directories; polled where inotify is unavailable). Objects without
    a creationTimestamp are given the time first seen, kept in the state directory;
    `default`: the operator's certificate for the shared HTTPS listeners."""

    async def run(apply: Apply, readiness: list[Callable[[], list[str]]]) -> None:
        logger = log.get("gateway.manifests")
        wake = DirectoryWake([root])
        first_seen = FirstSeen(state_dir)
        last: GatewayConfig | None = None
        said: dict[str, list[str]] = {}
        try:
            while True:
                # A wake is a hint: the translation is compared with the last one.
                translation, problems = await asyncio.to_thread(
                    translate_directory, root, ips, first_seen
                )
                refused = {
                    str(ref): lines
                    for ref, result in translation.results.items()
                    if (lines := report_lines(result))
                } | {
                    str(ref): lines
                    for ref, request in translation.load_balancers.items()
                    if (lines := load_balancer_lines(request))
                }
                if translation.config != last or refused != said:
                    # A refusal is news even when it leaves the served config as it was
                    # (a tenant trying another's hostname changes nothing served).
                    for problem in problems:
                        logger.warning("problem", problem=str(problem))
                    for ref, why in refused.items():
                        if said.get(ref) != why:
                            logger.warning("refused", object=ref, problems=why)
                    said = refused
                if translation.config != last:
                    last = translation.config
                    await apply(last.model_copy(update={"default_certificate": default}))
                await wake.next(2.0)
        finally:
            wake.close()

    return run


def _cluster_source(
    kubeconfig: Path | None,
    context: str | None,
    ips: tuple[IPAddress, ...],
    default: Certificate | None = None,
    secret: tuple[str, str] | None = None,
) -> Source:
    async def run(apply: Apply, readiness: list[Callable[[], list[str]]]) -> None:
        client = await connect(kubeconfig, context=context, user_agent="teapot-lb-gateway")
        try:
            # Status and Events are the manager's (`--gateway-address`): every gateway
            # replica only serves.
            async def serve(config: GatewayConfig) -> None:
                # the Secret's certificate is the control's; the files' are the process's
                await apply(
                    config if secret else config.model_copy(update={"default_certificate": default})
                )

            control = GatewayControl(
                client, ips, on_config=serve, statuses=lambda: False, default_certificate=secret
            )
            readiness.append(control.readiness)
            await control.run()
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    return run


async def _serve(source: Source, state_dir: Path, metrics_addr: str, wrap: list[str]) -> None:
    logger = log.get("gateway")
    for rule in unevaluable_rules():
        logger.warning("gateway api rule not evaluated", rule=rule)
    cancel_on_signals()
    # The translation kept per tenant is a large, lasting heap: full collections kept
    # short (teapot_lb.longlived): a slow one stalls the reconcile of a change.
    stop_freezing = freeze_after_slow_full_passes()
    release_large_blocks()
    node = Gateway(state_dir, wrap=wrap)
    registry = CollectorRegistry()
    metrics.register(registry, node)
    readiness: list[Callable[[], list[str]]] = [node.readiness]
    monitoring = GatewayServer(
        registry,
        node,
        liveness=[node.liveness],
        readiness=[lambda: [r for check in readiness for r in check()]],
    )
    stats = asyncio.create_task(node.poll_stats())

    async def apply(config: GatewayConfig) -> None:
        applied = await node.apply(config)
        logger.info(
            "gateway config applied",
            reload=applied.change.reload,
            reasons=list(applied.change.reasons),
            runtime_actions=len(applied.change.actions),
            errors=list(applied.errors),
        )

    try:
        if metrics_addr:
            await monitoring.start(*parse_address(metrics_addr))
        await source(apply, readiness)
    except asyncio.CancelledError:
        logger.info("shutting down")
    finally:
        stats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stats
        await monitoring.stop()
        await node.stop()
        stop_freezing()
