"""`teapot-lb explain NAMESPACE/NAME`: per node and mode, whether it announces and why not."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from teapot_lb.announce.announcement import Decision
from teapot_lb.announce.plan import PlanOptions, explain, explain_tenant
from teapot_lb.cluster import ClusterView, Kind, Store, UnknownBFDProfile
from teapot_lb.model import BFDParameters, BGPPeer
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.explain import ServiceExplanation, explain_service
from teapot_lb.ovn.gateways import Gateways
from teapot_lb.speaker.report import annotation_key, parse_summary
from teapot_lb.standalone import first_seen
from teapot_lb.standalone.assign import assigned_services, planned_objects
from teapot_lb.standalone.directory import read


def manifest_view(manifests: Path, state_root: Path | None = None) -> ClusterView:
    """The view standalone mode plans from: the manifests, with the IPs it assigns.

    Conflicts are decided by age as the nodes decide them: objects without a
    `creationTimestamp` get the first-seen time a node under `state_root` recorded
    (read only; :mod:`teapot_lb.standalone.first_seen`)."""
    seen: dict[str, datetime] = {}
    if state_root is not None and state_root.is_dir():
        for node_dir in sorted(state_root.iterdir()):
            if (node_dir / first_seen.FILE_NAME).is_file():
                seen = first_seen.FirstSeen(node_dir).seen
                break
    now = datetime.now(UTC)
    stamps = first_seen.FirstSeen(None)  # (records nothing: no state directory)
    stamps.seen = seen
    snap = read(manifests, stamp=stamps.at(now))
    view = snap.view()
    assignments, planned = planned_objects(view, unparsed_pools=snap.unparsed_pools)
    # The Services as the API server would show them (the status summary reads their IPs).
    planned[Kind.SERVICE] = dict(assigned_services(view, assignments))
    store = Store()
    snap.fill(store, planned)
    return store.view()


async def cluster_view(kubeconfig: str | None, *, tenancy: bool = False) -> ClusterView:
    from teapot_lb.speaker.kube_source import read_cluster

    return await read_cluster(kubeconfig)


# What the running speakers report, per node: the (mode, IP) pairs it announces now, or
# a word when that is unknown ("stopped", or None: no report from that node).
Observed = dict[str, set[tuple[str, str]] | str | None]


def observed_in_cluster(view: ClusterView, service: str) -> Observed:
    """From the speakers' per-node annotations on the Service."""
    svc = view.services[service]
    notes = svc.metadata.annotations
    return {node: parse_summary(notes.get(annotation_key(node), "")) for node in sorted(view.nodes)}


def observed_in_state(view: ClusterView, service: str, state_root: Path) -> Observed:
    """From the status files of standalone nodes (`STATE_ROOT/<node>/status.json`)."""
    out: Observed = {}
    for node in sorted(view.nodes):
        try:
            doc = json.loads((state_root / node / "status.json").read_text())
        except (OSError, ValueError):
            out[node] = None
            continue
        if doc.get("stopped"):
            out[node] = "stopped"
            continue
        entry = (doc.get("services") or {}).get(service) or {}
        out[node] = parse_summary(str(entry.get("announcing") or ""))
    return out


def now_of(d: Decision, observed: Observed | None) -> str | None:
    """'yes' / 'no' / 'stopped' / '?' for one decision, None without observations."""
    if observed is None:
        return None
    seen = observed.get(d.node)
    if seen is None:
        return "?"
    if isinstance(seen, str):
        return seen
    if d.mode is None:
        return "no"
    return "yes" if (d.mode.value, d.ip) in seen else "no"


def table(decisions: list[Decision], observed: Observed | None = None) -> str:
    """A fixed-width table: NODE, IP, MODE, ANNOUNCES [, NOW], WHY.

    ANNOUNCES is what the configuration asks for; NOW is what the node's speaker
    reports it does (when that is known).
    """
    head = ["NODE", "IP", "MODE", "ANNOUNCES", *(["NOW"] if observed is not None else [])]
    rows = [[*head, "WHY"]]
    for d in decisions:
        row = [
            d.node,
            d.ip or "-",
            d.mode.value if d.mode is not None else "-",
            "yes" if d.announces else "no",
        ]
        now = now_of(d, observed)
        if now is not None:
            row.append(now)
        rows.append([*row, d.reason])
    n = len(head)
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    lines = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(n)]
        lines.append("  ".join([*cells, r[n]]).rstrip())
    return "\n".join(lines)


