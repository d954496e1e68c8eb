"""Speaker behaviour against misbehaving peers, collisions, MD5 and graceful restart.

Everything runs over loopback in the test's own process (no root, no namespaces).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from teapot_lb.bgp.fsm import State
from teapot_lb.bgp.speaker import PeerConfig, Speaker
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    AsPath,
    ErrorCode,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    MessageReader,
    MpReachNlri,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    Origin,
    RouteRefresh,
    RouteRefreshMessage,
    Update,
    decode_message,
)

V4 = IPv4Network("198.51.100.7/32")


async def until(cond: Callable[[], bool], what: str, within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def listening_speaker(asn: int = 65002, rid: str = "192.0.2.2") -> Speaker:
    s = Speaker(local_as=asn, router_id=rid, listen_address="127.0.0.1", listen_port=0)
    await s.start()
    return s


async def raw_peer(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def read_notification(reader: asyncio.StreamReader) -> Notification:
    frames = MessageReader()
    while True:
        data = await asyncio.wait_for(reader.read(4096), 15)
        assert data, "connection closed without a NOTIFICATION"
        frames.feed(data)
        for t, body in frames.frames():
            msg = decode_message(t, body)
            if isinstance(msg, Notification):
                return msg


async def test_garbage_from_one_peer_leaves_the_other_session_alone() -> None:
    b = await listening_speaker()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
        bad = b.add_peer(PeerConfig("127.0.0.2", 65003, passive=True))
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        await a.start()
        good = b.peer("127.0.0.1")
        await until(lambda: good.state == State.ESTABLISHED, "good session up")
        reader, writer = await raw_peer(b.listen_port or 0, "127.0.0.2")
        writer.write(b"GET / HTTP/1.0\r\n\r\n" + b"\x00" * 64)
        note = await read_notification(reader)
        assert (note.code, note.subcode) == (ErrorCode.MESSAGE_HEADER, 1)
        writer.close()
        # A second one resets mid-message.
        reader, writer = await raw_peer(b.listen_port or 0, "127.0.0.2")
        partial = Open.build(65003, 90, IPv4Address("192.0.2.3")).pack()[:25]
        writer.write(partial)
        await writer.drain()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        await until(lambda: bad.counters.bytes_received >= 25 + 82, "bad peer's bytes seen")
        assert good.state == State.ESTABLISHED and good.counters.established == 1
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_silent_peer_gets_hold_timer_expired() -> None:
    b = await listening_speaker()
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=3))
        reader, writer = await raw_peer(b.listen_port or 0, "127.0.0.1")
        writer.write(Open.build(65001, 3, IPv4Address("192.0.2.1")).pack() + Keepalive().pack())
        # Now say nothing: b must give up after 3 s with Hold Timer Expired.
        note = await read_notification(reader)
        assert note.code == ErrorCode.HOLD_TIMER_EXPIRED
        writer.close()
        assert b.peer("127.0.0.1").last_error == "hold timer expired"
    finally:
        await b.shutdown()


async def test_wrong_peer_as_is_refused_with_bad_peer_as() -> None:
    b = await listening_speaker()
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
        reader, writer = await raw_peer(b.listen_port or 0, "127.0.0.1")
        writer.write(Open.build(65099, 90, IPv4Address("192.0.2.1")).pack())
        note = await read_notification(reader)
        assert (note.code, note.subcode) == (2, 2)
        writer.close()
        assert b.peer("127.0.0.1").last_error == "AS mismatch: expected 65001, got 65099"
    finally:
        await b.shutdown()


async def test_simultaneous_connects_collapse_to_one_session() -> None:
    a = await listening_speaker(65001, "192.0.2.1")
    b = await listening_speaker(65002, "192.0.2.2")
    try:
        pa = a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0, connect_retry=0.3))
        pb = b.add_peer(PeerConfig("127.0.0.1", 65001, port=a.listen_port or 0, connect_retry=0.3))
        a.set_routes({V4: None})
        await until(lambda: V4 in b.routes_in("127.0.0.1"), "route across the surviving session")
        assert pa.state == State.ESTABLISHED and pb.state == State.ESTABLISHED
        assert pa.counters.established == 1 and pb.counters.established == 1
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_md5_matching_keys_establish_and_mismatched_keys_do_not() -> None:
    b = await listening_speaker()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    c = Speaker(local_as=65003, router_id="192.0.2.3", listen_port=None)
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, password="s3cret"))
        b.add_peer(PeerConfig("127.0.0.3", 65003, passive=True, password="s3cret"))
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0, password="s3cret"))
        wrong = c.add_peer(
            PeerConfig(
                "127.0.0.1",
                65002,
                port=b.listen_port or 0,
                local_address="127.0.0.3",
                password="wrong",
                connect_retry=0.2,
                connect_retry_max=0.2,
            )
        )
        await a.start()
        await c.start()
        await a.peer("127.0.0.1").wait_established(15)
        # The kernel drops the mismatched SYNs: c keeps timing out, b never sees it.
        await until(lambda: wrong.counters.connect_attempts >= 4, "c retrying")
        assert wrong.state != State.ESTABLISHED
        assert b.peer("127.0.0.3").counters.bytes_received == 0
    finally:
        await a.shutdown()
        await c.shutdown()
        await b.shutdown()


async def test_graceful_restart_keeps_routes_at_the_helper_until_end_of_rib() -> None:
    b = await listening_speaker()
    helper = b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    a2 = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None, restarting=True)
    try:
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        a.set_routes({V4: None})
        await a.start()
        await until(lambda: V4 in helper.rib_in.routes, "route at the helper")
        await a.shutdown(graceful_restart=True)  # no NOTIFICATION: we are "restarting"
        assert a.peer("127.0.0.1").state == State.IDLE
        assert helper.counters.notifications_received == 0
        await until(lambda: helper.state != State.ESTABLISHED, "helper notices")
        assert V4 in helper.rib_in.routes and V4 in helper.rib_in.stale
        a2.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        a2.set_routes({V4: None})
        await a2.start()
        await until(lambda: not helper.rib_in.stale, "stale mark cleared after End-of-RIB")
        assert V4 in helper.rib_in.routes
    finally:
        await a2.shutdown()
        await b.shutdown()


async def test_ipv6_transport_with_md5_carries_both_families() -> None:
    b = Speaker(local_as=65002, router_id="192.0.2.2", listen_address="::1", listen_port=0)
    await b.start()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    v6 = IPv6Network("2001:db8:9::/48")
    try:
        b.add_peer(PeerConfig("::1", 65001, passive=True, password="v6-secret"))
        a.add_peer(
            PeerConfig(
                "::1",
                65002,
                port=b.listen_port or 0,
                password="v6-secret",
                next_hop_v4=IPv4Address("192.0.2.1"),
            )
        )
        a.set_routes({V4: None, v6: None})
        await a.start()
        await until(lambda: len(b.routes_in("::1")) == 2, "both families over IPv6 transport")
        routes = b.routes_in("::1")
        assert str(routes[V4].next_hop) == "192.0.2.1"
        assert str(routes[v6].next_hop) == "::1"
    finally:
        await a.shutdown()
        await b.shutdown()


async def read_messages(reader: asyncio.StreamReader, count: int) -> list[object]:
    frames = MessageReader()
    out: list[object] = []
    while len(out) < count:
        data = await asyncio.wait_for(reader.read(4096), 15)
        assert data, f"connection closed after {out}"
        frames.feed(data)
        out.extend(decode_message(t, body) for t, body in frames.frames())
    return out


async def test_collision_keeps_the_connection_of_the_higher_identifier() -> None:
    """§6.8: the peer (192.0.2.9) outranks us (192.0.2.1): its connection survives."""
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    fake = await asyncio.start_server(
        lambda r, w: accepted.put_nowait((r, w)), host="127.0.0.1", port=0
    )
    a = await listening_speaker(65001, "192.0.2.1")
    try:
        peer = a.add_peer(PeerConfig("127.0.0.1", 65009, port=fake.sockets[0].getsockname()[1]))
        r1, w1 = await asyncio.wait_for(accepted.get(), 15)  # a's connection (conn1)
        assert isinstance((await read_messages(r1, 1))[0], Open)
        r2, w2 = await raw_peer(a.listen_port or 0, "127.0.0.1")  # ours (conn2)
        assert isinstance((await read_messages(r2, 1))[0], Open)
        ours = Open.build(65009, 90, IPv4Address("192.0.2.9")).pack()
        w1.write(ours)
        assert isinstance((await read_messages(r1, 1))[0], Keepalive)  # conn1 in OpenConfirm
        w2.write(ours)
        note = await read_notification(r1)
        assert (note.code, note.subcode) == (6, 7)  # Cease/Connection Collision Resolution
        assert isinstance((await read_messages(r2, 1))[0], Keepalive)
        w2.write(Keepalive().pack())
        await peer.wait_established(15)
        main = peer.neighbor.main
        assert main.outgoing is False and not main.session.config.passive
        assert peer.counters.established == 1
        w1.close()
        w2.close()
    finally:
        await a.shutdown()
        fake.close()


async def test_too_many_prefixes_end_the_session_with_cease_max_prefixes() -> None:
    b = await listening_speaker()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, max_prefixes=1))
        sender = a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0))
        a.set_routes({V4: None, IPv4Network("198.51.100.8/32"): None})
        await a.start()
        await until(lambda: sender.counters.notifications_received > 0, "a is told off")
        assert sender.last_error == ("peer sent NOTIFICATION Cease/Maximum Prefixes Reached")
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_route_refresh_request_gets_the_table_again() -> None:
    b = await listening_speaker()
    try:
        b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
        b.set_routes({V4: None})
        reader, writer = await raw_peer(b.listen_port or 0, "127.0.0.1")
        hello = Open.build(65001, 90, IPv4Address("192.0.2.1"), (RouteRefresh(),))
        writer.write(hello.pack() + Keepalive().pack())
        first = await read_messages(reader, 4)  # OPEN, KEEPALIVE, UPDATE, End-of-RIB
        assert [type(m).__name__ for m in first] == ["Open", "Keepalive", "Update", "Update"]
        writer.write(RouteRefreshMessage(IPV4_UNICAST).pack())
        again = await read_messages(reader, 2)
        assert isinstance(again[0], Update) and again[0].nlri == (V4,)
        assert isinstance(again[1], Update) and again[1].end_of_rib() == IPV4_UNICAST
        writer.close()
    finally:
        await b.shutdown()


async def test_peer_reconnecting_while_established_is_its_graceful_restart() -> None:
    b = await listening_speaker()
    try:
        helper = b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True))
        gr = GracefulRestart(60, families=(GracefulRestartFamily(IPV4_UNICAST, True),))
        caps = (Multiprotocol(IPV4_UNICAST), gr)
        route = Update(
            attributes=(Origin(0), AsPath.sequence(65001), NextHop(IPv4Address("192.0.2.1"))),
            nlri=(V4,),
        )
        r1, w1 = await raw_peer(b.listen_port or 0, "127.0.0.1")
        w1.write(Open.build(65001, 90, IPv4Address("192.0.2.1"), caps).pack())
        w1.write(Keepalive().pack() + route.pack())
        await until(lambda: V4 in helper.rib_in.routes, "route learned on the first session")
        # The peer "restarts": a new connection while the old one looks alive.
        _, w2 = await raw_peer(b.listen_port or 0, "127.0.0.1")
        restarted = GracefulRestart(60, restarting=True, families=gr.families)
        w2.write(Open.build(65001, 90, IPv4Address("192.0.2.1"), (caps[0], restarted)).pack())
        w2.write(Keepalive().pack())
        await helper.wait_established(15)
        await asyncio.wait_for(r1.read(), 15)  # reads until b closes the old connection
        assert r1.at_eof()
        assert V4 in helper.rib_in.stale  # kept, but stale, until the peer's End-of-RIB
        w2.write(Update.end_of_rib_for(IPV4_UNICAST).pack())
        await until(lambda: V4 not in helper.rib_in.routes, "not re-announced: swept at EoR")
        w1.close()
        w2.close()
    finally:
        await b.shutdown()


async def test_update_flood_from_one_peer_leaves_the_other_session_alone() -> None:
    b = await listening_speaker()
    a = Speaker(local_as=65001, router_id="192.0.2.1", listen_port=None)
    try:
        good = b.add_peer(PeerConfig("127.0.0.1", 65001, passive=True, hold_time=3))
        flooder = b.add_peer(PeerConfig("127.0.0.2", 65003, passive=True))
        a.add_peer(PeerConfig("127.0.0.1", 65002, port=b.listen_port or 0, hold_time=3))
        await a.start()
        await until(lambda: good.state == State.ESTABLISHED, "good session up")
        _, writer = await raw_peer(b.listen_port or 0, "127.0.0.2")
        caps = (Multiprotocol(IPV4_UNICAST), Multiprotocol(IPV6_UNICAST))
        writer.write(Open.build(65003, 90, IPv4Address("192.0.2.3"), caps).pack())
        writer.write(Keepalive().pack())
        base = int(IPv6Address("2001:db8:f::"))
        for chunk in range(240):
            nets = tuple(IPv6Network((base + chunk * 200 + i, 128)) for i in range(200))
            mp = MpReachNlri(IPV6_UNICAST, (IPv6Address("2001:db8::3"),), nets)
            writer.write(Update(attributes=(Origin(0), AsPath.sequence(65003), mp)).pack())
        await writer.drain()
        await until(lambda: flooder.prefixes_received == 48_000, "all flooded routes stored")
        assert good.state == State.ESTABLISHED and good.counters.established == 1
        writer.close()
    finally:
        await a.shutdown()
        await b.shutdown()
