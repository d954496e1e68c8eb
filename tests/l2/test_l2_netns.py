"""L2 mode end to end: three node namespaces emulating kube-proxy IPVS, a client, a bridge.

Only the agent's responder makes a Service IP reachable (the IPs sit on ``lo`` with
``arp_ignore``/``arp_announce``), so everything asserted here is the agent's doing: who
answers on the wire, what the client's neighbour table holds, how it fails over.
"""

from __future__ import annotations

import functools
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.announce.election import ranking
from teapot_lb.l2 import wire
from teapot_lb.l2.lab import V4, V6, L2Lab, Sniffer, build, netns_socket, wait_for
from teapot_lb.netlab import Topology

CLIENT4, CLIENT6 = IPv4Address("192.0.2.10"), IPv6Address("2001:db8::10")


def order(lab: L2Lab, ip: str) -> tuple[str, ...]:
    return ranking(ip_address(ip), lab.nodes)


def mac_of(lab: L2Lab, node: str) -> bytes:
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


def events(lab: L2Lab, node: str, event: str) -> list[dict[str, Any]]:
    out = []
    for line in lab.logs[node].read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == event:
            out.append(rec)
    return out


def converged(lab: L2Lab) -> None:
    """Wait until every agent has heard every other one and each IP is on its elected owner:
    the state every test starts from (agents start in parallel, at the pace of the host)."""

    def heard_all(node: str) -> bool:
        heard = {e["member"] for e in events(lab, node, "member") if e["new"] == "alive"}
        return heard >= set(lab.nodes) - {node}

    def on_owner(ip: str) -> bool:
        return lab.connect(ip) == order(lab, ip)[0]

    for node in lab.nodes:
        wait_for(functools.partial(heard_all, node), 30, f"{node} hearing every peer")
    for ip in lab.ips:
        wait_for(functools.partial(on_owner, ip), 20, f"{ip} on its elected owner")


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[L2Lab]:
    lab = build(topology)
    for node in lab.nodes:
        lab.start_agent(node, tmp_path)
    converged(lab)
    yield lab
    for node, path in lab.logs.items():  # shown by pytest when a test fails
        print(f"--- {node} ---\n{path.read_text()[-4000:]}")


@pytest.fixture
def sniffer(lab: L2Lab) -> Iterator[Sniffer]:
    s = Sniffer(lab.switch.ns, lab.ports["client"])
    yield s
    s.close()


def flush_client(lab: L2Lab) -> None:
    lab.client.ip("neigh", "flush", "dev", "eth0")


@pytest.mark.parametrize("ip", [V4, V6])
def test_client_reaches_the_ip_through_the_elected_owner(lab: L2Lab, ip: str) -> None:
    owner = order(lab, ip)[0]
    assert lab.connect(ip) == owner
    assert lab.client_neighbor(ip) == lab.mac(owner)


@pytest.mark.parametrize("ip", [V4, V6])
def test_non_owners_never_answer(lab: L2Lab, sniffer: Sniffer, ip: str) -> None:
    owner = order(lab, ip)[0]
    for _ in range(5):
        flush_client(lab)
        assert lab.connect(ip) == owner
    seen = on_wire(sniffer, ip)
    assert [k for _, _, k in seen].count("answer") >= 3  # the capture did see answers
    assert {mac for _, mac, _ in seen} == {mac_of(lab, owner)}


@pytest.mark.parametrize("ip", [V4, V6])
def test_killing_the_owner_moves_the_ip_with_an_announcement(
    lab: L2Lab, sniffer: Sniffer, ip: str
) -> None:
    old, new = order(lab, ip)[:2]
    assert lab.connect(ip) == old
    killed_at = time.monotonic()
    lab.kill_agent(old)
    lab.link(old, up=False)
    assert wait_for(lambda: lab.connect(ip, timeout=0.2) == new, 10, f"{ip} served by {new}")
    assert lab.client_neighbor(ip) == lab.mac(new)
    announced = [
        t for t, mac, kind in on_wire(sniffer, ip) if kind == "announce" and mac == mac_of(lab, new)
    ]
    assert announced and announced[0] > killed_at


