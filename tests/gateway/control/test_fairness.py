"""Fairness between tenants in the gateway's reconcile (issue 37, goal 2): a tenant
translated last turn and changed again waits one turn while the others' changes go
first, never two turns running; over HTTP, a quiet tenant's backend change is served
while another tenant rewrites its endpoints as fast as the API takes them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.config import GatewayConfig
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7mirror import AGENT, MANAGED_BY
from teapot_lb.gateway.control.l7turns import Turn, this_turn
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.resources import ENDPOINT_SLICES
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.wait import wait_for_async
from tenancy.builders import CONFIG_NS, TENANTS, tenant_body

from .builders import DOMAINS, ingress_body, mirrored_slice

WITHIN = 15.0


def test_a_namespace_changed_again_waits_while_others_go_first() -> None:
    turn = this_turn({"noisy", "quiet"}, last={"noisy"}, put_off_last=set())
    assert turn == Turn(now=frozenset({"quiet"}), later=frozenset({"noisy"}))


def test_a_namespace_put_off_last_turn_is_served_this_turn() -> None:
    turn = this_turn({"noisy", "other"}, last={"quiet"}, put_off_last={"noisy"})
    assert turn == Turn(now=frozenset({"noisy", "other"}), later=frozenset())


def test_alone_a_churning_namespace_is_served_every_turn() -> None:
    assert this_turn({"noisy"}, last={"noisy"}, put_off_last=set()).later == frozenset()


def test_a_churning_tenant_is_served_at_least_every_other_turn() -> None:
    """Turns where a fresh tenant changes each time, beside one that changes in every one:
    the churning one is never put off twice in a row."""
    last: frozenset[str] = frozenset()
    put_off: frozenset[str] = frozenset()
    served = []
    for k in range(10):
        turn = this_turn({"noisy", f"fresh{k}"}, last, put_off)
        last, put_off = turn.now, turn.later
        assert f"fresh{k}" in turn.now
        served.append("noisy" in turn.now)
    assert all(a or b for a, b in itertools.pairwise(served))


def web_slice(tenant: str, address: str) -> dict[str, Any]:
    """The tenant's mirrored EndpointSlice of Service web, as its agent writes it."""
    body = mirrored_slice(tenant, "web", [address])
    body["metadata"]["labels"][MANAGED_BY] = AGENT
    return body


def endpoints_of(config: GatewayConfig | None, tenant: str) -> set[str]:
    backends = config.backends if config is not None else ()
    return {str(e.address) for b in backends if b.owner.tenant == tenant for e in b.endpoints}


