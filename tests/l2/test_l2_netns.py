"""L2 mode end to end: three node namespaces emulating kube-proxy IPVS, a client, a bridge.

Every node runs ``teapot-lb run`` (the speaker's L2 backend, the product path) on one
manifest directory. Only the responder makes a Service IP reachable (the IPs sit on
``lo`` with ``arp_ignore``/``arp_announce``), so everything asserted here is teapot-lb's
doing: who answers on the wire, what the client's neighbour table holds, how it fails over.
"""

from __future__ import annotations

import functools
import signal
import socket
import threading
import time
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.announce.election import EXCLUDE_LABEL, ranking
from teapot_lb.l2 import wire
from teapot_lb.lab.capture import Sniffer
from teapot_lb.lab.lan import CLIENT4, CLIENT6, LanLab, service_doc
from teapot_lb.lab.manifests import config_doc
from teapot_lb.lab.netns import netns_socket
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

V4, V6 = "192.0.2.100", "2001:db8::100"
CONFIG = [
    config_doc("AddressPool", "lan", {"addresses": ["192.0.2.100-192.0.2.109",
                                                    "2001:db8::100-2001:db8::10f"]}),
    config_doc("L2Advertisement", "lan", {"addressPools": ["lan"]}),
]  # fmt: skip
SERVICES = [service_doc("web4", V4), service_doc("web6", V6)]


def order(lab: LanLab, ip: str) -> tuple[str, ...]:
    return ranking(ip_address(ip), lab.nodes)


def mac_of(lab: LanLab, node: str) -> bytes:
    return wire.parse_mac(lab.mac(node))


def on_wire(sniffer: Sniffer, ip: str) -> list[tuple[float, bytes, str]]:
    """Every (time, MAC, kind) a frame crossing the port bound ``ip`` to; kind is
    "answer" (ARP reply / solicited NA) or "announce" (gratuitous ARP / unsolicited NA)."""
    target = ip_address(ip)
    out: list[tuple[float, bytes, str]] = []
    for t, raw in list(sniffer.frames):
        try:
            frame = wire.decode(raw)
        except wire.WireError:
            continue
        if isinstance(frame, wire.ArpFrame):
            a = frame.arp
            if a.sender_ip == target:
                kind = "announce" if a.is_gratuitous else "answer"
                out.append((t, a.sender_mac, kind))
        elif isinstance(frame.message, wire.NeighborAdvertisement):
            na = frame.message
            if na.target == target:
                kind = "answer" if na.solicited else "announce"
                out.append((t, na.target_lladdr or frame.eth_src, kind))
    return out


def converged(lab: LanLab, ips: tuple[str, ...] = (V4, V6)) -> None:
    """Wait until every speaker is ready and hears every other one, and each IP is on its
    elected owner: the state every test starts from (speakers start at the host's pace)."""

    def hears_all(node: str) -> bool:
        l2 = lab.status(node).get("l2", {})
        return bool(l2.get("ready")) and set(l2.get("live_speakers", [])) == set(lab.nodes)

    def on_owner(ip: str) -> bool:
        return lab.who(ip) == order(lab, ip)[0]

    for node in lab.nodes:
        wait_for(functools.partial(hears_all, node), timeout=60, what=f"{node} hearing every peer",
                 detail=lab.logs)  # fmt: skip
    for ip in ips:
        wait_for(functools.partial(on_owner, ip), timeout=20, what=f"{ip} on its elected owner",
                 detail=lab.logs)  # fmt: skip


def started(lab: LanLab) -> Iterator[LanLab]:
    lab.write(CONFIG, SERVICES)
    lab.start_all()
    try:
        converged(lab)
        yield lab
    finally:
        print(lab.logs())  # shown by pytest when a test fails
        lab.close()


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[LanLab]:
    yield from started(LanLab(topology, tmp_path))


