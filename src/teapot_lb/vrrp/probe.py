"""Lab tools for VIP mode: a TCP "who am I" server and a continuous connect prober.

    python -m teapot_lb.vrrp.probe serve --name n1 --port 7000
    python -m teapot_lb.vrrp.probe watch --target 192.0.2.200:7000 --interval 0.01 --out F

``serve`` listens on every address (``::`` dual-stack, so VIPs added later are
served without rebinding) and answers each connection with its name. ``watch``
starts one connection attempt per target every ``interval`` seconds and appends
one JSON line per finished attempt to ``--out``: ``start``/``end`` (CLOCK_MONOTONIC,
shared by all processes on the host, so other processes can correlate), ``target``,
``ok``, ``node`` (who answered) or ``error``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Attempt:
    start: float
    end: float
    target: str
    ok: bool
    node: str | None
    error: str | None


def parse_attempts(text: str) -> Iterator[Attempt]:
    """Parse ``watch`` output lines (skips a torn or foreign line)."""
    for line in text.splitlines():
        try:
            d = json.loads(line)
            yield Attempt(d["start"], d["end"], d["target"], d["ok"], d.get("node"), d.get("error"))
        except (ValueError, KeyError, TypeError):
            continue


async def serve(name: str, port: int) -> None:
    reply = (name + "\n").encode()

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(reply)
            await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    server = await asyncio.start_server(handle, sock=sock, backlog=1024)
    async with server:
        await server.serve_forever()


def _split_target(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


async def _attempt(target: str, timeout_s: float, out: IO[str]) -> None:
    host, port = _split_target(target)
    start = time.monotonic()
    node: str | None = None
    error: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                node = (await reader.readline()).decode().strip() or None
            finally:
                writer.close()
        if node is None:
            error = "empty reply"
    except TimeoutError:
        error = "timeout"
    except OSError as exc:
        error = type(exc).__name__
    end = time.monotonic()
    ok = error is None
    out.write(
        json.dumps(
            {"start": start, "end": end, "target": target, "ok": ok, "node": node, "error": error}
        )
        + "\n"
    )
    out.flush()


async def watch(targets: list[str], interval_s: float, timeout_s: float, out: IO[str]) -> None:
    pending: set[asyncio.Task[None]] = set()
    next_at = time.monotonic()
    while True:
        for target in targets:
            task = asyncio.create_task(_attempt(target, timeout_s, out))
            pending.add(task)
            task.add_done_callback(pending.discard)
        next_at += interval_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teapot_lb.vrrp.probe", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--name", required=True)
    s.add_argument("--port", type=int, default=7000)
    w = sub.add_parser("watch")
    w.add_argument("--target", action="append", required=True)
    w.add_argument("--interval", type=float, default=0.01)
    w.add_argument("--timeout", type=float, default=2.0)
    w.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve(args.name, args.port))
    else:
        with args.out.open("a") as out:
            asyncio.run(watch(args.target, args.interval, args.timeout, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
