"""`teapot-lb relay`: the Teapot BGP filtering relay (tenant speakers → the network)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click
from aiohttp import web

from teapot_lb import log
from teapot_lb.bgp.wire import LargeCommunity
from teapot_lb.cli.serve import (
    Served,
    config_namespace_option,
    kubeconfig_option,
    metrics_address_option,
    serve_component,
)
from teapot_lb.httpserve import MonitoringServer, parse_address
from teapot_lb.longlived import collect_young_rarely
from teapot_lb.model.bgp import parse_community, parse_large_community
from teapot_lb.model.tenancy import check_relay_community
from teapot_lb.relay.metrics import RelayMetrics
from teapot_lb.relay.policy import (
    MaxPrefixAction,
    MaxPrefixCount,
    RelayOptions,
    WellKnownCommunities,
    protected_addresses,
)
from teapot_lb.relay.relay import Relay, RelayConfig
from teapot_lb.relay.standalone import follow_manifests

_F = TypeVar("_F", bound=Callable[..., Any])


class RelayServer(MonitoringServer):
    """`/metrics`, the probes, and `/relay/tenants/NAME` (what ``explain relay`` prints)."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(relay.metrics.registry)
        self.relay = relay

    def make_app(self) -> web.Application:
        app = super().make_app()
        app.router.add_get("/relay/tenants/{tenant}", self._explain)
        return app

    async def _explain(self, request: web.Request) -> web.Response:
        doc = self.relay.explain(request.match_info["tenant"])
        return web.json_response(doc, status=404 if "error" in doc else 200)


def _enum_option(name: str, default: StrEnum, help: str) -> Callable[[_F], _F]:
    """An option taking one of ``default``'s enum's values."""
    return click.option(
        name,
        type=click.Choice([v.value for v in type(default)]),
        default=default.value,
        show_default=True,
        help=help,
    )


@click.command("relay")
@click.option(
    "--manifests",
    type=click.Path(exists=True, path_type=Path),
    help="Standalone: the directory with Tenants, AddressPools, BGPPeers and Secrets.",
)
@kubeconfig_option("The management cluster (default: in-cluster).", must_exist=False)
@config_namespace_option("Kubernetes: the namespace of the AddressPools and BGPPeers.")
@click.option("--asn", type=click.IntRange(1, 4294967295), required=True, help="The relay's ASN.")
@click.option("--router-id", required=True, help="The relay's BGP identifier (an IPv4 address).")
@click.option("--listen", default=":179", show_default=True, help="Tenant side: HOST:PORT.")
@click.option("--peer", "peers", multiple=True, help="BGPPeer names towards the network (all).")
@click.option("--protect", multiple=True, help="Never a next hop: address or CIDR (repeat).")
@click.option(
    "--community",
    multiple=True,
    help="Allowlisted community, every tenant's (repeat; a Tenant's spec.relay adds its own); "
    "others go.",
)
@_enum_option(
    "--well-known-communities",
    WellKnownCommunities.PASS,
    "NO_EXPORT, NO_ADVERTISE, NO_EXPORT_SUBCONFED: passed on to the routers, or honoured "
    "(such a route is not advertised to them).",
)
@click.option(
    "--rtbh/--no-rtbh",
    default=False,
    show_default=True,
    help="BLACKHOLE (RFC 7999) passed on with NO_EXPORT added; else removed. A Tenant's "
    "spec.relay.rtbh wins.",
)
@click.option("--aggregates/--host-routes", default=False, show_default=True)
@click.option("--max-prefixes", default=1000, show_default=True, help="Per session; 0: none.")
@_enum_option(
    "--max-prefix-count",
    MaxPrefixCount.ACCEPTED,
    "What the limit counts: routes the policy accepted (BIRD's import limit) or every "
    "route received (its receive limit).",
)
@_enum_option(
    "--max-prefix-action", MaxPrefixAction.TEARDOWN, "What a session over its limit gets."
)
@click.option(
    "--max-as-path-length",
    default=32,
    show_default=True,
    type=click.IntRange(0),
    help="Longest AS path accepted, prepends included; 0: no cap.",
)
@click.option("--max-prefix-restart", default=60.0, show_default=True, help="Seconds.")
@click.option("--stale-time", default=120, show_default=True, help="Longest GR stale time (s).")
@click.option("--gtsm/--no-gtsm", default=True, show_default=True, help="TTL 255 (RFC 5082).")
@click.option(
    "--password-secret",
    default="relay-bgp",
    show_default=True,
    help="TCP MD5 keys: Secret PREFIX-<tenant> (configuration namespace), else PREFIX in the "
    "tenant's namespace (standalone).",
)
@metrics_address_option(":7476")
def relay(
    manifests: Path | None,
    kubeconfig: str | None,
    config_namespace: str,
    asn: int,
    router_id: str,
    listen: str,
    peers: tuple[str, ...],
    protect: tuple[str, ...],
    community: tuple[str, ...],
    well_known_communities: str,
    rtbh: bool,
    aggregates: bool,
    max_prefixes: int,
    max_prefix_count: str,
    max_prefix_action: str,
    max_as_path_length: int,
    max_prefix_restart: float,
    stale_time: int,
    gtsm: bool,
    password_secret: str,
    metrics_addr: str,
) -> None:
    """Peer with tenants' BGP speakers, pass on only their own routes to the BGPPeers.

    Tenants, AddressPools, BGPPeers and Secrets come from --manifests (standalone) or from
    the management cluster (--kubeconfig, or in-cluster when neither is given).

    A tenant speaker is known by its source address (a registered node address of one
    Tenant: its spec.nodes and published TenantNodes, inside its nodeNetworks) and the
    Tenant's ASN; its routes are judged by a policy made from the Tenant (docs/relay.md)
    and re-advertised with the next hop unchanged, every path (ADD-PATH).
    """
    try:
        host, port = parse_address(listen, default_host="")
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    try:
        standard = [check_relay_community(c) for c in community if c.count(":") < 2]
        options = RelayOptions(
            aggregates=aggregates,
            communities=frozenset(parse_community(c) for c in standard),
            large_communities=frozenset(
                LargeCommunity(*parse_large_community(c)) for c in community if c.count(":") == 2
            ),
            well_known=WellKnownCommunities(well_known_communities),
            rtbh=rtbh,
            protected=protected_addresses(protect),
            max_prefixes=max_prefixes or None,
            max_prefix_count=MaxPrefixCount(max_prefix_count),
            max_prefix_action=MaxPrefixAction(max_prefix_action),
            max_as_path_length=max_as_path_length or None,
            max_prefix_restart=max_prefix_restart,
            stale_time=stale_time,
            gtsm=gtsm,
        )
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    config = RelayConfig(
        local_as=asn,
        router_id=router_id,
        listen_address=host or None,
        listen_port=port,
        options=options,
        peers=peers,
        password_secret=password_secret,
    )
    setup = partial(_setup, config, manifests, kubeconfig, config_namespace)
    # A burst of tenant routes is 100,000s of lasting objects without cycles: the young
    # collections would walk each two or three times (a fifth of the relay's CPU).
    collect_young_rarely()
    asyncio.run(serve_component("relay", setup, metrics_addr=metrics_addr))


