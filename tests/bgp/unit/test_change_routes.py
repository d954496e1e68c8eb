"""A peer's desired routes changed prefix by prefix (`Speaker.change_routes`) equal the same
routes compiled whole (`set_routes`), ADD-PATH tables included, and the peer's Adj-RIB-Out
is told which prefixes changed."""

from __future__ import annotations

import asyncio
import threading
from ipaddress import IPv4Network, ip_network
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp import PeerConfig, Speaker
from teapot_lb.bgp import speaker as speaker_module
from teapot_lb.bgp.attributes import Desired, Paths, RouteAttributes
from teapot_lb.bgp.rib import change_compiled, compile_routes
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST

PREFIXES = [ip_network(p) for p in ("192.0.2.1/32", "192.0.2.2/32", "198.51.100.0/24",
                                     "2001:db8::1/128")]  # fmt: skip
ATTRS = st.sampled_from(
    [None, RouteAttributes(), RouteAttributes(local_pref=200), RouteAttributes(communities=(7,))]
)
PATHS = st.builds(
    lambda keys: Paths.of({k: RouteAttributes(communities=(i,)) for i, k in enumerate(keys)}),
    st.sets(st.sampled_from(["a", "b", "c"]), min_size=1),
)
DESIRED = st.one_of(ATTRS, PATHS)
# One change: prefix index → desired (set) or the string "gone" (withdrawn).
CHANGES = st.lists(
    st.dictionaries(st.integers(0, len(PREFIXES) - 1), st.one_of(DESIRED, st.just("gone"))),
    min_size=1,
    max_size=8,
)


def _apply(
    table: dict[IPv4Network | object, Desired | None], change: dict[int, object]
) -> tuple[dict[object, Desired | None], list[object]]:
    put: dict[object, Desired | None] = {}
    gone: list[object] = []
    for i, what in change.items():
        prefix = PREFIXES[i]
        if what == "gone":
            gone.append(prefix)
            table.pop(prefix, None)
        else:
            put[prefix] = what  # type: ignore[assignment]
            table[prefix] = what  # type: ignore[assignment]
    return put, gone


@settings(max_examples=200, deadline=None)
@given(CHANGES)
def test_a_table_changed_in_place_equals_the_table_compiled_whole(
    changes: list[dict[int, object]],
) -> None:
    table: dict[object, Desired | None] = {}
    compiled = compile_routes({})
    for change in changes:
        compiled.with_path_ids(IPV4_UNICAST)  # a kept ADD-PATH table is kept up to date too
        put, gone = _apply(table, change)
        touched = change_compiled(compiled, put, gone)  # type: ignore[arg-type]
        whole = compile_routes(table)  # type: ignore[arg-type]
        assert compiled == whole
        for family in (IPV4_UNICAST, IPV6_UNICAST):
            assert compiled.with_path_ids(family) == whole.with_path_ids(family)
        assert sum(map(len, touched.values())) == len(change)


def test_the_speaker_hands_the_peer_only_the_changed_prefixes() -> None:
    speaker = Speaker(local_as=64512, router_id="192.0.2.11", listen_port=None)
    peer = speaker.add_peer(PeerConfig(address="192.0.2.1", peer_as=64500))
    many = {ip_network(f"198.51.100.{i}/32"): RouteAttributes() for i in range(100)}
    speaker.set_routes(many, peer="192.0.2.1")
    rib = peer.rib_out
    rib._dirty = {}  # as after an UPDATE was sent: nothing pending
    extra = ip_network("192.0.2.9/32")
    speaker.change_routes({extra: RouteAttributes(local_pref=50)}, [PREFIXES[0]], peer="192.0.2.1")
    assert rib.desired == compile_routes({**many, extra: RouteAttributes(local_pref=50)})
    assert rib._dirty == {IPV4_UNICAST: {b"\x20\xc0\x00\x02\x09", b"\x20\xc0\x00\x02\x01"}}


@settings(max_examples=100, deadline=None)
@given(CHANGES)
def test_prefixes_as_text_compile_and_change_as_the_networks_do(
    changes: list[dict[int, object]],
) -> None:
    by_network: dict[object, Desired | None] = {}
    compiled = compile_routes({})
    from_text = compile_routes({})
    for change in changes:
        put, gone = _apply(by_network, change)
        change_compiled(compiled, put, gone)  # type: ignore[arg-type]
        change_compiled(from_text, {str(p): d for p, d in put.items()}, [str(p) for p in gone])
        assert from_text == compiled
        whole = compile_routes({str(p): d for p, d in by_network.items()})
        assert whole == compile_routes(by_network)  # type: ignore[arg-type]
        for family in (IPV4_UNICAST, IPV6_UNICAST):
            assert from_text.with_path_ids(family) == compiled.with_path_ids(family)


async def test_a_whole_table_is_encoded_while_the_event_loop_goes_on(monkeypatch: Any) -> None:
    # A node speaker's first table (10,000 Services: a second of CPU under load) must not
    # hold the loop past BFD's 300 ms or the hold time: the session would go down.
    speaker = Speaker(local_as=64512, router_id="192.0.2.11", listen_port=None)
    peer = speaker.add_peer(PeerConfig(address="192.0.2.1", peer_as=64500))
    loop_ran = threading.Event()

    def compiling(routes: Any) -> Any:
        assert loop_ran.wait(5.0), "the event loop stood still while the table was encoded"
        return compile_routes(routes)

    monkeypatch.setattr(speaker_module, "compile_routes", compiling)
    many = {f"198.51.100.{i}/32": RouteAttributes() for i in range(100)}
    asyncio.get_running_loop().call_later(0.01, loop_ran.set)  # (a keepalive's timer)
    await speaker.replace_routes(many, peer="192.0.2.1")
    assert peer.rib_out.desired == compile_routes(many)
