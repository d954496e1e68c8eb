"""The UDP adapter reads each packet's TTL, and a multihop session drops those below its
minimum (RFC 5883 §5; a BFDProfile's minimumTtl). Loopback, unprivileged ports: no root."""

from __future__ import annotations

import socket

from teapot_lb.bfd.session import Parameters, StateChanged
from teapot_lb.bfd.transport import BfdEndpoint, SessionKey
from teapot_lb.bfd.wire import ControlPacket, State, encode
from teapot_lb.lab.wait import wait_for_async

SLOW = 1_000_000


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send(port: int, packet: ControlPacket, ttl: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        s.sendto(encode(packet), ("127.0.0.1", port))


async def test_a_multihop_session_drops_packets_below_its_minimum_ttl() -> None:
    port = free_udp_port()
    seen: list[StateChanged] = []
    endpoint = BfdEndpoint(lambda _key, change: seen.append(change), multihop_port=port)
    key = SessionKey("127.0.0.1", "127.0.0.1", multihop=True)
    # Passive, so it does not talk to itself on loopback before it hears "the peer".
    session = endpoint.add(key, Parameters(min_ttl=251, passive=True))
    try:
        assert not session.sending
        # Had it been taken, the Init packet would bring us straight Up, and the Down one
        # after it would take us Down again; dropped, only the second counts: Down -> Init.
        send(port, ControlPacket(State.INIT, 7, 0, SLOW, SLOW, 3), ttl=250)
        send(port, ControlPacket(State.DOWN, 8, 0, SLOW, SLOW, 3), ttl=251)
        await wait_for_async(lambda: session.remote_discriminator == 8, within=5,
                             what="the second packet to arrive")  # fmt: skip
        assert [(c.old, c.new) for c in seen] == [(State.DOWN, State.INIT)]
        # The minimum changes on the running session (a BFDProfile edited).
        endpoint.change_parameters(key, Parameters(min_ttl=200, passive=True))
        send(port, ControlPacket(State.INIT, 9, session.local_discriminator, SLOW, SLOW, 3),
             ttl=250)  # fmt: skip
        await wait_for_async(lambda: session.state is State.UP, within=5, what="Up")
    finally:
        endpoint.close()
