"""The lab's client: HTTP requests from inside the client namespace.

One thread enters the client namespace (``setns`` affects only the calling thread) and
runs an asyncio loop there; every socket it opens lives in that namespace. The rest of
the lab calls it from the main thread. Each request is a new TCP connection, so each
gets a new source port: the router's L4 ECMP hash spreads them over next hops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Sequence

from teapot_lb.lab.measure import Attempt
from teapot_lb.lab.netns import enter_netns

CONNECT_TIMEOUT_S = 0.2
REPLY_TIMEOUT_S = 0.5


def target_of(ip: str, port: int) -> str:
    """How an :class:`Attempt` names its target."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


async def request(ip: str, port: int, *, connect_timeout: float = CONNECT_TIMEOUT_S) -> Attempt:
    """One ``GET /``; the answering node's name comes back in the body."""
    start = time.monotonic()
    target = target_of(ip, port)
    try:
        async with asyncio.timeout(connect_timeout):
            reader, writer = await asyncio.open_connection(ip, port)
    except TimeoutError:
        return Attempt(start, time.monotonic(), target, None, "connect timeout")
    except OSError as exc:
        return Attempt(start, time.monotonic(), target, None, exc.strerror or type(exc).__name__)
    try:
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            writer.write(f"GET / HTTP/1.0\r\nHost: {ip}\r\n\r\n".encode())
            data = await reader.read(4096)
    except (TimeoutError, OSError) as exc:
        return Attempt(start, time.monotonic(), target, None, f"reply: {type(exc).__name__}")
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.") or b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
        return Attempt(start, time.monotonic(), target, None, "bad reply")
    name = body.decode(errors="replace").strip()
    return Attempt(start, time.monotonic(), target, name or None, None if name else "empty body")


class Probe:
    """Requests to some targets every ``interval`` seconds until stopped."""

    def __init__(self, client: Client, targets: Sequence[tuple[str, int]], interval: float):
        self.client = client
        self.targets = list(targets)
        self.interval = interval
        self.attempts: list[Attempt] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._future: concurrent.futures.Future[None] = client.submit(self._run())

    async def _run(self) -> None:
        pending: set[asyncio.Task[None]] = set()
        next_at = time.monotonic()
        while not self._stop.is_set():
            for ip, port in self.targets:
                task = asyncio.create_task(self._one(ip, port))
                pending.add(task)
                task.add_done_callback(pending.discard)
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if pending:
            await asyncio.wait(pending)

    async def _one(self, ip: str, port: int) -> None:
        attempt = await request(ip, port)
        with self._lock:
            self.attempts.append(attempt)

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self.attempts)

    def stop(self) -> list[Attempt]:
        self._stop.set()
        self._future.result(timeout=10)
        return self.snapshot()


class Client:
    """An asyncio loop in a thread inside the client namespace."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self._loop = asyncio.new_event_loop()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self._thread.start()
        ready.result(timeout=10)

    def _main(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            enter_netns(self.ns)
        except OSError as exc:
            ready.set_exception(exc)
            return
        asyncio.set_event_loop(self._loop)
        ready.set_result(None)
        self._loop.run_forever()
        self._loop.close()

    def submit(self, coro: object) -> concurrent.futures.Future[None]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def get(self, ip: str, port: int) -> Attempt:
        fut = asyncio.run_coroutine_threadsafe(request(ip, port), self._loop)
        return fut.result(timeout=10)

    def burst(self, ip: str, port: int, count: int) -> list[Attempt]:
        """``count`` requests one after the other (each from a new source port)."""

        async def run() -> list[Attempt]:
            return [await request(ip, port) for _ in range(count)]

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=count + 10)

    def probe(self, targets: Sequence[tuple[str, int]], interval: float = 0.01) -> Probe:
        return Probe(self, targets, interval)

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