def bfd_of_peers(view: ClusterView, decisions: list[Decision]) -> dict[str, str]:
    """Per BGPPeer the decisions announce to, how BFD watches its session (empty when no
    such peer names a BFDProfile, so that configurations without BFD print nothing)."""
    named = {p for d in decisions for p in d.peers}
    peers = [view.bgp_peers[k] for k in sorted(view.bgp_peers) if view.bgp_peers[k].name in named]
    if not any(p.spec.bfd_profile for p in peers):
        return {}
    return {peer.name: _bfd_summary(view, peer) for peer in peers}


def _bfd_summary(view: ClusterView, peer: BGPPeer) -> str:
    try:
        params = view.bfd_parameters(peer)
    except UnknownBFDProfile as err:
        return f"BFD profile {err.profile!r} not found"
    if params is None:
        return "no BFD"
    return f"BFD profile {peer.spec.bfd_profile}: {_parameters(params)}"


def _parameters(p: BFDParameters) -> str:
    hops = f"multihop, minimum TTL {p.minimum_ttl}" if p.multihop else "single-hop"
    return (
        f"transmit {p.desired_min_tx_us // 1000} ms, receive {p.required_min_rx_us // 1000} ms,"
        f" multiplier {p.detect_multiplier}, {hops}{', passive' if p.passive else ''}"
    )


def as_json(
    service: str,
    decisions: list[Decision],
    observed: Observed | None = None,
    bfd: dict[str, str] | None = None,
) -> str:
    rows = []
    for d in decisions:
        row: dict[str, object] = {
            "node": d.node,
            "ip": d.ip,
            "mode": d.mode.value if d.mode is not None else None,
            "announces": d.announces,
            "reason": d.reason,
            "peers": list(d.peers),
        }
        now = now_of(d, observed)
        if now is not None:
            row["now"] = now
        rows.append(row)
    doc: dict[str, object] = {"service": service, "decisions": rows}
    if bfd:
        doc["bfd"] = bfd
    return json.dumps(doc, indent=1)


F = TypeVar("F", bound=Callable[..., Any])


def source_options(command: F) -> F:
    """`--manifests`, `--state-root`, `--kubeconfig`: where a command reads the cluster
    (shared by `explain` and `status`)."""
    for option in reversed(
        (
            click.option(
                "--manifests",
                type=click.Path(exists=True, path_type=Path),
                default=None,
                help="Standalone mode: the manifest directory.",
            ),
            click.option(
                "--state-root",
                type=click.Path(path_type=Path),
                default=None,
                help="Standalone: where the nodes' state dirs are (STATE_ROOT/NODE/status.json)"
                " [default: MANIFESTS/.state].",
            ),
            click.option(
                "--kubeconfig", default=None, help="A cluster (default: $KUBECONFIG / in-cluster)."
            ),
        )
    ):
        command = option(command)
    return command


def state_root_of(manifests: Path, state_root: Path | None) -> Path:
    """The nodes' state dirs: `--state-root`, else `.state` beside the manifests."""
    return state_root or (manifests if manifests.is_dir() else manifests.parent) / ".state"


