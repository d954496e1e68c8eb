"""Benchmark ADD-PATH (RFC 7911) in the BGP speaker's own encode and decode paths.

Encode: the Adj-RIB-Out of one peer (``compile_routes`` then ``AdjRibOut.updates``, what
``Speaker.set_routes`` and the first flush of a session run) for N IPv4 /32s, as
  - ``plain``: one path per prefix, peer without ADD-PATH (today's path);
  - ``single_ids``: one path per prefix, peer with ADD-PATH (every NLRI with a Path
    Identifier);
  - ``three_paths``: three paths per prefix (three third-party next hops), ADD-PATH.
Decode: the receive path (``decode_update_routes``) over those UPDATEs, with the Path
Identifiers expected where they were sent. Figures are paths per second (best of
``--repeat``); nothing leaves memory.

    .venv/bin/python bench/bgp_add_path.py [--prefixes 20000] [--repeat 5]

Last line: JSON with ``encode_paths_per_s_{plain,single_ids,three_paths}``,
``decode_paths_per_s_{plain,single_ids,three_paths}``, ``updates_{...}``, ``prefixes``,
``repeat``, ``loadavg_1m``, ``python``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network

from teapot_lb.bgp.attributes import Desired, Paths, RouteAttributes
from teapot_lb.bgp.rib import AdjRibOut, ExportContext, compile_routes
from teapot_lb.bgp.wire import IPV4_UNICAST, Context, MessageReader, decode_update_routes

V4_ONLY = frozenset({IPV4_UNICAST})
HOPS = [IPv4Address(f"198.51.100.{n}") for n in (21, 22, 23)]


def export(add_path: bool) -> ExportContext:
    return ExportContext(
        local_as=64512,
        peer_as=64500,
        next_hop_v4=IPv4Address("198.51.100.10"),
        families=V4_ONLY,
        add_path=V4_ONLY if add_path else frozenset(),
    )


def routes(n: int, paths: int) -> dict[IPv4Network, Desired]:
    base = int(IPv4Address("203.0.0.0"))
    out: dict[IPv4Network, Desired] = {}
    for i in range(n):
        prefix = IPv4Network((base + i, 32))
        if paths == 1:
            out[prefix] = RouteAttributes()
        else:
            out[prefix] = Paths.of(
                {f"node-{k}": RouteAttributes(next_hop=HOPS[k]) for k in range(paths)}
            )
    return out


def best(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefixes", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.prefixes
    cases = {"plain": (1, False), "single_ids": (1, True), "three_paths": (3, True)}
    figures: dict[str, object] = {}
    for name, (paths, add_path) in cases.items():
        desired = routes(n, paths)
        ctx = export(add_path)

        def encode(
            desired: dict[IPv4Network, Desired] = desired, ctx: ExportContext = ctx
        ) -> list[bytes]:
            rib = AdjRibOut()
            rib.set_desired(compile_routes(desired))
            return rib.updates(ctx)

        messages = encode()
        reader = MessageReader()
        reader.feed(b"".join(messages))
        bodies = [body for _, body in reader.frames()]
        decode_ctx = Context(add_path=V4_ONLY if add_path else frozenset())

        def decode(bodies: list[bytes] = bodies, decode_ctx: Context = decode_ctx) -> int:
            count = 0
            for body in bodies:
                for reach in decode_update_routes(body, decode_ctx).reach:
                    count += len(reach.encodings)
            return count

        assert decode() == n * paths
        enc_s = best(encode, args.repeat)
        dec_s = best(decode, args.repeat)
        total = n * paths
        figures[f"encode_paths_per_s_{name}"] = round(total / enc_s)
        figures[f"decode_paths_per_s_{name}"] = round(total / dec_s)
        figures[f"updates_{name}"] = len(messages)
        print(
            f"{name:<12} {total:>7} paths in {len(messages):>4} UPDATEs: "
            f"encode {total / enc_s:>12,.0f}/s   decode {total / dec_s:>12,.0f}/s"
        )
    figures.update(
        prefixes=n,
        repeat=args.repeat,
        loadavg_1m=round(os.getloadavg()[0], 2),
        python=platform.python_version(),
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
