"""The daemon harness itself, proven daemon to daemon before our speaker joins in."""

from __future__ import annotations

from teapot_lb.lab.peers import Lab, Neighbor, Origination, RibEntry, parse_bird_routes, wait_fib

from .conftest import DaemonFactory

AS_A = 4_200_000_001  # 4-byte ASNs (RFC 6793)
AS_B = 4_200_000_002


def test_gobgp_and_bird_exchange_routes_with_communities(
    lab: Lab, make_daemon: DaemonFactory
) -> None:
    lab.add("bird")
    lab.add("gobgp")
    bird = make_daemon(
        "bird", "bird", asn=AS_A,
        neighbors=[Neighbor(lab.v4["gobgp"], AS_B, hold_time=3)],
        originate=[
            Origination(
                "198.51.100.1/32", communities=("65000:1",), large_communities=("65000:1:2",)
            ),
            Origination("2001:db8:1::1/128"),
        ],
    )  # fmt: skip
    gobgp = make_daemon(
        "gobgp", "gobgp", asn=AS_B,
        neighbors=[Neighbor(lab.v4["bird"], AS_A, hold_time=3)],
        originate=[Origination("198.51.100.2/32", communities=("65000:7",))],
    )  # fmt: skip
    bird.wait_established(lab.v4["gobgp"])
    gobgp.wait_established(lab.v4["bird"])

    at_gobgp = gobgp.wait_routes(
        lambda rib: {"198.51.100.1/32", "2001:db8:1::1/128"} <= rib.keys(), what="BIRD's routes"
    )
    assert at_gobgp["198.51.100.1/32"] == RibEntry(
        next_hops=frozenset({lab.v4["bird"]}),
        communities=frozenset({"65000:1"}),
        large_communities=frozenset({"65000:1:2"}),
        as_path=(AS_A,),
    )
    assert at_gobgp["2001:db8:1::1/128"].next_hops == {lab.v6["bird"]}

    at_bird = bird.wait_routes(lambda rib: "198.51.100.2/32" in rib, what="GoBGP's route")
    assert at_bird["198.51.100.2/32"].next_hops == {lab.v4["gobgp"]}
    assert at_bird["198.51.100.2/32"].communities == {"65000:7"}
    assert at_bird["198.51.100.2/32"].as_path == (AS_B,)


def test_exabgp_announces_to_frr_over_ipv6_and_withdraws_when_stopped(
    lab: Lab, make_daemon: DaemonFactory
) -> None:
    lab.add("frr")
    lab.add("exa")
    frr = make_daemon(
        "frr", "frr", asn=65001,
        neighbors=[Neighbor(lab.v6["exa"], 65002, hold_time=3)],
        originate=[Origination("198.51.100.1/32")],
    )  # fmt: skip
    exa = make_daemon(
        "exabgp", "exa", asn=65002,
        neighbors=[Neighbor(lab.v6["frr"], 65001, local_address=lab.v6["exa"], hold_time=3)],
        originate=[
            Origination("2001:db8:2::1/128", large_communities=("65002:0:1",)),
            Origination("198.51.100.2/32", communities=("65002:9",)),
        ],
    )  # fmt: skip
    frr.wait_established(lab.v6["exa"])
    exa.wait_established(lab.v6["frr"])

    at_frr = frr.wait_routes(
        lambda rib: {"2001:db8:2::1/128", "198.51.100.2/32"} <= rib.keys(), what="ExaBGP's routes"
    )
    assert at_frr["2001:db8:2::1/128"].next_hops == {lab.v6["exa"]}
    assert at_frr["2001:db8:2::1/128"].large_communities == {"65002:0:1"}
    assert at_frr["198.51.100.2/32"].communities == {"65002:9"}
    assert at_frr["198.51.100.2/32"].as_path == (65002,)

    at_exa = exa.wait_routes(lambda rib: "198.51.100.1/32" in rib, what="FRR's route")
    assert at_exa["198.51.100.1/32"].as_path == (65001,)

    exa.stop()
    frr.wait_routes(lambda rib: not rib, what="ExaBGP's routes gone")