@click.command("explain")
@click.argument("service")
@click.argument("tenant", required=False)
@source_options
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option(
    "--ovn-nb",
    default=None,
    envvar="OVN_NB_DB",
    help="OVN mode: also read the Northbound database (unix:PATH, tcp:HOST:PORT) and say "
    "whether it holds the Service's rows.",
)
@click.option(
    "--cluster-name", default="default", show_default=True, help="OVN mode: as `teapot-lb ovn`."
)
@click.option(
    "--ovn-sb",
    default=None,
    envvar="OVN_SB_DB",
    help="OVN mode with BGP: read the Southbound (unix:PATH, tcp:HOST:PORT) and say which "
    "chassis holds each gateway port, so which node announces (as speakers with --ovn-sb).",
)
@click.option(
    "--relay-url",
    default="http://127.0.0.1:7476",
    show_default=True,
    help="explain relay TENANT: the relay's metrics address.",
)
def explain_command(
    service: str,
    tenant: str | None,
    manifests: Path | None,
    state_root: Path | None,
    kubeconfig: str | None,
    output: str,
    ovn_nb: str | None,
    cluster_name: str,
    ovn_sb: str | None,
    relay_url: str,
) -> None:
    """Explain, per node and mode, whether NAMESPACE/NAME's IPs are announced, and why not.

    ANNOUNCES is what the configuration asks for, every speaker assumed alive and every
    BGP session up. NOW is what each node's speaker reports it does: from the
    `announce.lb.teapot.io/<node>` annotations in a cluster, from the nodes' status.json
    in standalone mode ('?': no status from that node, 'stopped': it was stopped).
    When a BGPPeer announced to names a BFDProfile, a line per such peer gives its BFD.
    In OVN mode, the Service's Load_Balancer rows follow: VIPs, backends, where they are
    attached and (with --ovn-nb) whether the Northbound holds them.

    `explain relay TENANT`: the tenant's routes at the BGP relay, accepted or filtered
    with the rule that decided.
    """
    if service == "relay":
        from teapot_lb.cli.relay import explain_relay

        explain_relay(tenant, relay_url, output)
        return
    if "/" not in service:
        service = f"default/{service}"
    root = state_root_of(manifests, state_root) if manifests is not None else None
    view = (
        manifest_view(manifests, root)
        if manifests
        else asyncio.run(cluster_view(kubeconfig, tenancy=True))
    )
    if service not in view.services and service in view.tenant_load_balancers:
        request = view.tenant_load_balancers[service]
        tenant_decisions = explain_tenant(view, service, PlanOptions())
        if output == "json":
            click.echo(tenant_json(service, request, tenant_decisions))
        else:
            click.echo(tenant_text(service, request, tenant_decisions))
        return
    if service not in view.services:
        raise click.ClickException(f"Service {service} not found")
    decisions = explain(view, service, PlanOptions(ovn_gateways=ovn_gateways(ovn_sb)))
    ovn = ovn_explanation(view, service, ovn_nb, cluster_name)
    if not decisions and (ovn is None or not ovn.rows):
        raise click.ClickException(
            f"Service {service} is not a LoadBalancer Service teapot-lb handles"
        )
    observed: Observed | None = None
    if manifests is None:
        observed = observed_in_cluster(view, service)
    elif root is not None and root.is_dir():
        observed = observed_in_state(view, service, root)
    bfd = bfd_of_peers(view, decisions)
    if output == "json":
        doc = json.loads(as_json(service, decisions, observed, bfd))
        if ovn is not None:
            doc["ovn"] = ovn.as_dict()
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(f"Service {service}")
        click.echo(table(decisions, observed))
        for peer, summary in bfd.items():
            click.echo(f"BGPPeer {peer}: {summary}")
        if ovn is not None:
            click.echo(ovn.text())


def ovn_gateways(ovn_sb: str | None) -> Gateways | None:
    """Where the gateway ports are, per the Southbound at `ovn_sb` (None: not asked)."""
    if ovn_sb is None:
        return None
    # Only here: the OVSDB library loads only when a database is to be read.
    from teapot_lb.ovn.nbdb import Connection, NorthboundError
    from teapot_lb.ovn.sbdb import read_once

    try:
        return read_once(Connection(ovn_sb))
    except (ValueError, NorthboundError) as err:
        raise click.ClickException(str(err)) from err


def ovn_explanation(
    view: ClusterView, service: str, ovn_nb: str | None, owner: str
) -> ServiceExplanation | None:
    """The Service's OVN rows, when the cluster uses OVN mode (or --ovn-nb asks)."""
    if not view.ovn_advertisements and ovn_nb is None:
        return None
    observed = None
    if ovn_nb is not None:
        # Only here: the OVSDB library loads only when a database is to be read.
        from teapot_lb.ovn.nbdb import Connection, NorthboundError, read_once

        try:
            observed = read_once(Connection(ovn_nb), owner)
        except (ValueError, NorthboundError) as err:
            raise click.ClickException(str(err)) from err
    return explain_service(desired_state(view, owner), service, observed)


def tenant_text(key: str, request: TenantLoadBalancer, decisions: list[Decision]) -> str:
    """A TenantLoadBalancer (route mode): the manager's verdict, then the speakers'."""
    status = request.status
    lines = [f"TenantLoadBalancer {key} (tenant cluster {request.spec.source.cluster})"]
    for condition in status.conditions if status else []:
        line = f"  {condition.type}: {condition.status.value} ({condition.reason})"
        lines.append(line + (f": {condition.message}" if condition.message else ""))
    if status is not None and status.addresses:
        lines.append(f"  addresses: {', '.join(status.addresses)}")
    if status is not None and status.next_hops:
        lines.append(f"  next hops: {', '.join(status.next_hops)}")
    if decisions:
        lines.append(table(decisions))
    else:
        lines.append("  no management speaker announces it: it is not Programmed in route mode")
    return "\n".join(lines)


def tenant_json(key: str, request: TenantLoadBalancer, decisions: list[Decision]) -> str:
    status = request.status
    doc = {
        "tenantLoadBalancer": key,
        "conditions": [c.model_dump(by_alias=True, mode="json") for c in status.conditions]
        if status
        else [],
        "addresses": list(status.addresses) if status else [],
        "nextHops": list(status.next_hops) if status else [],
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
    }
    return json.dumps(doc, indent=1)


if __name__ == "__main__":
    explain_command.main(args=sys.argv[1:], prog_name="teapot-lb explain")