class Prober:
    """Asks the link for ``ip`` every 20 ms from the client, as the client's kernel would."""

    def __init__(self, lab: L2Lab, ip: str) -> None:
        self.sock = netns_socket(lab.client.ns, socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind(("eth0", 0))
        mac = wire.parse_mac(lab.client.mac("eth0"))
        target = ip_address(ip)
        frame: wire.Frame = (
            wire.arp_request(mac, CLIENT4, target)
            if isinstance(target, IPv4Address)
            else wire.neighbor_solicitation(mac, CLIENT6, target)
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
    lab: L2Lab, sniffer: Sniffer, tmp_path: Path, ip: str
) -> None:
    old, new = order(lab, ip)[:2]
    lab.kill_agent(old)
    lab.link(old, up=False)
    wait_for(lambda: lab.connect(ip, timeout=0.2) == new, 10, f"{ip} served by {new}")
    prober = Prober(lab, ip)
    try:
        back_at = time.monotonic()
        lab.link(old, up=True)
        lab.start_agent(old, tmp_path)
        wait_for(lambda: lab.connect(ip, timeout=0.2) == old, 15, f"{ip} back on {old}")
        time.sleep(0.3)  # keep probing a little after the move, to catch a late second answer
    finally:
        prober.close()
    seen = [(t, mac) for t, mac, _ in on_wire(sniffer, ip) if t >= back_at]
    new_mac, old_mac = mac_of(lab, new), mac_of(lab, old)
    first_old = min(t for t, mac in seen if mac == old_mac)
    assert all(t < first_old for t, mac in seen if mac == new_mac), "both nodes answered"
    assert {mac for _, mac in seen} <= {new_mac, old_mac}
    assert len(prober.sent) > 10


@pytest.fixture
def partitioned_lab(topology: Topology, tmp_path: Path) -> Iterator[L2Lab]:
    lab = build(topology, heartbeat_network=True)
    for node in lab.nodes:
        # Short claim timers, so a test of a few seconds covers several hold periods.
        lab.start_agent(node, tmp_path, "--claim-hold", "0.5", "--claim-memory", "1.0")
    converged(lab)
    yield lab
    for node, path in lab.logs.items():
        print(f"--- {node} ---\n{path.read_text()[-4000:]}")


@pytest.mark.parametrize("ip", [V4, V6])
def test_heartbeat_partition_resolves_to_the_better_ranked_owner_in_one_round_trip(
    partitioned_lab: L2Lab, ip: str
) -> None:
    """Documented in docs/l2.md: with heartbeats cut but the data path up, the standby takes
    the IP, the sitting owner sees its announcement and defends, the standby yields."""
    lab = partitioned_lab
    owner, standby = order(lab, ip)[:2]
    sniffer = Sniffer(lab.switch.ns, lab.ports["client"])
    try:
        lab.link(owner, up=False, ifname="eth1")  # heartbeats cut, ARP/NDP path intact
        wait_for(
            lambda: any(
                e["verdict"] == "yield" and e["ip"] == ip for e in events(lab, standby, "claim")
            ),
            10,
            f"{standby} yielding {ip}",
        )
        # The standby must stay silent for the whole partition (many times hold + memory)
        # while the owner keeps the IP.
        time.sleep(3.0)
        seen = on_wire(sniffer, ip)
    finally:
        sniffer.close()
    standby_claims = [t for t, mac, _ in seen if mac == mac_of(lab, standby)]
    assert standby_claims, "the standby never took the IP: the partition was not exercised"
    assert max(standby_claims) - min(standby_claims) < 0.3
    assert seen[-1][1] == mac_of(lab, owner)
    assert any(e["verdict"] == "defend" for e in events(lab, owner, "claim"))
    assert lab.client_neighbor(ip) == lab.mac(owner)
    assert lab.connect(ip) == owner

    lab.link(owner, up=True, ifname="eth1")  # healed: one view again, the owner stays
    wait_for(
        lambda: any(
            (e["member"], e["old"], e["new"]) == (owner, "dead", "alive")
            for e in events(lab, standby, "member")
        ),
        10,
        f"{standby} hearing {owner} again",
    )
    assert lab.connect(ip) == owner


def test_malformed_frames_on_the_wire_are_ignored(lab: L2Lab) -> None:
    sock = netns_socket(lab.client.ns, socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(("eth0", 0))
    mac = wire.parse_mac(lab.client.mac("eth0"))
    good_arp = wire.encode(wire.arp_request(mac, CLIENT4, IPv4Address(V4)))
    good_ns = wire.encode(wire.neighbor_solicitation(mac, CLIENT6, IPv6Address(V6)))
    try:
        for i in range(300):
            frame = bytearray(good_arp if i % 2 else good_ns)
            frame[14 + (i * 7) % (len(frame) - 14)] ^= 1 + i % 255  # corrupt one byte
            sock.send(bytes(frame[: 20 + i % 60]))
    finally:
        sock.close()
    assert all(proc.poll() is None for proc in lab.agents.values())
    flush_client(lab)
    for ip in (V4, V6):
        assert lab.connect(ip) == order(lab, ip)[0]


def test_a_gracefully_stopped_owner_hands_over_at_once(lab: L2Lab) -> None:
    old, new = order(lab, V4)[:2]
    lab.agents[old].send_signal(signal.SIGTERM)
    lab.agents[old].wait(timeout=10)
    wait_for(lambda: lab.connect(V4, timeout=0.2) == new, 10, f"{V4} served by {new}")
    assert any(
        (e["member"], e["new"], e["reason"]) == (old, "dead", "left")
        for e in events(lab, new, "member")
    )


def test_only_the_owner_joins_the_solicited_node_group_of_an_ipv6_ip(lab: L2Lab) -> None:
    owner = order(lab, V6)[0]
    group = str(wire.solicited_node(IPv6Address(V6)))
    for node, host in lab.nodes.items():
        joined = group in host.ip("-6", "maddr", "show", "dev", "eth0")
        assert joined == (node == owner), node


def test_requests_on_an_interface_outside_the_ips_subnet_are_not_answered(
    partitioned_lab: L2Lab,
) -> None:
    lab = partitioned_lab
    owner = order(lab, V4)[0]
    hb_switch = lab.topology.hosts["hb"]
    prober = lab.topology.add_host("probe")
    port = lab.topology.connect(prober, hb_switch, addrs=["198.51.100.99/24"])
    sniffer = Sniffer(hb_switch.ns, port)
    sock = netns_socket(prober.ns, socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind(("eth0", 0))
    mac = wire.parse_mac(prober.mac("eth0"))
    try:
        for _ in range(5):
            sock.send(
                wire.encode(wire.arp_request(mac, IPv4Address("198.51.100.99"), IPv4Address(V4)))
            )
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        sock.close()
        sniffer.close()
    requests = [r for _, r in sniffer.frames if r[6:12] == mac and r[12:14] == b"\x08\x06"]
    assert len(requests) == 5  # the capture works
    assert on_wire(sniffer, V4) == []
    assert lab.connect(V4) == owner  # while it does answer on the IP's own subnet


def test_a_frozen_owner_that_resumes_reclaims_its_ip_with_an_announcement(
    lab: L2Lab, sniffer: Sniffer
) -> None:
    """SIGSTOP (a VM pause, a stuck process): the standby takes over; on SIGCONT the owner
    is still first in hash order, sees the standby's announcement and defends, so the
    client's neighbour entry comes back to it instead of staying on a node that released."""
    owner, standby = order(lab, V4)[:2]
    lab.agents[owner].send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: lab.connect(V4, timeout=0.2) == standby, 10, f"{V4} on {standby}")
    finally:
        lab.agents[owner].send_signal(signal.SIGCONT)
    wait_for(lambda: lab.client_neighbor(V4) == lab.mac(owner), 10, "the client back on the owner")
    assert lab.connect(V4) == owner
    assert any(e["verdict"] == "defend" for e in events(lab, owner, "claim"))
