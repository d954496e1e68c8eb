"""Capturing the frames that cross one bridge port, with their arrival times."""

from __future__ import annotations

import socket
import threading
import time

from teapot_lb.lab.netns import netns_socket

_ETH_P_ALL = 3


class Sniffer:
    """Captures every frame crossing port ``port`` of the switch in namespace ``switch_ns``."""

    def __init__(self, switch_ns: str, port: str) -> None:
        self._sock = netns_socket(
            switch_ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL)
        )
        self._sock.bind((port, 0))
        self._sock.settimeout(0.1)
        self.frames: list[tuple[float, bytes]] = []  # (time.monotonic(), frame)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.frames.append((time.monotonic(), data))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()
