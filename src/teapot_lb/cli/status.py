"""`teapot-lb status`: pools, BGP sessions, who holds each Service IP, problems, on one screen.

Reads a cluster (kubeconfig; the speakers' annotations, and each node's speaker
``/metrics`` at its InternalIP for session states and VRRP masters) or a standalone
directory (the manifests and the nodes' ``status.json``). The pure core is
:mod:`teapot_lb.status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import click

from teapot_lb.cli.explain import cluster_view, manifest_view, source_options, state_root_of
from teapot_lb.cluster import ClusterView
from teapot_lb.status import ClusterStatus, report_from_metrics, report_from_status, summarize
from teapot_lb.status.render import as_json, table

CLEAR = "\x1b[H\x1b[2J"
DEFAULT_SPEAKER_PORT = 7473  # the Helm chart's speaker.metricsPort


def read_status_file(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def standalone_status(manifests: Path, state_root: Path) -> ClusterStatus:
    view = manifest_view(manifests)
    reports = {
        node: report_from_status(node, read_status_file(state_root / node / "status.json"))
        for node in view.nodes
    }
    return summarize(view, reports, source=f"standalone {manifests}")


async def _scrape(session: aiohttp.ClientSession, url: str) -> tuple[str | None, str]:
    try:
        async with session.get(url) as resp:
            if resp.status != 200:
                return None, f"speaker metrics not read: {url}: HTTP {resp.status}"
            return await resp.text(), ""
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        return None, f"speaker metrics not read: {url}: {err or type(err).__name__}"


async def speaker_metrics(
    view: ClusterView, port: int, read_timeout: float
) -> dict[str, tuple[str | None, str]]:
    """Each node's speaker ``/metrics`` text (or None and why), read at its InternalIP."""
    urls: dict[str, str | None] = {}
    for name, node in view.nodes.items():
        ips = node.addresses()
        host = f"[{ips[0]}]" if ips and ips[0].version == 6 else (str(ips[0]) if ips else None)
        urls[name] = f"http://{host}:{port}/metrics" if host else None
    out: dict[str, tuple[str | None, str]] = {}
    limit = aiohttp.ClientTimeout(total=read_timeout)
    async with aiohttp.ClientSession(timeout=limit) as session:
        names = [n for n, u in urls.items() if u is not None]
        got = await asyncio.gather(*(_scrape(session, str(urls[n])) for n in names))
        out.update(zip(names, got, strict=True))
    for name, url in urls.items():
        if url is None:
            out[name] = (None, "speaker metrics not read: the node has no InternalIP")
    return out


async def cluster_status(
    kubeconfig: str | None, speaker_port: int, read_timeout: float
) -> ClusterStatus:
    view = await cluster_view(kubeconfig)
    if speaker_port:
        scraped = await speaker_metrics(view, speaker_port, read_timeout)
    else:
        scraped = {n: (None, "") for n in view.nodes}
    reports = {n: report_from_metrics(view, n, *scraped[n]) for n in view.nodes}
    return summarize(view, reports, source="cluster")


def watch(
    screen: Callable[[], str],
    every: float,
    echo: Callable[[str], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    times: int | None = None,
) -> None:
    """Redraw `screen()` every `every` seconds (`times` screens; None: until interrupted)."""
    shown = 0
    while times is None or shown < times:
        if shown:
            sleep(every)
        echo(CLEAR + screen() + f"\n\n(every {every:g} s; Ctrl-C to stop)")
        shown += 1


@click.command("status")
@source_options
@click.option(
    "--speaker-port",
    type=int,
    default=DEFAULT_SPEAKER_PORT,
    show_default=True,
    help="Cluster: read each node's speaker /metrics on this port (0: do not).",
)
@click.option("--timeout", type=float, default=2.0, show_default=True, help="Per HTTP read.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option("-w", "--watch", "watching", is_flag=True, help="Redraw until interrupted.")
@click.option("--interval", type=float, default=2.0, show_default=True, help="With --watch.")
def status(
    manifests: Path | None,
    state_root: Path | None,
    kubeconfig: str | None,
    speaker_port: int,
    timeout: float,
    output: str,
    watching: bool,
    interval: float,
) -> None:
    """Show pools and usage, BGP sessions, which node holds which Service IP, and problems."""

    def current() -> ClusterStatus:
        if manifests is not None:
            return standalone_status(manifests, state_root_of(manifests, state_root))
        return asyncio.run(cluster_status(kubeconfig, speaker_port, timeout))

    def screen() -> str:
        s = current()
        return as_json(s) if output == "json" else table(s)

    if not watching:
        click.echo(screen())
        return
    with contextlib.suppress(KeyboardInterrupt):
        watch(screen, interval, lambda text: click.echo(text))


if __name__ == "__main__":
    status.main(args=sys.argv[1:], prog_name="teapot-lb status")
