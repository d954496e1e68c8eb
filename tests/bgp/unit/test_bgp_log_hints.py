"""What the neighbor logs says who sent what, and what is likely wrong (sans-I/O)."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address

from teapot_lb.bgp.config import PeerConfig
from teapot_lb.bgp.fsm import State
from teapot_lb.bgp.neighbor import CONNECT_FAILURES_WARNED, Neighbor
from teapot_lb.bgp.neighbor_orders import Dial
from teapot_lb.bgp.wire import Keepalive, Multiprotocol, Notification, Open
from teapot_lb.bgp.wire.errors import ErrorCode
from teapot_lb.bgp.wire.family import IPV4_UNICAST
from teapot_lb.bgp.wire.header import MessageType, frame

US, THEM = IPv4Address("192.0.2.10"), IPv4Address("192.0.2.1")


def neighbor(**kw: object) -> Neighbor:
    """An eBGP neighbor (AS 65000; we are AS 65001)."""
    config = PeerConfig(address=str(THEM), peer_as=65000, **kw)  # type: ignore[arg-type]
    return Neighbor(config, local_as=65001, router_id=US)


def up(n: Neighbor) -> None:
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    n.connection_made(dial.link, US)
    theirs = Open.build(65000, 90, THEM, (Multiprotocol(IPV4_UNICAST),)).pack()
    n.data_received(dial.link, theirs + Keepalive().pack())
    assert n.state == State.ESTABLISHED


Logs = list[dict[str, object]]


def lines(logs: Logs, level: str) -> list[str]:
    return [str(e["event"]) for e in logs if e.get("log_level") == level]


def test_hold_timer_expired_from_a_single_hop_ebgp_peer_hints_at_ebgp_multihop(
    no_internal_errors: Logs,
) -> None:
    n = neighbor()
    up(n)
    n.data_received(n.main.id, Notification(ErrorCode.HOLD_TIMER_EXPIRED).pack())
    (entry,) = [e for e in no_internal_errors if "sent us NOTIFICATION" in str(e["event"])]
    assert entry["event"] == "peer 192.0.2.1 sent us NOTIFICATION Hold Timer Expired"
    assert "set ebgpMultiHop on the BGPPeer" in str(entry["hint"])


def test_no_multihop_hint_when_multihop_is_set(no_internal_errors: Logs) -> None:
    n = neighbor(ebgp_multihop=3)
    up(n)
    n.data_received(n.main.id, Notification(ErrorCode.HOLD_TIMER_EXPIRED).pack())
    (entry,) = [e for e in no_internal_errors if "sent us NOTIFICATION" in str(e["event"])]
    assert "hint" not in entry


def test_a_malformed_message_says_we_sent_the_notification_and_why(
    no_internal_errors: Logs,
) -> None:
    n = neighbor()
    up(n)
    n.data_received(n.main.id, frame(MessageType.KEEPALIVE, b"x"))  # a KEEPALIVE has no body
    (line,) = [w for w in lines(no_internal_errors, "warning") if "we sent NOTIFICATION" in w]
    assert line.startswith("we sent NOTIFICATION Message Header Error")
    assert "to peer 192.0.2.1: its message was malformed" in line


def test_our_own_shutdown_is_logged_at_info(no_internal_errors: Logs) -> None:
    n = neighbor()
    up(n)
    n.stop(None, "teapot-lb speaker stopping")
    info = [w for w in lines(no_internal_errors, "info") if "we sent NOTIFICATION" in w]
    assert info and "Cease/Administrative Shutdown" in info[0]
    assert not [w for w in lines(no_internal_errors, "warning") if "NOTIFICATION" in w]


def test_a_connect_failure_that_persists_becomes_a_warning(no_internal_errors: Logs) -> None:
    n = Neighbor(neighbor().config, local_as=65001, router_id=US)
    (dial,) = [o for o in n.start() if isinstance(o, Dial)]
    for _ in range(CONNECT_FAILURES_WARNED):
        n.connection_failed(dial.link, "Network is unreachable")
    assert lines(no_internal_errors, "info").count("bgp connect failed") >= 1
    (warned,) = [e for e in no_internal_errors if e["event"] == "bgp connect keeps failing"]
    assert warned["log_level"] == "warning" and warned["attempts"] == CONNECT_FAILURES_WARNED
    n.connection_made(dial.link, US)  # a success starts the count again
    n.connection_failed(dial.link, "Network is unreachable")
    assert len([e for e in no_internal_errors if e["event"] == "bgp connect keeps failing"]) == 1


def test_an_mp_reach_of_an_unknown_family_is_logged_not_dropped_silently(
    no_internal_errors: Logs,
) -> None:
    n = neighbor()
    up(n)
    # MP_REACH_NLRI (optional, type 14) for AFI 25 (L2VPN), SAFI 65 (VPLS): not ours.
    value = struct.pack("!HBB", 25, 65, 0) + b"\x00"
    attr = struct.pack("!BBB", 0x80, 14, len(value)) + value
    body = struct.pack("!H", 0) + struct.pack("!H", len(attr)) + attr
    n.data_received(n.main.id, frame(MessageType.UPDATE, body) + Keepalive().pack())
    (line,) = [w for w in lines(no_internal_errors, "warning") if "UPDATE" in w]
    assert "MP_REACH_NLRI of an address family we do not know (AFI 25, SAFI 65) ignored" in line
