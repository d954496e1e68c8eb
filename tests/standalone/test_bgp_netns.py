"""BGP mode end to end: three `teapot-lb run` nodes, a BIRD router with ECMP, a client.

One lab per module (building it costs seconds); the tests run in order and each leaves
the manifests as the next one expects.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import (
    EXCLUDE,
    NODES,
    NODES6,
    ROUTER_LAN,
    ROUTER_LAN6,
    Lab,
    endpoints,
    node,
    ours,
    service,
    write,
    write_text,
)
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

WEB = "203.0.113.10"
LOCAL = "203.0.113.11"
WEB6 = "2001:db8:ff::10"
PREFIX = f"{WEB}/32"
METRICS = "127.0.0.1:7472"


SERVICES_START = [
    service("web", WEB),
    service("web6", WEB6, ipFamilies=["IPv6"]),
    service("local", LOCAL, externalTrafficPolicy="Local"),
    endpoints("local", "n2"),
]


def config_docs(communities: list[str]) -> list[dict[str, object]]:
    return [
        ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
        ours("AddressPool", "public6", {"addresses": ["2001:db8:ff::/120"]}),
        ours(
            "BGPPeer",
            "router",
            {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER_LAN, "holdTime": "9s"},
        ),
        ours(
            "BGPAdvertisement",
            "public",
            {"addressPools": ["public", "public6"], "communities": communities},
        ),
    ]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Bird]]:
    require_root()
    require_binary("bird", "birdc")
    workdir = tmp_path_factory.mktemp("bgp-lab")
    with Topology("sbgp") as topo:
        lab = Lab(topo, workdir)
        lab.bind_service_ip(WEB)
        lab.bind_service_ip(LOCAL)
        lab.bind_service_ip(WEB6)
        write(lab.manifests / "config.yaml", config_docs(["64512:100"]))
        write(lab.manifests / "nodes.yaml", [node(n) for n in NODES])
        write(
            lab.manifests / "services.yaml",
            SERVICES_START,
        )
        bird = Bird(
            lab.router,
            workdir / "bird",
            asn=64500,
            router_id=ROUTER_LAN,
            neighbors=[Neighbor(address=a, asn=64512, hold_time=9) for a in NODES.values()],
            fib=True,
            local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )
        bird.start()
        lab.start_all(modes="bgp", extra=["--metrics-address", METRICS])
        try:
            yield lab, bird
        finally:
            lab.kill_all()
            bird.stop()


def same_session(bird: Bird, lab: Lab, node: str, since: float | None) -> bool:
    """The session of `node` was not reset: BIRD shows the same start (its clock display
    jitters by a millisecond; a reset takes over a second, BIRD's connect delay) and our
    side counts one Established."""
    now = bird.established_at(NODES[node])
    peers = lab.status(node)["bgp"]["peers"]
    return (
        since is not None
        and now is not None
        and abs(now - since) < 0.5
        and peers["router"]["times_established"] == 1
    )


def hops(lab: Lab, prefix: str) -> frozenset[str]:
    return fib_next_hops(lab.router, prefix) or frozenset()


def explain(lab: Lab, svc: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "teapot_lb.cli.explain", svc, "--manifests", str(lab.manifests),
         "--state-root", str(lab.workdir / "state"), "-o", "json"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return dict(json.loads(out.stdout))


def bgp_rows(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    rows = doc["decisions"]
    assert isinstance(rows, list)
    return {str(r["node"]): r for r in rows if r["mode"] == "bgp"}


def test_service_reachable_through_router_with_ecmp_over_all_nodes(lab: tuple[Lab, Bird]) -> None:
    lab_, bird = lab
    for a in NODES.values():
        bird.wait_established(a, timeout=30)
    all_nodes = frozenset(NODES.values())
    wait_for(lambda: hops(lab_, PREFIX) == all_nodes, timeout=20, what="ECMP over 3 nodes")
    assert wait_for(lambda: lab_.who(WEB), timeout=10, what="client reaches web") in NODES


def test_ipv6_service_gets_ecmp_over_the_nodes_ipv6_addresses(lab: tuple[Lab, Bird]) -> None:
    lab_, _ = lab
    want = frozenset(NODES6.values())
    wait_for(lambda: hops(lab_, f"{WEB6}/128") == want, timeout=20, what="IPv6 ECMP")
    assert wait_for(lambda: lab_.who(WEB6), timeout=10, what="client reaches web6") in NODES


def test_metrics_and_health_are_served(lab: tuple[Lab, Bird]) -> None:
    lab_, bird = lab
    bird.wait_established(NODES["n1"], timeout=30)
    text = wait_for(
        lambda: (
            (t := lab_.fetch("n1", f"http://{METRICS}/metrics"))
            and 'teapot_lb_speaker_bgp_session_up{peer="router"} 1.0' in t
            and t
        ),
        timeout=10,
        what="session up in the metrics",
    )
    assert 'teapot_lb_speaker_bgp_prefixes_desired{peer="router"}' in text
    assert "teapot_lb_speaker_plan_duration_seconds" in text
    assert lab_.fetch("n1", f"http://{METRICS}/healthz").strip() == "ok"
    assert lab_.fetch("n1", f"http://{METRICS}/readyz").strip() == "ok"


def test_local_policy_announces_only_from_nodes_with_endpoints_and_follows_them(
    lab: tuple[Lab, Bird],
) -> None:
    lab_, _ = lab
    prefix = f"{LOCAL}/32"
    wait_for(lambda: hops(lab_, prefix) == {NODES["n2"]}, timeout=20, what="only n2 announces")
    assert wait_for(lambda: lab_.who(LOCAL), timeout=10, what="client reaches local") == "n2"
    write(
        lab_.manifests / "services.yaml",
        [*SERVICES_START[:3], endpoints("local", "n3")],
    )
    wait_for(lambda: hops(lab_, prefix) == {NODES["n3"]}, timeout=20, what="moved to n3")
    assert wait_for(lambda: lab_.who(LOCAL), timeout=10, what="client reaches local") == "n3"
    rows = bgp_rows(explain(lab_, "default/local"))
    assert rows["n3"]["announces"] is True
    assert rows["n2"]["announces"] is False
    assert "no local endpoint" in str(rows["n2"]["reason"])


def test_communities_change_updates_routes_without_session_reset(lab: tuple[Lab, Bird]) -> None:
    lab_, bird = lab
    peer = NODES["n1"]
    wait_for(
        lambda: "64512:100" in bird.routes().get(PREFIX, _Empty).communities,
        timeout=20,
        what="first community at the router",
    )
    since = bird.established_at(peer)
    assert since is not None
    write(lab_.manifests / "config.yaml", config_docs(["64512:200"]))
    wait_for(
        lambda: bird.routes().get(PREFIX, _Empty).communities == {"64512:200"},
        timeout=20,
        what="new community at the router",
    )
    assert same_session(bird, lab_, "n1", since), "the BGP session was reset"
    assert lab_.status("n1")["bgp"]["session_resets"] == 0


def test_node_excluded_by_label_stops_announcing(lab: tuple[Lab, Bird]) -> None:
    lab_, bird = lab
    since = bird.established_at(NODES["n3"])
    write(lab_.manifests / "nodes.yaml", [node("n1"), node("n2"), node("n3", **{EXCLUDE: ""})])
    try:
        want = frozenset({NODES["n1"], NODES["n2"]})
        wait_for(lambda: hops(lab_, PREFIX) == want, timeout=20, what="n3 withdrawn")
        assert same_session(bird, lab_, "n3", since), "excluding a node must not reset its session"
        rows = wait_for(
            lambda: (r := bgp_rows(explain(lab_, "default/web")))["n3"]["now"] == "no" and r,
            timeout=10,
            what="n3 reporting it stopped",
        )
        assert rows["n3"]["announces"] is False
        assert EXCLUDE in str(rows["n3"]["reason"])
        assert rows["n1"]["announces"] is True and rows["n1"]["now"] == "yes"
        table = subprocess.run(
            [sys.executable, "-m", "teapot_lb.cli.explain", "default/web", "--manifests",
             str(lab_.manifests)],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
        n3_line = next(line for line in table.splitlines() if line.startswith("n3"))
        assert "no" in n3_line.split() and "excluded" in n3_line
    finally:
        write(lab_.manifests / "nodes.yaml", [node(n) for n in NODES])
    wait_for(lambda: hops(lab_, PREFIX) == frozenset(NODES.values()), timeout=20, what="n3 back")


def test_a_broken_manifest_is_reported_and_everything_keeps_running(
    lab: tuple[Lab, Bird],
) -> None:
    lab_, bird = lab
    all_nodes = frozenset(NODES.values())
    wait_for(lambda: hops(lab_, PREFIX) == all_nodes, timeout=20, what="3 next hops")
    since = bird.established_at(NODES["n2"])
    # Written atomically like every edit (an in-place write can be read half done).
    write_text(lab_.manifests / "services.yaml", "- kind: [unclosed\n")
    write_text(lab_.manifests / "extra.yaml", "apiVersion: v1\nkind: Service\nspec: 3\n")
    try:
        wait_for(
            lambda: (
                any("services.yaml" in p for p in lab_.status("n2").get("problems", []))
                and any("extra.yaml" in p for p in lab_.status("n2").get("problems", []))
            ),
            timeout=10,
            what="the problems in n2's status",
        )
        assert hops(lab_, PREFIX) == all_nodes
        assert lab_.who(WEB) in NODES
        assert same_session(bird, lab_, "n2", since)
    finally:
        (lab_.manifests / "extra.yaml").unlink()
        write(lab_.manifests / "services.yaml", SERVICES_START)
    wait_for(lambda: lab_.status("n2").get("problems") == [], timeout=10, what="problems gone")


def test_sigterm_withdraws_routes_before_exit(lab: tuple[Lab, Bird]) -> None:
    lab_, bird = lab
    wait_for(
        lambda: hops(lab_, PREFIX) == frozenset(NODES.values()), timeout=20, what="3 next hops"
    )
    assert lab_.terminate("n1") == 0
    # Hold time is 9 s: seeing the route gone well before, with an Administrative
    # Shutdown received, means the speaker withdrew and said goodbye itself.
    want = frozenset({NODES["n2"], NODES["n3"]})
    wait_for(lambda: hops(lab_, PREFIX) == want, timeout=4, what="n1's next hop withdrawn")
    # (Read from the log: BIRD's "last error" is overwritten by its reconnect attempts.)
    proto = bird.protocol_name(NODES["n1"])
    assert f"{proto}: Received: Administrative shutdown" in bird.log_text()
    status = lab_.status("n1")
    assert status["stopped"] is True
    assert status["announcing"] == {}
    assert bgp_rows(explain(lab_, "default/web"))["n1"]["now"] == "stopped"
    assert lab_.who(WEB) in {"n2", "n3"}


class _EmptyEntry:
    communities: frozenset[str] = frozenset()


_Empty: Any = _EmptyEntry()
