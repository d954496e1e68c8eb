"""Our BGP speaker against BIRD 2, FRR 8, GoBGP 3 and ExaBGP 4, in network namespaces.

Each test runs our ``Speaker`` (via ``drive_speaker.py``) in host "node" and a real daemon
in host "peer" on one LAN, and reads the result back from the daemon: ``birdc``,
``vtysh ... json``, ``gobgp ... -j``, ExaBGP's JSON API. Timers are short (hold 3-9 s) so
failures are detected quickly; every wait is a condition polled against a deadline.
"""

from __future__ import annotations

import dataclasses

import pytest

from teapot_lb.lab.peers import Lab, Neighbor, Origination, Teapot, wait_fib
from teapot_lb.lab.wait import wait_for

from .conftest import OUR_AS, PEER_AS, DaemonFactory, Pair, PairFactory

DAEMONS = ["bird", "frr", "gobgp", "exabgp"]
GR_HELPERS = ["bird", "frr", "gobgp"]  # ExaBGP forgets a peer's routes when it goes down

# What we announce: attributes on one route of each family, a plain one beside it.
V4_RICH = Origination(
    "198.51.100.10/32",
    communities=("65000:100", "65000:200"),
    large_communities=(f"{OUR_AS}:1:2",),
    local_pref=250,
)
V4_PLAIN = Origination("198.51.100.11/32")
V6_RICH = Origination(
    "2001:db8:10::10/128",
    communities=("65000:600",),
    large_communities=(f"{OUR_AS}:6:6",),
    local_pref=260,
)
V6_PLAIN = Origination("2001:db8:10::11/128")
OURS = [V4_RICH, V4_PLAIN, V6_RICH, V6_PLAIN]
# What the daemon announces to us.
THEIRS = [Origination("203.0.113.5/32"), Origination("2001:db8:20::5/128")]


def prefixes(routes: list[Origination]) -> set[str]:
    return {o.prefix for o in routes}


@pytest.mark.parametrize("session", ["ebgp", "ibgp"])
@pytest.mark.parametrize("transport", [4, 6], ids=["v4transport", "v6transport"])
@pytest.mark.parametrize("daemon", DAEMONS)
def test_routes_are_announced_learned_and_withdrawn(
    bgp_pair: PairFactory, lab: Lab, daemon: str, transport: int, session: str
) -> None:
    ibgp = session == "ibgp"
    pair = bgp_pair(
        daemon, transport=transport, ibgp=ibgp, our_originate=OURS, peer_originate=THEIRS
    )
    peer, ours = pair.peer, pair.ours

    rib = peer.wait_routes(lambda r: prefixes(OURS) <= r.keys(), what="our four routes")
    as_path = () if ibgp else (OUR_AS,)
    for o in OURS:
        entry = rib[o.prefix]
        assert entry.next_hops == {lab.addr("node", o.version)}, o.prefix
        assert entry.communities == set(o.communities), o.prefix
        assert entry.large_communities == set(o.large_communities), o.prefix
        assert entry.as_path == as_path, o.prefix
        if ibgp:  # LOCAL_PREF only crosses iBGP sessions (RFC 4271 §5.1.5)
            assert entry.local_pref == (o.local_pref or 100), o.prefix

    learned = ours.wait_routes(lambda r: prefixes(THEIRS) <= r.keys(), what="the peer's routes")
    for o in THEIRS:
        assert learned[o.prefix].next_hops == {lab.addr("peer", o.version)}, o.prefix
        assert learned[o.prefix].as_path == (() if ibgp else (PEER_AS,)), o.prefix

    ours.set_routes([V4_RICH, V6_RICH])
    rib = peer.wait_routes(
        lambda r: not ({V4_PLAIN.prefix, V6_PLAIN.prefix} & r.keys()), what="withdrawals"
    )
    assert {V4_RICH.prefix, V6_RICH.prefix} <= rib.keys()
    assert pair.peer.session_state(pair.our_addr) == "established"


def start_md5_mismatch(bgp_pair: PairFactory, daemon: str) -> Pair:
    """Peer and us with different TCP MD5 keys; returns once we tried to connect 3 times."""
    pair = bgp_pair(
        daemon, peer_password="right-key", our_password="wrong-key", hold_time=3, wait=False,
        our_originate=[V4_PLAIN],
    )  # fmt: skip
    # Segments signed with the wrong key are dropped by the kernel: connects go unanswered.
    wait_for(
        lambda: pair.ours.info(pair.peer_addr)["counters"]["connect_attempts"] >= 3,
        timeout=60,
        what="three connect attempts",
        detail=pair.ours.log_tail,
    )
    return pair