@pytest.fixture
def partitioned_lab(topology: Topology, tmp_path: Path) -> Iterator[LanLab]:
    yield from started(LanLab(topology, tmp_path, heartbeat_network=True))


@pytest.fixture
def sniffer(lab: LanLab) -> Iterator[Sniffer]:
    s = Sniffer(lab.switch.ns, lab.ports["client"])
    yield s
    s.close()


def flush_client(lab: LanLab) -> None:
    lab.client.ip("neigh", "flush", "dev", "eth0")


def claims(lab: LanLab, node: str, verdict: str, ip: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in lab.events(node, "claim")
        if e.get("verdict") == verdict and (ip is None or e.get("ip") == ip)
    ]


@pytest.mark.parametrize("ip", [V4, V6])
def test_client_reaches_the_ip_through_the_elected_owner(lab: LanLab, ip: str) -> None:
    owner = order(lab, ip)[0]
    assert lab.who(ip) == owner
    assert lab.client_neighbor(ip) == lab.mac(owner)


@pytest.mark.parametrize("ip", [V4, V6])
def test_non_owners_never_answer(lab: LanLab, sniffer: Sniffer, ip: str) -> None:
    owner = order(lab, ip)[0]
    for _ in range(5):
        flush_client(lab)
        assert lab.who(ip) == owner
    seen = on_wire(sniffer, ip)
    assert [k for _, _, k in seen].count("answer") >= 3  # the capture did see answers
    assert {mac for _, mac, _ in seen} == {mac_of(lab, owner)}


@pytest.mark.parametrize("ip", [V4, V6])
def test_killing_the_owner_moves_the_ip_with_an_announcement(
    lab: LanLab, sniffer: Sniffer, ip: str
) -> None:
    old, new = order(lab, ip)[:2]
    assert lab.who(ip) == old
    killed_at = time.monotonic()
    lab.kill(old)
    lab.link(old, up=False)
    wait_for(lambda: lab.who(ip) == new, timeout=10, what=f"{ip} served by {new}")
    assert lab.client_neighbor(ip) == lab.mac(new)
    announced = [
        t for t, mac, kind in on_wire(sniffer, ip) if kind == "announce" and mac == mac_of(lab, new)
    ]
    assert announced and announced[0] > killed_at


def test_ownership_follows_the_services_and_the_nodes_labels(lab: LanLab) -> None:
    """What the speaker's informers change at run time: a Service going away is released
    at once, a node labelled out of load balancing hands its IPs to the next one."""
    lab.write(services=[service_doc("web6", V6)])  # web4 deleted (its IP stays on lo)

    def unanswered() -> bool:
        flush_client(lab)  # the client asks the link again
        return lab.who(V4) is None

    wait_for(unanswered, timeout=10, what=f"nobody answering ARP for {V4}")

    # (status.json follows the data plane: it is written once the step has reported)
    def reported(node: str) -> list[str]:
        return list(lab.status(node).get("l2", {}).get("owned", [V4, V6]))

    wait_for(lambda: all(V4 not in reported(n) for n in lab.nodes), timeout=5,
             what=f"no node reporting {V4}")  # fmt: skip
    owner, second = order(lab, V6)[:2]
    assert lab.who(V6) == owner
    lab.label(owner, **{EXCLUDE_LABEL: "true"})
    wait_for(lambda: lab.who(V6) == second, timeout=10, what=f"{V6} moved to {second}")
    wait_for(lambda: V6 not in reported(owner), timeout=5, what=f"{owner} not reporting {V6}")
    lab.label(owner)
    wait_for(lambda: lab.who(V6) == owner, timeout=10, what=f"{V6} back on {owner}")


