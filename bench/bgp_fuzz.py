"""Fuzz the BGP codec and state machine with random and mutated messages.

Every input goes through the decoder (``MessageReader`` + ``decode_message``, with a
2- or 4-octet AS context) and into an Established :class:`~teapot_lb.bgp.fsm.Session`.
The only acceptable failure is the codec's own ``CodecError`` (which becomes a
NOTIFICATION); anything else is counted as an exception and must be 0.

    .venv/bin/python bench/bgp_fuzz.py [-n 1000000] [--seed 1]

Prints outcomes by NOTIFICATION code/subcode and, last, one JSON object with the keys
``inputs``, ``decoder_ok``, ``decoder_notifications``, ``fsm_sessions_reset``,
``exceptions``, ``inputs_per_s``, ``seed``.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import time
import traceback
from collections import Counter
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from teapot_lb.bgp.fsm import NotificationSent, Session, SessionConfig, State, UpdateProblems
from teapot_lb.bgp.wire import (
    IPV4_UNICAST,
    IPV6_UNICAST,
    Aggregator,
    As4Path,
    AsPath,
    AtomicAggregate,
    CodecError,
    Communities,
    Context,
    ExtendedCommunities,
    FourOctetAS,
    GracefulRestart,
    GracefulRestartFamily,
    Keepalive,
    LargeCommunities,
    LargeCommunity,
    LocalPref,
    MessageReader,
    MpReachNlri,
    MpUnreachNlri,
    MultiExitDisc,
    Multiprotocol,
    NextHop,
    Notification,
    Open,
    Origin,
    RouteRefresh,
    RouteRefreshMessage,
    Segment,
    UnknownAttribute,
    UnknownCapability,
    Update,
    decode_message,
    describe_error,
)

LOCAL_ID = IPv4Address("192.0.2.10")
PEER_OPEN = (
    Open.build(
        65000,
        90,
        IPv4Address("192.0.2.1"),
        (Multiprotocol(IPV4_UNICAST), Multiprotocol(IPV6_UNICAST), RouteRefresh()),
    ).pack()
    + Keepalive().pack()
)
CONFIG = SessionConfig(local_as=65001, peer_as=65000, router_id=LOCAL_ID)


def v4(rng: random.Random) -> IPv4Network:
    plen = rng.randint(0, 32)
    return IPv4Network((rng.getrandbits(32) >> (32 - plen) << (32 - plen) if plen else 0, plen))


def v6(rng: random.Random) -> IPv6Network:
    plen = rng.randint(0, 128)
    return IPv6Network((rng.getrandbits(128) >> (128 - plen) << (128 - plen) if plen else 0, plen))


def random_update(rng: random.Random, four: bool) -> bytes:
    asn = (lambda: rng.getrandbits(32)) if four else (lambda: rng.getrandbits(16))
    attrs: list[object] = [
        Origin(rng.randint(0, 2)),
        AsPath(
            tuple(
                Segment(rng.choice((1, 2)), tuple(asn() for _ in range(rng.randint(1, 5))))
                for _ in range(rng.randint(0, 2))
            )
        ),
        NextHop(IPv4Address(rng.getrandbits(32))),
    ]
    pool = [
        lambda: MultiExitDisc(rng.getrandbits(32)),
        lambda: LocalPref(rng.getrandbits(32)),
        lambda: AtomicAggregate(),
        lambda: Aggregator(asn(), IPv4Address(rng.getrandbits(32))),
        lambda: Communities(tuple(rng.getrandbits(32) for _ in range(rng.randint(1, 6)))),
        lambda: LargeCommunities(
            tuple(LargeCommunity(rng.getrandbits(32), 1, 2) for _ in range(rng.randint(1, 3)))
        ),
        lambda: ExtendedCommunities(tuple(rng.randbytes(8) for _ in range(rng.randint(1, 3)))),
        lambda: UnknownAttribute(
            rng.choice((33, 99, 240)), 0xC0, rng.randbytes(rng.randint(0, 20))
        ),
        lambda: As4Path((Segment(2, (rng.getrandbits(32),)),)),
        lambda: MpUnreachNlri(IPV6_UNICAST, tuple(v6(rng) for _ in range(rng.randint(0, 4)))),
        lambda: MpReachNlri(
            IPV6_UNICAST,
            (IPv6Address(rng.getrandbits(128)),)
            + ((IPv6Address(rng.getrandbits(128)),) if rng.random() < 0.5 else ()),
            tuple(v6(rng) for _ in range(rng.randint(0, 4))),
        ),
    ]
    for make in rng.sample(pool, rng.randint(0, 5)):
        attrs.append(make())
    upd = Update(
        tuple(v4(rng) for _ in range(rng.randint(0, 5))),
        tuple(attrs),  # type: ignore[arg-type]
        tuple(v4(rng) for _ in range(rng.randint(0, 8))),
    )
    return upd.pack(Context(four))


def random_open(rng: random.Random) -> bytes:
    caps = [
        Multiprotocol(IPV4_UNICAST),
        Multiprotocol(IPV6_UNICAST),
        RouteRefresh(),
        FourOctetAS(rng.getrandbits(32)),
        GracefulRestart(rng.getrandbits(12), families=(GracefulRestartFamily(IPV4_UNICAST, True),)),
        UnknownCapability(rng.randint(71, 255), rng.randbytes(rng.randint(0, 6))),
    ]
    return Open(
        rng.getrandbits(16),
        rng.choice((0, 1, 3, 90, rng.getrandbits(16))),
        IPv4Address(rng.getrandbits(32)),
        tuple(rng.sample(caps, rng.randint(0, len(caps)))),
    ).pack()


def corpus(rng: random.Random, size: int) -> list[bytes]:
    out = []
    for _ in range(size):
        r = rng.random()
        if r < 0.6:
            out.append(random_update(rng, rng.random() < 0.7))
        elif r < 0.8:
            out.append(random_open(rng))
        elif r < 0.9:
            out.append(
                Notification(
                    rng.randint(1, 7), rng.randint(0, 12), rng.randbytes(rng.randint(0, 10))
                ).pack()
            )
        elif r < 0.95:
            out.append(RouteRefreshMessage(IPV6_UNICAST, rng.randint(0, 3)).pack())
        else:
            out.append(Keepalive().pack())
    return out


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds))
    kind = rng.random()
    if kind < 0.05:
        # Pure noise behind a valid-looking header.
        body = rng.randbytes(rng.randint(0, 200))
        return b"\xff" * 16 + struct.pack("!HB", 19 + len(body), rng.randint(1, 6)) + body
    if kind < 0.08:
        return rng.randbytes(rng.randint(0, 64))
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        if not data:
            break
        # Mostly behind the marker: a broken marker only ever tests one check.
        lo = 16 if len(data) > 19 and rng.random() < 0.95 else 0
        pos = rng.randrange(lo, len(data))
        if op < 0.4:
            data[pos] = rng.getrandbits(8)
        elif op < 0.55:
            data[pos] ^= 1 << rng.randrange(8)
        elif op < 0.65:
            del data[pos : pos + rng.randint(1, 8)]
        elif op < 0.75:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op < 0.85 and len(data) >= 19:
            # Keep the header length consistent so the body parsers see the damage.
            data[16:18] = struct.pack("!H", min(len(data), 0xFFFF))
        else:
            data[pos] = rng.choice((0, 0xFF, 0x7F, 0x80))
    if rng.random() < 0.7 and len(data) >= 19:
        data[16:18] = struct.pack("!H", min(len(data), 0xFFFF))
    return bytes(data)


def established() -> Session:
    s = Session(CONFIG, auto_restart=False)
    s.start()
    s.connection_made()
    s.data_received(PEER_OPEN)
    assert s.state == State.ESTABLISHED
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1_000_000, help="number of inputs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", type=int, default=3000, help="valid seed messages")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    seeds = corpus(rng, args.corpus)
    decoder: Counter[str] = Counter()
    fsm: Counter[str] = Counter()
    exceptions: Counter[str] = Counter()
    samples: list[str] = []
    session = established()
    start = time.perf_counter()
    for i in range(args.n):
        data = mutate(rng, seeds) if rng.random() < 0.97 else rng.choice(seeds)
        ctx = Context(four_octet_as=bool(i & 1))
        try:
            reader = MessageReader()
            reader.feed(data)
            n = 0
            for t, body in reader.frames():
                decode_message(t, body, ctx)
                n += 1
            decoder["ok" if n else "incomplete"] += 1
        except CodecError as err:
            decoder[describe_error(err.code, err.subcode)] += 1
        except Exception as exc:
            exceptions[f"decoder {type(exc).__name__}"] += 1
            if len(samples) < 5:
                samples.append(f"{data.hex()}\n{traceback.format_exc()}")
        try:
            actions = session.data_received(data)
            sent = [a.notification for a in actions if isinstance(a, NotificationSent)]
            if sent:
                fsm[f"reset: {sent[0].describe()}"] += 1
            elif session.state == State.ESTABLISHED:
                problems = [a for a in actions if isinstance(a, UpdateProblems)]
                if any(p.treat_as_withdraw for p in problems):
                    fsm["still established, RFC 7606 treat-as-withdraw"] += 1
                elif problems:
                    fsm["still established, RFC 7606 attribute discarded"] += 1
                else:
                    fsm["still established"] += 1
            else:
                fsm[f"{session.state.value} (peer NOTIFICATION)"] += 1
        except Exception as exc:
            exceptions[f"fsm {type(exc).__name__}"] += 1
            if len(samples) < 5:
                samples.append(f"{data.hex()}\n{traceback.format_exc()}")
        if session.state != State.ESTABLISHED or session._reader.buffered:
            session = established()
    elapsed = time.perf_counter() - start

    print(f"inputs: {args.n:,} (seed {args.seed}, {args.corpus} valid seed messages)")
    print("decoder outcomes:")
    for name, count in decoder.most_common():
        print(f"  {count:>9,}  {name}")
    print("fsm outcomes (Established session fed each input):")
    for name, count in fsm.most_common(25):
        print(f"  {count:>9,}  {name}")
    print(f"exceptions other than CodecError: {sum(exceptions.values())}")
    for name, count in exceptions.items():
        print(f"  {count:>9,}  {name}")
    for s in samples:
        print(s)
    print(f"rate: {args.n / elapsed:,.0f} inputs/s ({elapsed:.1f} s)")
    print(
        json.dumps(
            {
                "inputs": args.n,
                "decoder_ok": decoder["ok"],
                "decoder_notifications": sum(
                    v for k, v in decoder.items() if k not in ("ok", "incomplete")
                ),
                "fsm_sessions_reset": sum(v for k, v in fsm.items() if k.startswith("reset")),
                "exceptions": sum(exceptions.values()),
                "inputs_per_s": round(args.n / elapsed),
                "seed": args.seed,
            }
        )
    )


if __name__ == "__main__":
    main()