def slice_key(tenant: str) -> str:
    meta = web_slice(tenant, "192.0.2.1")["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


async def move(client: KubeClient, tenant: str, address: str) -> None:
    body = web_slice(tenant, address)
    await client.patch(
        ENDPOINT_SLICES, body["metadata"]["name"], {"endpoints": body["endpoints"]},
        namespace=body["metadata"]["namespace"],
    )  # fmt: skip


@contextlib.asynccontextmanager
async def two_tenants(tmp: Path) -> AsyncIterator[tuple[FakeApiServer, KubeClient]]:
    """The management API holding acme's and bolt's Ingress www.<domain> → Service web
    (one endpoint each, acme 192.0.2.1, bolt 192.0.2.71), and its admin client."""
    api = FakeApiServer(
        bookmark_interval=0.5,
        seed_namespaces=("default", CONFIG_NS, *(t["namespace"] for t in TENANTS.values())),
    )
    await api.start()
    try:
        for name in ("acme", "bolt"):
            api.seed(tenant_body(name, dnsDomains=DOMAINS[name], modes=["Route", "Gateway"]))
            api.seed(ingress_body(name, "shop", f"www.{DOMAINS[name][0]}"))
            api.seed(web_slice(name, "192.0.2.1" if name == "acme" else "192.0.2.71"))
        api.write_kubeconfig(tmp / "admin")
        assert api.kubeconfig_path is not None
        async with await connect(api.kubeconfig_path) as admin:
            yield api, admin
    finally:
        await api.stop()


def deferred(control: GatewayControl, tenant: str) -> float:
    name = "teapot_lb_gateway_translations_deferred_total"
    return control.registry.get_sample_value(name, {"tenant": tenant}) or 0.0


async def test_a_tenant_changed_again_waits_a_turn_while_another_tenant_goes_first(
    tmp_path: Path,
) -> None:
    """The data plane's apply held while a turn applies bolt's change; meanwhile bolt
    changes again and acme changes: the next config serves acme's change with bolt's
    as it was, the one after it bolt's, and bolt's wait is counted."""
    configs: list[GatewayConfig] = []
    gate, held = asyncio.Event(), asyncio.Event()
    gate.set()

    async def apply(config: GatewayConfig) -> None:
        configs.append(config)
        if not gate.is_set():
            held.set()
            await gate.wait()

    async with two_tenants(tmp_path) as (_, admin):
        control = GatewayControl(
            admin, [ip_address("203.0.113.10")], on_config=apply, watch_timeout_s=30
        )
        async with running(control):
            await wait_for_async(
                lambda: endpoints_of(control.config, "acme") == {"192.0.2.1"} or None,
                within=WITHIN, what="acme's endpoint served",
            )  # fmt: skip
            # bolt churns: turns of bolt's alone (acme's status, written on the first
            # turn, came back long before).
            for address in ("192.0.2.74", "192.0.2.75", "192.0.2.76"):
                await move(admin, "bolt", address)
                await wait_for_async(
                    lambda a=address: endpoints_of(control.config, "bolt") == {a} or None,
                    within=WITHIN, what=f"bolt's endpoint {address} served",
                )  # fmt: skip
            gate.clear()
            await move(admin, "bolt", "192.0.2.72")
            await wait_for_async(
                lambda: held.is_set() or None, within=WITHIN, what="bolt's turn applying"
            )
            await move(admin, "bolt", "192.0.2.73")
            await move(admin, "acme", "192.0.2.5")
            for tenant, address in (("bolt", "192.0.2.73"), ("acme", "192.0.2.5")):
                await wait_for_async(
                    lambda t=tenant, a=address: slice_has(control, t, a) or None,
                    within=WITHIN, what=f"{tenant}'s change in the gateway's cache",
                )  # fmt: skip
            gate.set()
            await wait_for_async(
                lambda: endpoints_of(control.config, "bolt") == {"192.0.2.73"} or None,
                within=WITHIN, what="bolt's second change served",
            )  # fmt: skip
        seen = [(endpoints_of(c, "acme"), endpoints_of(c, "bolt")) for c in configs]
        held_at = seen.index(({"192.0.2.1"}, {"192.0.2.72"}))  # the turn held
        assert seen[held_at + 1 :] == [
            ({"192.0.2.5"}, {"192.0.2.72"}),  # acme first, bolt put off
            ({"192.0.2.5"}, {"192.0.2.73"}),
        ]
        assert deferred(control, "bolt") == 1
        assert deferred(control, "acme") == 0


def slice_has(control: GatewayControl, tenant: str, address: str) -> bool:
    raw = control.slices.get(slice_key(tenant)) or {}
    return [e["addresses"] for e in raw.get("endpoints", [])] == [[address]]


@contextlib.asynccontextmanager
async def bolt_flooding(client: KubeClient) -> AsyncIterator[list[int]]:
    """bolt's Service `web` moved between two of its nodes, one write after another, for
    the duration of the block (the writes so far in the list)."""
    stop, writes = asyncio.Event(), list[int]()

    async def flood() -> None:
        while not stop.is_set():
            await move(client, "bolt", f"192.0.2.{71 + len(writes) % 2}")
            writes.append(len(writes))

    task = asyncio.create_task(flood())
    try:
        await wait_for_async(lambda: len(writes) >= 20 or None, within=WITHIN, what="the flood")
        yield writes
        assert not task.done(), "the flood stopped early"
    finally:
        stop.set()
        await task


async def test_a_quiet_tenants_changes_are_served_while_another_floods(tmp_path: Path) -> None:
    async with two_tenants(tmp_path) as (api, admin):
        assert api.kubeconfig_path is not None
        control = GatewayControl(admin, [ip_address("203.0.113.10")], watch_timeout_s=30)
        async with running(control), await connect(api.kubeconfig_path) as noisy:
            await wait_for_async(
                lambda: endpoints_of(control.config, "acme") == {"192.0.2.1"} or None,
                within=WITHIN, what="acme's endpoint served",
            )  # fmt: skip
            async with bolt_flooding(noisy) as writes:
                for k in range(10):
                    moved = f"192.0.2.{2 + k}"
                    before = len(writes)
                    await move(admin, "acme", moved)
                    await wait_for_async(
                        lambda m=moved: endpoints_of(control.config, "acme") == {m} or None,
                        within=WITHIN, what=f"acme's endpoint {moved} served during the flood",
                    )  # fmt: skip
                assert len(writes) > before  # bolt still writing while acme was served
            await move(admin, "bolt", "192.0.2.79")
            await wait_for_async(
                lambda: endpoints_of(control.config, "bolt") == {"192.0.2.79"} or None,
                within=WITHIN, what="bolt's last endpoint served",
            )  # fmt: skip