async def _setup(
    config: RelayConfig, manifests: Path | None, kubeconfig: str | None, config_namespace: str
) -> Served:
    relay_ = Relay(config, metrics=RelayMetrics())
    server = RelayServer(relay_)

    async def run() -> None:
        await relay_.start()
        log.get("teapot_lb.relay").info(
            "relay started", port=relay_.listen_port, metrics=server.port or None
        )
        if manifests is not None:
            await follow_manifests(relay_, manifests)
            return
        from teapot_lb.kube.client import connect
        from teapot_lb.relay.kube import follow_cluster

        async with await connect(kubeconfig, user_agent="teapot-lb-relay") as client:
            await follow_cluster(
                relay_, client, config_namespace=config_namespace, readiness=server.readiness
            )

    return Served(run=run, monitoring=server, stop=[relay_.stop])


def fetch_explain(url: str, tenant: str) -> dict[str, Any]:
    """What a running relay says of ``tenant`` (its ``/relay/tenants/NAME``)."""
    target = f"{url.rstrip('/')}/relay/tenants/{tenant}"
    try:
        with urllib.request.urlopen(target, timeout=10) as resp:
            doc: dict[str, Any] = json.load(resp)
    except urllib.error.HTTPError as err:
        doc = json.load(err)
    except (OSError, ValueError) as err:
        raise click.ClickException(f"cannot ask the relay at {url}: {err}") from None
    return doc


def explain_text(doc: dict[str, Any]) -> str:
    """The tenant's routes as a table, filtered ones with the rule that decided."""
    if "error" in doc:
        raise click.ClickException(doc["error"])
    lines = [
        f"Tenant {doc['tenant']} (AS{doc['asn']}): allocation {', '.join(doc['allocation'])};"
        f" node networks {', '.join(doc['node_networks'])}",
        "Registered nodes: "
        + (
            ", ".join(doc.get("nodes", []))
            or "none: no session of its speakers is accepted (Tenant spec.nodes, TenantNodes)"
        ),
        "Sessions: "
        + (", ".join(f"{s['address']} {s['state']}" for s in doc["sessions"]) or "none"),
    ]
    limit = doc.get("max_prefix")
    if limit:
        counted = f"{limit['limit']} routes {limit['counts']}" if limit["limit"] else "none"
        lines.append(f"Max prefix per session: {counted} (then {limit['action']})")
    comms = doc.get("communities")
    if comms:
        allowed = ", ".join([*comms["allowed"], *comms["large_allowed"]]) or "none"
        lines.append(
            f"Communities: allowed {allowed}; NO_EXPORT and kin {comms['well_known']};"
            f" RTBH {'on' if comms['rtbh'] else 'off'}"
        )
    rows = [("PREFIX", "FROM", "NEXT HOP", "AS PATH", "VERDICT")]
    for r in doc["routes"]:
        verdict = (
            "accepted"
            if r["verdict"] == "accepted"
            else f"filtered by rule {r['rule'] or '-'} ({r['reason']}): {r['why']}"
        )
        path = " ".join(map(str, r["as_path"])) or "(empty)"
        rows.append((r["prefix"], r["from"], r["next_hop"], path, verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        )
    return "\n".join(lines)


def explain_relay(tenant: str | None, url: str, output: str) -> None:
    """`teapot-lb explain relay TENANT`."""
    if not tenant:
        raise click.UsageError("explain relay TENANT: name the Tenant")
    doc = fetch_explain(url, tenant)
    click.echo(json.dumps(doc, indent=1) if output == "json" else explain_text(doc))
