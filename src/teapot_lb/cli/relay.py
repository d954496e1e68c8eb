"""`teapot-lb relay`: the Teapot BGP filtering relay (tenant speakers → the network)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

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
from teapot_lb.model.bgp import parse_community, parse_large_community
from teapot_lb.relay.metrics import RelayMetrics
from teapot_lb.relay.policy import MaxPrefixAction, RelayOptions, protected_addresses
from teapot_lb.relay.relay import Relay, RelayConfig
from teapot_lb.relay.standalone import follow_manifests


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
@click.option("--community", multiple=True, help="Allowlisted community (repeat); others go.")
@click.option("--aggregates/--host-routes", default=False, show_default=True)
@click.option("--max-prefixes", default=1000, show_default=True, help="Per session; 0: none.")
@click.option(
    "--max-prefix-action",
    type=click.Choice([a.value for a in MaxPrefixAction]),
    default=MaxPrefixAction.TEARDOWN.value,
    show_default=True,
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
    aggregates: bool,
    max_prefixes: int,
    max_prefix_action: str,
    max_prefix_restart: float,
    stale_time: int,
    gtsm: bool,
    password_secret: str,
    metrics_addr: str,
) -> None:
    """Peer with tenants' BGP speakers, pass on only their own routes to the BGPPeers.

    Tenants, AddressPools, BGPPeers and Secrets come from --manifests (standalone) or from
    the management cluster (--kubeconfig, or in-cluster when neither is given).

    A tenant speaker is known by its source address (inside one Tenant's nodeNetworks) and
    the Tenant's ASN; its routes are judged by a policy made from the Tenant (docs/relay.md)
    and re-advertised with the next hop unchanged, every path (ADD-PATH).
    """
    try:
        host, port = parse_address(listen, default_host="")
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    try:
        options = RelayOptions(
            aggregates=aggregates,
            communities=frozenset(parse_community(c) for c in community if c.count(":") < 2),
            large_communities=frozenset(
                LargeCommunity(*parse_large_community(c)) for c in community if c.count(":") == 2
            ),
            protected=protected_addresses(protect),
            max_prefixes=max_prefixes or None,
            max_prefix_action=MaxPrefixAction(max_prefix_action),
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
        "Sessions: "
        + (", ".join(f"{s['address']} {s['state']}" for s in doc["sessions"]) or "none"),
    ]
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
