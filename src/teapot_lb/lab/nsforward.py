"""A TCP forwarder from ``127.0.0.1:PORT`` inside a network namespace to ``127.0.0.1:PORT``
of this process's namespace, with faults switched from outside.

The lab's control plane listens on the host's loopback; a node's speaker runs in its own
namespace. The listening socket is made inside the node's namespace and the outgoing
connections in ours, so one process joins the two without an address on any interface.

The mode is read from the ``--control`` file at start and on SIGHUP:

- ``pass``: bytes flow;
- ``blackhole``: connections stay open but nothing passes either way (a cut cable: the
  client sees timeouts, not errors);
- ``refuse``: every connection is reset and new ones are refused (the apiserver is gone);
- ``delay=MS``: every chunk waits MS milliseconds, each way (a slow apiserver);
- ``reset``: every open connection is reset, new ones are accepted and pass (a client
  whose watches break and that reconnects at once: it resumes from where it was).

Run: ``python -m teapot_lb.lab.nsforward --netns NS --listen-port 6443 --to-port P
--control FILE``; ``FILE.ready`` appears once it listens
(:func:`teapot_lb.lab.kubeplane.forward_into`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
from pathlib import Path

from teapot_lb.lab.netns import netns_socket


class Forward:
    def __init__(self, netns: str, listen_port: int, to_port: int, control: Path) -> None:
        self.netns, self.listen_port, self.to_port, self.control = (
            netns,
            listen_port,
            to_port,
            control,
        )
        self.mode = "pass"
        self.delay = 0.0
        self.flowing = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    def read_mode(self) -> None:
        try:
            text = self.control.read_text().strip() or "pass"
        except OSError:
            text = "pass"
        self.mode, _, value = text.partition("=")
        self.delay = float(value) / 1000.0 if self.mode == "delay" and value else 0.0
        if self.mode == "blackhole":
            self.flowing.clear()
        else:
            self.flowing.set()

    async def apply(self) -> None:
        self.read_mode()
        if self.mode in ("refuse", "reset"):
            if self.server is not None and self.mode == "refuse":
                self.server.close()
                self.server = None
            for writer in list(self.writers):
                with contextlib.suppress(OSError):
                    sock = writer.get_extra_info("socket")
                    if sock is not None:  # RST, not FIN: the peer sees a reset
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                writer.close()
            self.writers.clear()
        if self.server is None and self.mode != "refuse":
            await self.listen()

    async def listen(self) -> None:
        sock = netns_socket(self.netns, socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.listen_port))
        sock.listen(128)
        sock.setblocking(False)
        self.server = await asyncio.start_server(self.accept, sock=sock)

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.to_port)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}
        try:
            await asyncio.gather(self.pipe(reader, up_writer), self.pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self.writers.discard(w)
                w.close()

    async def pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()


async def serve(netns: str, listen_port: int, to_port: int, control: Path) -> None:
    forward = Forward(netns, listen_port, to_port, control)
    await forward.apply()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(forward.apply()))
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    control.with_suffix(".ready").write_text("ok\n")
    await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netns", required=True)
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--to-port", type=int, required=True)
    parser.add_argument("--control", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.netns, args.listen_port, args.to_port, args.control))


if __name__ == "__main__":
    main()