class Prober:
    """Asks the link for ``ip`` every 20 ms from the client, as the client's kernel would."""

    def __init__(self, lab: LanLab, ip: str) -> None:
        self.sock = netns_socket(lab.client.ns, socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind(("eth0", 0))
        mac = wire.parse_mac(lab.client.mac("eth0"))
        target = ip_address(ip)
        frame: wire.Frame = (
            wire.arp_request(mac, IPv4Address(CLIENT4), target)
            if isinstance(target, IPv4Address)
            else wire.neighbor_solicitation(mac, IPv6Address(CLIENT6), target)
        )
        self.frame = wire.encode(frame)
        self.sent: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.sent.append(time.monotonic())
            self.sock.send(self.frame)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.mark.parametrize("ip", [V4, V6])
def test_the_old_owner_coming_back_never_causes_two_answers(
    lab: LanLab, sniffer: Sniffer, ip: str
) -> None:
    old, new = order(lab, ip)[:2]
    lab.kill(old)
    lab.link(old, up=False)
    wait_for(lambda: lab.who(ip) == new, timeout=10, what=f"{ip} served by {new}")
    prober = Prober(lab, ip)
    try:
        back_at = time.monotonic()
        lab.link(old, up=True)
        lab.start(old)
        wait_for(lambda: lab.who(ip) == old, timeout=30, what=f"{ip} back on {old}")
        moved_at = time.monotonic()
        # Keep probing a little after the move, to catch a late second answer.
        wait_for(lambda: prober.sent[-1] > moved_at + 0.3, timeout=5, what="more probes")
    finally:
        prober.close()
    seen = [(t, mac) for t, mac, _ in on_wire(sniffer, ip) if t >= back_at]
    new_mac, old_mac = mac_of(lab, new), mac_of(lab, old)
    first_old = min(t for t, mac in seen if mac == old_mac)
    assert all(t < first_old for t, mac in seen if mac == new_mac), "both nodes answered"
    assert {mac for _, mac in seen} <= {new_mac, old_mac}
    assert len(prober.sent) > 10


@pytest.mark.parametrize("ip", [V4, V6])
def test_heartbeat_partition_resolves_to_the_better_ranked_owner_in_one_round_trip(
    partitioned_lab: LanLab, ip: str
) -> None:
    """Documented in docs/l2.md: with heartbeats cut but the data path up, the standby takes
    the IP, the sitting owner sees its announcement and defends, the standby yields."""
    lab = partitioned_lab
    owner, standby = order(lab, ip)[:2]
    sniffer = Sniffer(lab.switch.ns, lab.ports["client"])
    try:
        lab.link(owner, up=False, ifname="eth1")  # heartbeats cut, ARP/NDP path intact
        wait_for(lambda: claims(lab, standby, "yield", ip), timeout=10,
                 what=f"{standby} yielding {ip}")  # fmt: skip
        # The standby must stay silent for the whole partition: longer than the claim hold
        # (3 s), so it would have claimed again had the owner stopped defending.
        time.sleep(4.5)  # an observation window, not a wait for a condition
        seen = on_wire(sniffer, ip)
    finally:
        sniffer.close()
    standby_claims = [t for t, mac, _ in seen if mac == mac_of(lab, standby)]
    assert standby_claims, "the standby never took the IP: the partition was not exercised"
    assert max(standby_claims) - min(standby_claims) < 0.3
    assert seen[-1][1] == mac_of(lab, owner)
    assert claims(lab, owner, "defend")
    assert lab.client_neighbor(ip) == lab.mac(owner)
    assert lab.who(ip) == owner

    lab.link(owner, up=True, ifname="eth1")  # healed: one view again, the owner stays
    wait_for(
        lambda: any(
            (e["member"], e["old"], e["new"]) == (owner, "dead", "alive")
            for e in lab.events(standby, "member")
        ),
        timeout=10,
        what=f"{standby} hearing {owner} again",
    )
    assert lab.who(ip) == owner


def test_malformed_frames_on_the_wire_are_ignored(lab: LanLab) -> None:
    sock = netns_socket(lab.client.ns, socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(("eth0", 0))
    mac = wire.parse_mac(lab.client.mac("eth0"))
    good_arp = wire.encode(wire.arp_request(mac, IPv4Address(CLIENT4), IPv4Address(V4)))
    good_ns = wire.encode(wire.neighbor_solicitation(mac, IPv6Address(CLIENT6), IPv6Address(V6)))
    try:
        for i in range(300):
            frame = bytearray(good_arp if i % 2 else good_ns)
            frame[14 + (i * 7) % (len(frame) - 14)] ^= 1 + i % 255  # corrupt one byte
            sock.send(bytes(frame[: 20 + i % 60]))
    finally:
        sock.close()
    assert all(lab.speaker(n).poll() is None for n in lab.nodes)
    flush_client(lab)
    for ip in (V4, V6):
        assert lab.who(ip) == order(lab, ip)[0]


def test_a_gracefully_stopped_owner_hands_over_at_once(lab: LanLab) -> None:
    old, new = order(lab, V4)[:2]
    assert lab.stop(old) == 0
    wait_for(lambda: lab.who(V4) == new, timeout=10, what=f"{V4} served by {new}")
    assert any(
        (e["member"], e["new"], e["reason"]) == (old, "dead", "left")
        for e in lab.events(new, "member")
    )


def test_only_the_owner_joins_the_solicited_node_group_of_an_ipv6_ip(lab: LanLab) -> None:
    owner = order(lab, V6)[0]
    group = str(wire.solicited_node(IPv6Address(V6)))
    for name, node in lab.nodes.items():
        joined = group in node.host.ip("-6", "maddr", "show", "dev", "eth0")
        assert joined == (name == owner), name


def test_requests_on_an_interface_outside_the_ips_subnet_are_not_answered(
    partitioned_lab: LanLab,
) -> None:
    lab = partitioned_lab
    owner = order(lab, V4)[0]
    assert lab.hb_switch is not None
    prober = lab.topology.add_host("probe")
    port = lab.topology.connect(prober, lab.hb_switch, addrs=["198.51.100.99/24"])
    sniffer = Sniffer(lab.hb_switch.ns, port)
    sock = netns_socket(prober.ns, socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(("eth0", 0))
    mac = wire.parse_mac(prober.mac("eth0"))
    request = wire.encode(wire.arp_request(mac, IPv4Address("198.51.100.99"), IPv4Address(V4)))
    try:
        for _ in range(5):
            sock.send(request)
        # Our requests crossed the port, and an answer would have followed each within ms.
        wait_for(lambda: sum(1 for _, r in sniffer.frames if r[6:12] == mac) >= 5,
                 timeout=5, what="the 5 requests captured")  # fmt: skip
        time.sleep(0.3)  # an observation window: answers would come within milliseconds
    finally:
        sock.close()
        sniffer.close()
    requests = [r for _, r in sniffer.frames if r[6:12] == mac and r[12:14] == b"\x08\x06"]
    assert len(requests) == 5  # the capture works
    assert on_wire(sniffer, V4) == []
    assert lab.who(V4) == owner  # while it does answer on the IP's own subnet


def test_a_frozen_owner_that_resumes_reclaims_its_ip_with_an_announcement(
    lab: LanLab, sniffer: Sniffer
) -> None:
    """SIGSTOP (a VM pause, a stuck process): the standby takes over; on SIGCONT the owner
    is still first in hash order, sees the standby's announcement and defends, so the
    client's neighbour entry comes back to it instead of staying on a node that released."""
    owner, standby = order(lab, V4)[:2]
    lab.speaker(owner).send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: lab.who(V4) == standby, timeout=10, what=f"{V4} on {standby}")
    finally:
        lab.speaker(owner).send_signal(signal.SIGCONT)
    wait_for(lambda: lab.client_neighbor(V4) == lab.mac(owner), timeout=10,
             what="the client back on the owner")  # fmt: skip
    assert lab.who(V4) == owner
    assert claims(lab, owner, "defend")
