"""Several paths per prefix from the plan to the speaker: BGPRoute path keys become
Paths (ADD-PATH), one path per key; routes without a key behave as before; BGPPeer
spec.addPath reaches the speaker's peer configuration."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest
from pydantic import ValidationError

from teapot_lb.announce.announcement import BGPRoute
from teapot_lb.bgp.attributes import Paths, RouteAttributes
from teapot_lb.bgp.wire import AddPathMode
from teapot_lb.model import BGPPeer
from teapot_lb.speaker.bgp_backend import BGPBackend, peer_setups
from teapot_lb.speaker.desired import bgp_routes

from .builders import FakeFactory, bgp_setup, store_of

VIP = "203.0.113.10/32"
HOPS = {"node-a": "192.0.2.21", "node-b": "192.0.2.22", "node-c": "192.0.2.23"}


def via(addr: str, **kw: object) -> RouteAttributes:
    return RouteAttributes(next_hop=IPv4Address(addr), **kw)  # type: ignore[arg-type]


def tenant_routes(hops: dict[str, str], peer: str = "r1") -> list[BGPRoute]:
    return [BGPRoute(peer, VIP, via(a), path=k) for k, a in hops.items()]


def test_routes_with_path_keys_become_one_path_per_key() -> None:
    out = bgp_routes(tenant_routes(HOPS))
    assert out == {"r1": {VIP: Paths.of({k: via(a) for k, a in HOPS.items()})}}


def test_routes_without_keys_are_shaped_as_before() -> None:
    out = bgp_routes([BGPRoute("r1", VIP), BGPRoute("r1", VIP, RouteAttributes(local_pref=200))])
    attrs = out["r1"][VIP]
    assert isinstance(attrs, RouteAttributes) and attrs.local_pref == 200


def test_routes_of_one_path_key_merge_like_routes_of_one_prefix() -> None:
    out = bgp_routes(
        [
            BGPRoute("r1", VIP, via(HOPS["node-a"], communities=(2,)), path="node-a"),
            BGPRoute("r1", VIP, via(HOPS["node-a"], communities=(1,)), path="node-a"),
        ]
    )
    paths = out["r1"][VIP]
    assert isinstance(paths, Paths) and paths.keys() == ("node-a",)
    assert paths.first().communities == (1, 2)


def test_a_route_without_a_key_beside_keyed_ones_is_the_path_named_empty() -> None:
    out = bgp_routes([BGPRoute("r1", VIP), *tenant_routes({"node-a": HOPS["node-a"]})])
    paths = out["r1"][VIP]
    assert isinstance(paths, Paths) and paths.keys() == ("", "node-a")
    assert paths.first() == RouteAttributes()  # next-hop self, first by key


async def test_the_backend_hands_the_speaker_paths_and_resends_only_on_change() -> None:
    factory = FakeFactory()
    backend = BGPBackend(factory)
    setups = peer_setups(store_of(*bgp_setup()).view(), "n1")
    router_id = IPv4Address("192.0.2.11")
    await backend.apply(setups, bgp_routes(tenant_routes(HOPS)), router_id)
    (speaker,) = factory.made
    sent = speaker.routes["192.0.2.1"][VIP]
    assert isinstance(sent, Paths) and sent.keys() == ("node-a", "node-b", "node-c")
    speaker.calls.clear()
    await backend.apply(setups, bgp_routes(tenant_routes(HOPS)), router_id)
    assert speaker.calls == []
    two = {k: a for k, a in HOPS.items() if k != "node-b"}
    await backend.apply(setups, bgp_routes(tenant_routes(two)), router_id)
    assert speaker.calls == [("routes", "192.0.2.1")]
    sent = speaker.routes["192.0.2.1"][VIP]
    assert isinstance(sent, Paths) and sent.keys() == ("node-a", "node-c")


def test_a_route_whose_next_hop_is_of_the_other_family_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"203\.0\.113\.10/32 \(path 'node-a'\).*2001:db8::21"):
        BGPRoute("r1", VIP, RouteAttributes(next_hop=IPv6Address("2001:db8::21")), path="node-a")


@pytest.mark.parametrize(
    ("setting", "mode"),
    [
        (None, AddPathMode.OFF),
        ("send", AddPathMode.SEND),
        ("receive", AddPathMode.RECEIVE),
        ("both", AddPathMode.BOTH),
    ],
)
def test_bgp_peer_add_path_reaches_the_peer_configuration(
    setting: str | None, mode: AddPathMode
) -> None:
    extra = {"addPath": setting} if setting else {}
    setups = peer_setups(store_of(*bgp_setup(**extra)).view(), "n1")
    config = setups["r1"].config
    assert config is not None and config.add_path is mode


def test_bgp_peer_add_path_refuses_an_unknown_value_naming_the_field() -> None:
    spec = {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1", "addPath": "all"}
    with pytest.raises(ValidationError, match="addPath"):
        BGPPeer.model_validate(
            {"kind": "BGPPeer", "metadata": {"name": "r1", "namespace": "x"}, "spec": spec}
        )
