"""The relay's community policy through real routers (BIRD and FRR): with RTBH allowed in
the Tenant (`spec.relay.rtbh`) a blackhole route of the tenant reaches both routers with
BLACKHOLE and the NO_EXPORT the relay adds (RFC 7999 §3.2); with `--well-known-communities
honour` a route carrying NO_EXPORT is not advertised, and the session's earlier path for
the prefix leaves the routers' FIBs, with its reason in `explain relay`. (Passing NO_EXPORT
on, the default, and removing BLACKHOLE without RTBH are in the hijack suite.) One world,
the relay restarted for each setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from teapot_lb.lab.wait import wait_for
from teapot_lb.model.bgp import WELL_KNOWN_COMMUNITIES

from .hijacks import announce
from .test_relay_hijack import Attacker
from .world import World, manifests, v4, world_in

SPEAKER = "ah"  # a speaker in acme's node network
BLACKHOLE = WELL_KNOWN_COMMUNITIES["blackhole"]
NO_EXPORT = WELL_KNOWN_COMMUNITIES["no-export"]
# As each router prints them: BIRD by value, FRR by name.
SHOWN = {BLACKHOLE: {"65535:666", "blackhole"}, NO_EXPORT: {"65535:65281", "noExport"}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world_in("comms", tmp_path_factory.mktemp("relay-communities")) as w:
        yield w


def speaker(world: World) -> Attacker:
    s = Attacker(world.hosts[SPEAKER], src=v4(SPEAKER), dst=v4("relay"), asn=64601)
    s.wait("established")
    return s


def shows(communities: frozenset[str], *values: int) -> bool:
    return all(communities & SHOWN[v] for v in values)


def test_rtbh_allowed_in_the_tenant_passes_blackhole_on_with_no_export_added(
    world: World,
) -> None:
    docs = manifests()
    acme = next(d for d in docs if d["kind"] == "Tenant" and d["metadata"]["name"] == "acme")
    acme["spec"]["relay"] = {"rtbh": True}
    world.write_manifests(docs)
    world.restart_relay()
    wait_for(lambda: world.explain("acme").get("communities", {}).get("rtbh") is True,
             timeout=30, what="acme's RTBH in explain relay")  # fmt: skip
    prefix = "203.0.113.15/32"
    s = speaker(world)
    try:
        s.send(announce(prefix, communities=(BLACKHOLE,)))
        for name, router in world.routers.items():
            rib = router.wait_routes(lambda r: prefix in r, what=prefix)
            assert shows(rib[prefix].communities, BLACKHOLE, NO_EXPORT), (name, rib[prefix])
        assert world.metric("teapot_lb_relay_routes_communities_scrubbed_total",
                            tenant="acme") == 0  # fmt: skip
    finally:
        s.close()
        world.write_manifests(manifests())


def test_no_export_honoured_keeps_the_route_from_the_routers_and_withdraws_its_earlier_path(
    world: World,
) -> None:
    world.restart_relay("--well-known-communities", "honour")
    prefix = "203.0.113.14/32"
    s = speaker(world)
    try:
        s.send(announce(prefix))
        world.wait_fib(prefix, frozenset({v4(SPEAKER)}))
        s.send(announce(prefix, communities=(NO_EXPORT,)))
        world.wait_fib(prefix, None)
        routes = [r for r in world.explain("acme")["routes"] if r["prefix"] == prefix]
        assert [r["reason"] for r in routes] == ["no-export-honoured"]
        assert world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme",
                            reason="no-export-honoured") == 1  # fmt: skip
    finally:
        s.close()
