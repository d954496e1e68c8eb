"""`teapot-lb explain NAMESPACE/NAME`: per node and mode, whether it announces and why not."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from teapot_lb.announce.plan import Decision, PlanOptions, explain
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.standalone.assign import assign, assigned_services
from teapot_lb.standalone.directory import read


def manifest_view(manifests: Path) -> ClusterView:
    """The view standalone mode plans from: the manifests, with the IPs it assigns."""
    snap = read(manifests)
    view = snap.view()
    services = assigned_services(view, assign(view, unparsed_pools=snap.unparsed_pools))
    store = Store()
    snap.fill(store, {Kind.SERVICE: services})
    return store.view()


async def cluster_view(kubeconfig: str | None) -> ClusterView:
    from teapot_lb.speaker.kube_source import read_cluster

    return await read_cluster(kubeconfig)


def table(decisions: list[Decision]) -> str:
    """A fixed-width table: SERVICE IP, NODE, MODE, ANNOUNCES, REASON."""
    rows = [("NODE", "IP", "MODE", "ANNOUNCES", "WHY")]
    for d in decisions:
        rows.append(
            (
                d.node,
                d.ip or "-",
                d.mode.value if d.mode is not None else "-",
                "yes" if d.announces else "no",
                d.reason,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join([*cells, r[4]]).rstrip())
    return "\n".join(lines)


def as_json(service: str, decisions: list[Decision]) -> str:
    return json.dumps(
        {
            "service": service,
            "decisions": [
                {
                    "node": d.node,
                    "ip": d.ip,
                    "mode": d.mode.value if d.mode is not None else None,
                    "announces": d.announces,
                    "reason": d.reason,
                    "peers": list(d.peers),
                }
                for d in decisions
            ],
        },
        indent=1,
    )


@click.command("explain")
@click.argument("service")
@click.option(
    "--manifests",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Standalone mode: the manifest directory.",
)
@click.option("--kubeconfig", default=None, help="A cluster (default: $KUBECONFIG / in-cluster).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def explain_command(
    service: str, manifests: Path | None, kubeconfig: str | None, output: str
) -> None:
    """Explain, per node and mode, whether NAMESPACE/NAME's IPs are announced, and why not.

    Liveness of speakers and BGP session states are not known here: every speaker is
    assumed alive (the running speakers' status shows what they actually do).
    """
    if "/" not in service:
        service = f"default/{service}"
    view = manifest_view(manifests) if manifests else asyncio.run(cluster_view(kubeconfig))
    if service not in view.services:
        raise click.ClickException(f"Service {service} not found")
    decisions = explain(view, service, PlanOptions())
    if not decisions:
        raise click.ClickException(
            f"Service {service} is not a LoadBalancer Service teapot-lb handles"
        )
    if output == "json":
        click.echo(as_json(service, decisions))
    else:
        click.echo(f"Service {service}")
        click.echo(table(decisions))


if __name__ == "__main__":
    explain_command.main(args=sys.argv[1:], prog_name="teapot-lb explain")
