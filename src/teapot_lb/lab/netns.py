"""Entering a network namespace from one thread of this process.

``setns()`` moves only the calling thread; sockets it creates stay in that namespace for
their whole life, wherever they are used from afterwards.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter_netns(ns: str) -> None:
    """Move the calling thread into network namespace ``ns`` (by its /run/netns name)."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


def in_netns(ns: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread that entered ``ns``; return its result (or raise its
    exception). The thread ends with ``fn``, so the rest of the process stays where it was."""
    result: dict[str, Any] = {}

    def enter_and_run() -> None:
        try:
            enter_netns(ns)
            result["value"] = fn()
        except BaseException as exc:
            result["error"] = exc

    t = threading.Thread(target=enter_and_run)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    value: T = result["value"]
    return value


def netns_socket(ns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket created inside network namespace ``ns`` (usable from any thread)."""
    return in_netns(ns, lambda: socket.socket(family, kind, proto))