def test_frr_router_installs_one_ecmp_nexthop_per_speaker(
    lab: Lab, make_daemon: DaemonFactory
) -> None:
    lab.add("router")
    speakers = ["s1", "s2"]
    for s in speakers:
        lab.add(s)
    router = make_daemon(
        "frr", "router", asn=65000, fib=True,
        neighbors=[Neighbor(lab.v4[s], 65100, hold_time=3) for s in speakers],
    )  # fmt: skip
    vip = Origination("203.0.113.10/32")
    bird = make_daemon(
        "bird", "s1", asn=65100, originate=[vip],
        neighbors=[Neighbor(lab.v4["router"], 65000, hold_time=3)],
    )  # fmt: skip
    make_daemon(
        "gobgp", "s2", asn=65100, originate=[vip],
        neighbors=[Neighbor(lab.v4["router"], 65000, hold_time=3)],
    )  # fmt: skip
    host = lab.hosts["router"]
    both = {lab.v4["s1"], lab.v4["s2"]}
    router.wait_routes(lambda rib: vip.prefix in rib and rib[vip.prefix].next_hops == both,
                       what="both paths")  # fmt: skip
    wait_fib(host, vip.prefix, both)

    bird.stop()
    wait_fib(host, vip.prefix, {lab.v4["s2"]})


def test_bird_router_installs_one_ecmp_nexthop_per_speaker(
    lab: Lab, make_daemon: DaemonFactory
) -> None:
    lab.add("router")
    speakers = ["s1", "s2"]
    for s in speakers:
        lab.add(s)
    make_daemon(
        "bird", "router", asn=65000, fib=True,
        neighbors=[Neighbor(lab.v6[s], 65100, hold_time=3) for s in speakers],
    )  # fmt: skip
    vip = Origination("2001:db8:10::10/128")
    make_daemon(
        "frr", "s1", asn=65100, originate=[vip],
        neighbors=[Neighbor(lab.v6["router"], 65000, hold_time=3)],
    )  # fmt: skip
    exa = make_daemon(
        "exabgp", "s2", asn=65100, originate=[vip],
        neighbors=[Neighbor(lab.v6["router"], 65000, local_address=lab.v6["s2"], hold_time=3)],
    )  # fmt: skip
    host = lab.hosts["router"]
    wait_fib(host, vip.prefix, {lab.v6["s1"], lab.v6["s2"]})

    exa.kill()  # no Cease: the router only sees the TCP connection close
    wait_fib(host, vip.prefix, {lab.v6["s1"]})


BIRD_SHOW_ROUTE_ALL = """\
Table master4:
198.51.100.2/32      unicast [peer0 1796220414.476] * (100) [AS4200000002i]
\tvia 192.0.2.2 on eth0
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 4200000002
\tBGP.next_hop: 192.0.2.2
\tBGP.local_pref: 100
\tBGP.community: (65000,7) (65000,8)
\tBGP.large_community: (65000, 1, 3)
                     unicast [peer1 1796220415.001] (100) [AS4200000002i]
\tvia 192.0.2.3 on eth0
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 4200000002
\tBGP.next_hop: 192.0.2.3
\tBGP.local_pref: 100
198.51.100.1/32      blackhole [static4 1796220410.463] * (200)
\tType: static univ

Table master6:
2001:db8:2::1/128    unicast [peer0 1796220414.488 from 192.0.2.2] * (100) [AS4200000002i]
\tvia 2001:db8::2 on eth0
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 4200000002 65010
\tBGP.next_hop: 2001:db8::2 fe80::c826:9bff:fe53:165
\tBGP.local_pref: 100
"""


def test_bird_route_parser_merges_paths_and_skips_local_routes() -> None:
    rib = parse_bird_routes(BIRD_SHOW_ROUTE_ALL)
    assert rib == {
        "198.51.100.2/32": RibEntry(
            next_hops=frozenset({"192.0.2.2", "192.0.2.3"}),
            communities=frozenset({"65000:7", "65000:8"}),
            large_communities=frozenset({"65000:1:3"}),
            local_pref=100,
            as_path=(AS_B,),
        ),
        "2001:db8:2::1/128": RibEntry(
            next_hops=frozenset({"2001:db8::2"}), local_pref=100, as_path=(AS_B, 65010)
        ),
    }
