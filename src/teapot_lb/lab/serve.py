"""The lab's workload: an HTTP server that answers every request with its node's name.

    python -m teapot_lb.lab.serve --name node-1 --port 80

It listens on every address (``::``, dual-stack), so Service IPs bound later on ``lo``
(the kube-proxy emulation) are served without rebinding.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket


async def serve(name: str, port: int) -> None:
    body = (name + "\n").encode()
    reply = (
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, TimeoutError, asyncio.IncompleteReadError):
            async with asyncio.timeout(2):
                await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
            await writer.drain()
        writer.close()

    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    server = await asyncio.start_server(handle, sock=sock, backlog=1024)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m teapot_lb.lab.serve", description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, default=80)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.name, args.port))


if __name__ == "__main__":
    main()
