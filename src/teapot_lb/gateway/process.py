"""One supervised daemon (HAProxy's or nginx's master): start it, wait until it answers,
restart it with backoff when it dies, stop it. The drivers own what it runs; this owns
only the process."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

from teapot_lb import log


def _log() -> Any:
    return log.get("gateway.process")


class DaemonFailed(Exception):
    """The daemon exited while starting (its log says why)."""


async def until(check: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    """Poll an async condition until it holds; TimeoutError naming `what` after `within`."""
    try:
        async with asyncio.timeout(within):
            while not await check():  # noqa: ASYNC110 (the daemons have no event to wait on)
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise TimeoutError(f"timed out after {within:g} s waiting for {what}") from None


class Daemon:
    """A child process in its own session, restarted when it exits unexpectedly.

    `ready()` says when a start has completed (a socket answers, a pid file appeared);
    `before_start()` runs before each start (remove stale sockets); `lock` is held while
    restarting, so a restart never interleaves with a driver's apply.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        ready: Callable[[], Awaitable[bool]],
        before_start: Callable[[], None] = lambda: None,
        lock: asyncio.Lock | None = None,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.ready = ready
        self.before_start = before_start
        self.lock = lock or asyncio.Lock()
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.starts = 0
        self.unexpected_exits = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        """Start the daemon and wait until it is ready (DaemonFailed if it exits first);
        nothing if it runs already."""
        if self.pid is not None:
            return
        self._stopping = False
        logf = self._open_log()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,
            )
        finally:
            logf.close()
        self.starts += 1
        proc = self._proc

        async def started() -> bool:
            if proc.returncode is not None:
                raise DaemonFailed(f"{self.name} exited at start, see {self.log_path}")
            return await self.ready()

        await until(started, within=15.0, what=f"{self.name} to start")
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self._supervise())

    def _open_log(self) -> IO[bytes]:
        self.before_start()
        return open(self.log_path, "ab")  # the child writes it

    async def _supervise(self) -> None:
        backoff = self.backoff_initial_s
        while not self._stopping:
            proc = self._proc
            if proc is None:
                return
            started = time.monotonic()
            await proc.wait()
            if self._stopping or proc is not self._proc:
                continue
            if time.monotonic() - started > self.backoff_max_s:
                backoff = self.backoff_initial_s  # it ran well: a new failure starts over
            self.unexpected_exits += 1
            _log().warning(
                "daemon exited", daemon=self.name, code=proc.returncode, restart_in_s=backoff
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max_s)
            async with self.lock:
                if self._proc is not proc:  # a driver started it meanwhile
                    continue
                try:
                    await self.start()
                except (DaemonFailed, TimeoutError, OSError) as exc:
                    _log().error("daemon restart failed", daemon=self.name, error=str(exc))

    async def stop(self) -> None:
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


async def check_config(argv: Sequence[str], staging_dir: str, final_dir: str) -> str | None:
    """Run a daemon's configuration check; None when it passes, else its complaint (the
    staging directory's paths shown as the final ones)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    if proc.returncode == 0:
        return None
    text = out.decode(errors="replace").replace(staging_dir, final_dir)
    lines = [x for x in text.splitlines() if "ALERT" in x or "emerg" in x] or text.splitlines()
    return " | ".join(lines[:5])
