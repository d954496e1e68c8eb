"""The relay on a management cluster (the fake API server, the real client): Tenants and
their changes reach the relay's policies, and a refused session becomes an Event on its
Tenant."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

from tests.relay.builders import OPTIONS
from tests.tenancy.builders import CONFIG_NS, pool_body, tenant_body

from teapot_lb.kube.client import connect
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.relay.kube import follow_cluster
from teapot_lb.relay.relay import Relay, RelayConfig


async def test_tenants_follow_the_cluster_and_refusals_become_events_on_the_tenant(
    tmp_path: Path,
) -> None:
    api = FakeApiServer(bookmark_interval=0.5)
    await api.start()
    relay = Relay(
        RelayConfig(
            local_as=64500, router_id="192.0.2.2", listen_address="127.0.0.1", listen_port=0,
            options=replace(OPTIONS, gtsm=False),
        )
    )  # fmt: skip
    try:
        api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONFIG_NS}})
        api.seed(pool_body("shared-v4", ["198.51.100.0/26"]))
        api.seed(pool_body("shared-v6", ["2001:db8:100::/120"]))
        api.seed(tenant_body("acme", asn=64601))
        # bolt's nodes are on this host's loopback, and bolt has no ASN: refused.
        api.seed(tenant_body("bolt", asn=None, nodeNetworks=["127.0.0.0/8"]))
        api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-bolt"}})
        # acme's MD5 key, written by the operator in the configuration namespace (the relay
        # reads Secrets there only; a tenant cannot write there).
        api.seed({"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": "relay-bgp-acme", "namespace": CONFIG_NS},
                  "data": {"password": base64.b64encode(b"acme-md5").decode()}})  # fmt: skip
        await relay.start()
        async with following(relay, api, tmp_path):
            await wait_for_async(lambda: "acme" in relay.rib.policies, within=10,
                                 what="acme's policy")  # fmt: skip
            acme = relay.rib.policies["acme"]
            assert ip_network("198.51.100.0/28") in acme.allocation
            # Its key is on the listening socket for each of its node networks.
            await wait_for_async(lambda: relay._passwords or None, within=10,
                                 what="acme's MD5 key set")  # fmt: skip
            assert set(relay._passwords.values()) == {"acme-md5"}
            assert set(relay._passwords) == set(acme.node_networks)

            shrunk = tenant_body("acme", asn=64601, allocations=[
                {"addressPool": "shared-v4", "cidrs": ["198.51.100.0/29"]}])  # fmt: skip
            api.put(shrunk)  # the operator edits the Tenant
            await wait_for_async(
                lambda: relay.rib.policies["acme"].allocation
                == (ip_network("198.51.100.0/29"),),
                within=10, what="acme's shrunk allocation",
            )  # fmt: skip

            port = relay.listen_port
            assert port is not None
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            note = await asyncio.wait_for(reader.read(64), 5)
            writer.close()
            assert note[18] == 3 and note[19:21] == b"\x06\x05"  # Cease/Connection Rejected

            def event() -> object:
                for obj in api.list("events"):
                    if obj.get("involvedObject", {}).get("name") == "bolt":
                        return obj
                return None

            found = await wait_for_async(event, within=10, what="an Event on Tenant bolt")
            assert found["reason"] == "SessionRefusedNoASN"  # type: ignore[index]

            # The same in bolt's namespace, about the node's session (its agents tell the
            # tenant on that Node).
            def in_bolts_namespace() -> list[dict[str, Any]] | None:
                found = [
                    e for e in api.list("events", "tenant-bolt")
                    if e["involvedObject"]["kind"] == "TenantNodeSession"
                ]  # fmt: skip
                return found or None

            (session,) = await wait_for_async(
                in_bolts_namespace, within=10, what="an Event in bolt's namespace"
            )
            assert session["involvedObject"]["name"] == "127.0.0.1"
            assert (session["reason"], session["message"]) == (
                found["reason"], found["message"])  # type: ignore[index]  # fmt: skip
    finally:
        await relay.stop()
        await api.stop()


@contextlib.asynccontextmanager
async def following(relay: Relay, api: FakeApiServer, tmp_path: Path) -> AsyncIterator[None]:
    """``relay`` follows the fake API server's cluster while the block runs."""
    path = api.write_kubeconfig(tmp_path / "kubeconfig")
    async with await connect(path, request_timeout_s=5.0) as client:
        follow = asyncio.create_task(follow_cluster(relay, client, config_namespace=CONFIG_NS))
        try:
            yield
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)


def tenant_nodes_body(
    namespace: str, cluster: str, nodes: dict[str, list[str]]
) -> dict[str, object]:
    return {
        "apiVersion": "lb.teapot.io/v1alpha1", "kind": "TenantNodes",
        "metadata": {"name": cluster, "namespace": namespace},
        "spec": {"cluster": cluster,
                 "nodes": [{"name": n, "addresses": a} for n, a in nodes.items()]},
    }  # fmt: skip


async def test_the_nodes_a_tenants_agents_publish_in_its_namespace_are_its_registered_nodes(
    tmp_path: Path,
) -> None:
    api = FakeApiServer(bookmark_interval=0.5)
    await api.start()
    relay = Relay(RelayConfig(local_as=64500, router_id="192.0.2.2", listen_port=0,
                              options=replace(OPTIONS, gtsm=False)))  # fmt: skip
    try:
        api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONFIG_NS}})
        api.seed(pool_body("shared-v4", ["198.51.100.0/26"]))
        api.seed(tenant_body("acme", asn=64601, nodes=[{"name": "n9", "addresses": ["192.0.2.9"]}]))
        api.seed(tenant_body("bolt", asn=64602))
        # c1's n1 and n2 (n2 has an address outside acme's node networks: not registered);
        # bolt's namespace names an acme address: not acme's, and outside bolt's networks.
        api.seed(
            tenant_nodes_body(
                "tenant-acme",
                "c1",
                {"n1": ["192.0.2.11", "2001:db8:a::11"], "n2": ["192.0.2.12", "203.0.113.12"]},
            )
        )
        api.seed(tenant_nodes_body("tenant-bolt", "b1", {"x": ["192.0.2.13", "192.0.2.71"]}))
        async with following(relay, api, tmp_path):

            def nodes(tenant: str) -> set[str] | None:
                policy = relay.rib.policies.get(tenant)
                return {str(a) for a in policy.nodes} if policy else None

            await wait_for_async(lambda: nodes("acme") == {
                "192.0.2.9", "192.0.2.11", "2001:db8:a::11", "192.0.2.12"},
                within=10, what="acme's registered nodes")  # fmt: skip
            assert nodes("bolt") == {"192.0.2.71"}
            assert relay.tenants["acme"].nodes[ip_address("192.0.2.11")] == "c1/n1"
            # c1 loses n2: its address is no longer acme's.
            api.put(tenant_nodes_body("tenant-acme", "c1", {"n1": ["192.0.2.11"]}))
            await wait_for_async(lambda: nodes("acme") == {"192.0.2.9", "192.0.2.11"},
                                 within=10, what="n2 deregistered")  # fmt: skip
    finally:
        await relay.stop()
        await api.stop()