@pytest.mark.parametrize("daemon", DAEMONS)
def test_md5_mismatch_stays_down_and_matching_keys_come_up(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = start_md5_mismatch(bgp_pair, daemon)
    ours, peer = pair.ours, pair.peer
    assert ours.session_state(pair.peer_addr) != "established"
    assert peer.session_state(pair.our_addr) != "established"

    ours.stop()
    ours.neighbors = [dataclasses.replace(n, password="right-key") for n in ours.neighbors]
    ours.start()
    pair.wait_up()
    peer.wait_routes(lambda r: V4_PLAIN.prefix in r, what="our route over the MD5 session")


def test_md5_mismatch_is_logged_naming_the_peer(bgp_pair: PairFactory) -> None:
    # Our log, whatever the peer: BIRD stands for all of them.
    pair = start_md5_mismatch(bgp_pair, "bird")
    assert_logged(pair.ours, pair.peer_addr, "md5")


@pytest.mark.parametrize("daemon", DAEMONS)
def test_peer_with_unexpected_asn_gets_bad_peer_as_notification(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(daemon, our_view_of_peer_as=65099, hold_time=3, wait=False)
    ours = pair.ours
    wait_for(
        lambda: ours.info(pair.peer_addr)["counters"]["notifications_sent"] >= 1,
        timeout=30,
        what="a NOTIFICATION from us",
        detail=ours.log_tail,
    )
    assert ours.session_state(pair.peer_addr) != "established"
    # RFC 4271 §6.2: OPEN Message Error (2) / Bad Peer AS (2).
    assert_logged(ours, pair.peer_addr, "bad peer as", "65099")
    if daemon in ("bird", "frr"):
        wait_for(
            lambda: "bad peer as" in pair.peer.last_error(pair.our_addr).lower(),
            timeout=15,
            what=f"{daemon} to report our Bad Peer AS",
        )


@pytest.mark.parametrize("daemon", DAEMONS)
def test_notification_from_a_peer_expecting_another_asn_is_logged(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(daemon, peer_view_of_our_as=65098, hold_time=3, wait=False)
    ours = pair.ours
    wait_for(
        lambda: ours.info(pair.peer_addr)["counters"]["notifications_received"] >= 1,
        timeout=30,
        what="a NOTIFICATION from the peer",
        detail=ours.log_tail,
    )
    assert ours.session_state(pair.peer_addr) != "established"
    assert_logged(ours, pair.peer_addr, "bad peer as")


# GoBGP's `softresetin` re-filters its Adj-RIB-In without asking; ExaBGP only sends a
# refresh through its API. BIRD (`reload in`) and FRR (`clear bgp X soft in`) ask.
@pytest.mark.parametrize("daemon", ["bird", "frr"])
def test_route_refresh_from_the_peer_gets_everything_sent_again(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(daemon, our_originate=OURS)
    ours, peer = pair.ours, pair.peer
    peer.wait_routes(lambda r: prefixes(OURS) <= r.keys(), what="our routes")
    sent = ours.info(pair.peer_addr)["counters"]["updates_sent"]
    peer.request_refresh(pair.our_addr)  # ROUTE-REFRESH (RFC 2918) for each family
    wait_for(
        lambda: ours.info(pair.peer_addr)["counters"]["updates_sent"] >= sent + 2,
        timeout=15,
        what="our UPDATEs answering the refresh",
        detail=ours.log_tail,
    )
    assert pair.peer.session_state(pair.our_addr) == "established"
    assert prefixes(OURS) <= peer.routes().keys()


@pytest.mark.parametrize("daemon", DAEMONS)
def test_hold_timer_expires_when_the_peer_goes_silent(bgp_pair: PairFactory, daemon: str) -> None:
    pair = bgp_pair(daemon, hold_time=3, our_originate=[V4_PLAIN])
    ours, peer = pair.ours, pair.peer
    peer.wait_routes(lambda r: V4_PLAIN.prefix in r, what="our route")
    peer.pause()  # SIGSTOP: its TCP session stays open, no more KEEPALIVEs
    try:
        ours.wait_not_established(pair.peer_addr, timeout=15)
        assert_logged(ours, pair.peer_addr, "hold timer expired")
    finally:
        peer.resume()
    # Once the peer wakes up, the session comes back and so does our route.
    pair.wait_up(timeout=60)
    peer.wait_routes(lambda r: V4_PLAIN.prefix in r, what="our route after recovery")


@pytest.mark.parametrize("daemon", DAEMONS)
def test_peer_restart_reconnects_and_reannounces_everything(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(daemon, hold_time=9, our_originate=OURS)
    ours, peer = pair.ours, pair.peer
    peer.wait_routes(lambda r: prefixes(OURS) <= r.keys(), what="our routes")
    peer.restart()  # a new process: its RIB starts empty
    pair.wait_up(timeout=60)
    peer.wait_routes(lambda r: prefixes(OURS) <= r.keys(), what="our routes after its restart")
    assert ours.info(pair.peer_addr)["counters"]["established"] >= 2


@pytest.mark.parametrize("daemon", DAEMONS)
def test_graceful_stop_removes_our_routes_at_once(bgp_pair: PairFactory, daemon: str) -> None:
    pair = bgp_pair(daemon, hold_time=90, our_originate=[V4_PLAIN, V6_PLAIN])
    ours, peer = pair.ours, pair.peer
    peer.wait_routes(lambda r: {V4_PLAIN.prefix, V6_PLAIN.prefix} <= r.keys(), what="our routes")
    ours.stop()  # SIGTERM: Cease / Administrative Shutdown
    # Far sooner than the 90 s hold time: the peer heard us leave.
    peer.wait_routes(lambda r: not r, timeout=15, what="our routes gone")
    assert peer.session_state(pair.our_addr) != "established"


@pytest.mark.parametrize("daemon", GR_HELPERS)
def test_graceful_restart_keeps_our_routes_at_the_peer_across_our_restart(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(
        daemon, hold_time=9, graceful_restart=True, our_originate=[V4_RICH, V4_PLAIN, V6_RICH]
    )
    ours, peer = pair.ours, pair.peer
    everything = {V4_RICH.prefix, V4_PLAIN.prefix, V6_RICH.prefix}
    peer.wait_routes(lambda r: everything <= r.keys(), what="our routes")

    ours.kill()  # a crash: no NOTIFICATION, the kernel closes the TCP connection
    peer.wait_not_established(pair.our_addr, timeout=15)
    assert everything <= peer.routes().keys(), "the helper dropped our routes during restart"

    # We come back restarting (R bit) without V4_PLAIN: after our End-of-RIB the peer
    # sweeps the stale route we did not re-announce and keeps the others.
    ours.originate = [V4_RICH, V6_RICH]
    ours.restarting = True
    ours.start()
    pair.wait_up()
    rib = peer.wait_routes(
        lambda r: V4_PLAIN.prefix not in r and {V4_RICH.prefix, V6_RICH.prefix} <= r.keys(),
        what="stale route swept after End-of-RIB",
    )
    assert rib[V4_RICH.prefix].communities == set(V4_RICH.communities)


@pytest.mark.parametrize("daemon", DAEMONS)
def test_we_keep_a_restarting_peers_routes_as_graceful_restart_helper(
    bgp_pair: PairFactory, daemon: str
) -> None:
    pair = bgp_pair(daemon, hold_time=9, graceful_restart=True, peer_originate=THEIRS)
    ours, peer = pair.ours, pair.peer
    ours.wait_routes(lambda r: prefixes(THEIRS) <= r.keys(), what="the peer's routes")

    peer.kill()  # the peer crashes: TCP closes, no NOTIFICATION (RFC 4724 §4.2)
    ours.wait_not_established(pair.peer_addr, timeout=15)
    assert prefixes(THEIRS) <= ours.routes().keys(), "we dropped the restarting peer's routes"

    peer.start()
    pair.wait_up()
    learned = ours.wait_routes(lambda r: prefixes(THEIRS) <= r.keys(), what="routes after")
    assert learned[THEIRS[0].prefix].next_hops == {pair.lab.addr("peer", 4)}


@pytest.mark.parametrize("router", ["bird", "frr"])
def test_router_fib_has_one_ecmp_nexthop_per_speaker(
    lab: Lab, make_daemon: DaemonFactory, router: str
) -> None:
    lab.add("router")
    nodes = ["node1", "node2", "node3"]
    for node in nodes:
        lab.add(node)
    make_daemon(
        router, "router", asn=PEER_AS, fib=True,
        neighbors=[
            Neighbor(lab.v4[n], OUR_AS, local_address=lab.v4["router"], hold_time=30)
            for n in nodes
        ],
    )  # fmt: skip
    vips = [Origination("203.0.113.10/32"), Origination("2001:db8:10::10/128")]
    speakers = [
        make_daemon(
            "teapot",
            n,
            asn=OUR_AS,
            originate=vips,
            neighbors=[Neighbor(lab.v4["router"], PEER_AS, local_address=lab.v4[n], hold_time=30)],
        )
        for n in nodes
    ]
    host = lab.hosts["router"]
    for vip in vips:
        wait_fib(host, vip.prefix, {lab.addr(n, vip.version) for n in nodes})

    speakers[0].stop()
    for vip in vips:
        # Well inside the 30 s hold time: the stopping speaker said goodbye.
        wait_fib(host, vip.prefix, {lab.addr(n, vip.version) for n in nodes[1:]}, timeout=10)


def assert_logged(ours: Teapot, peer: str, *words: str) -> None:
    """Our log has one line naming ``peer`` that contains every word (case-insensitive)."""
    for line in ours.log_text().splitlines():
        low = line.lower()
        if peer in line and all(w.lower() in low for w in words):
            return
    raise AssertionError(f"no log line about {peer} with {words}:\n{ours.log_tail()}")
