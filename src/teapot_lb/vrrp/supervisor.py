"""Run keepalived for one node: start, reload on change, restart on death, report.

The adapter around :mod:`teapot_lb.vrrp.render`: it owns a state directory
(config, pid files, notify FIFO, track files, keepalived's log), runs keepalived
as a child (``-n``: no fork; ``-P``: VRRP only), sends SIGHUP only when the
rendered text changed, restarts it with exponential backoff when it dies, reads
state transitions from the notify FIFO and keeps a map of instance -> state.

When keepalived dies without cleaning up (SIGKILL, crash), the VIPs it held stay
on the interfaces and the node would keep answering ARP for them next to the new
master. The supervisor removes them at once, before the restart backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import ipaddress
import os
import signal
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from teapot_lb import log
from teapot_lb.vrrp.group import IPAddress
from teapot_lb.vrrp.instances import anchor_address
from teapot_lb.vrrp.notify import NotifyParser, Transition, UnparsedLine, VrrpState
from teapot_lb.vrrp.render import Rendered, RenderPaths


def _log() -> Any:
    return log.get("vrrp.supervisor")


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM (a clean keepalived stop) if we die."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass(frozen=True)
class InstanceStatus:
    name: str
    state: VrrpState
    priority: int | None
    vips: tuple[IPAddress, ...]
    since: float  # time.monotonic()


@dataclass
class SupervisorCounters:
    """Monotonic counters, for metrics."""

    starts: int = 0
    unexpected_exits: int = 0
    reloads: int = 0
    transitions: Counter[str] = field(default_factory=Counter)
    dual_master_resolutions: int = 0  # MASTER_RX_LOWER_PRI seen
    unparsed_notify_lines: int = 0
    stale_vips_removed: int = 0


@dataclass(frozen=True)
class StateDir:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "keepalived.conf"

    @property
    def pid(self) -> Path:
        return self.root / "keepalived.pid"

    @property
    def vrrp_pid(self) -> Path:
        return self.root / "vrrp.pid"

    @property
    def fifo(self) -> Path:
        return self.root / "notify.fifo"

    @property
    def track_dir(self) -> Path:
        return self.root / "track"

    @property
    def log(self) -> Path:
        return self.root / "keepalived.log"

    def render_paths(self) -> RenderPaths:
        return RenderPaths(notify_fifo=self.fifo, track_dir=self.track_dir)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class KeepalivedSupervisor:
    """One keepalived for one node. Use :meth:`apply`, :meth:`set_track`, :meth:`stop`."""

    def __init__(
        self,
        state_dir: Path,
        *,
        binary: str = "keepalived",
        on_transition: Callable[[Transition], None] | None = None,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
        stable_after_s: float = 10.0,
        ready_timeout_s: float = 10.0,
        stop_timeout_s: float = 5.0,
        remove_addresses: Callable[[Rendered], int] | None = None,
    ) -> None:
        self.dirs = StateDir(Path(state_dir))
        self.binary = binary
        self.on_transition = on_transition
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.stable_after_s = stable_after_s
        self.ready_timeout_s = ready_timeout_s
        self.stop_timeout_s = stop_timeout_s
        # How to clear what a dead keepalived left on the interfaces (netlink by default).
        self.remove_addresses = remove_addresses or _remove_addresses
        self.counters = SupervisorCounters()
        self._states: dict[str, InstanceStatus] = {}
        self._desired: Rendered | None = None
        self._desired_gen = 0
        self._applied_gen = 0
        self._running: Rendered | None = None  # what keepalived has loaded
        self._changed = asyncio.Event()
        self._applied = asyncio.Condition()
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._fifo_fd: int | None = None
        self._parser = NotifyParser()
        self.dirs.root.mkdir(parents=True, exist_ok=True)
        self.dirs.track_dir.mkdir(exist_ok=True)

    # ------------------------------------------------------------------ public

    @property
    def paths(self) -> RenderPaths:
        """Pass to :func:`teapot_lb.vrrp.render.render`."""
        return self.dirs.render_paths()

    @property
    def pid(self) -> int | None:
        """The keepalived parent's pid while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    @property
    def states(self) -> dict[str, InstanceStatus]:
        """Instance name -> state; the VIPs are those of the configuration running now
        (a reload adds and removes VIPs without a state transition)."""
        return {name: self._current(status) for name, status in self._states.items()}

    def masters(self) -> dict[str, tuple[IPAddress, ...]]:
        """Instance name -> VIPs, for the instances this node is MASTER of."""
        return {n: s.vips for n, s in self.states.items() if s.state is VrrpState.MASTER}

    def _current(self, status: InstanceStatus) -> InstanceStatus:
        plan = self._running.instance(status.name) if self._running else None
        if plan is None or plan.vips == status.vips:
            return status
        return replace(status, vips=plan.vips)

    async def apply(self, rendered: Rendered, *, timeout_s: float = 15.0) -> None:
        """Make keepalived run ``rendered`` (start, SIGHUP or stop) and wait until it has.

        A text identical to the one keepalived runs changes nothing (no SIGHUP).
        """
        self._desired = rendered
        self._desired_gen += 1
        gen = self._desired_gen
        self._ensure_started()
        self._changed.set()
        async with asyncio.timeout(timeout_s), self._applied:
            await self._applied.wait_for(lambda: self._applied_gen >= gen)

    def set_track(self, track_file: PurePath, ok: bool) -> None:
        """Write a track file: ``ok`` False puts the instances tracking it in FAULT.

        keepalived watches the file (inotify) and reacts without a reload.
        """
        _write_atomic(Path(track_file), "0\n" if ok else "1\n")

    async def stop(self) -> None:
        """Stop keepalived cleanly (SIGTERM; SIGKILL after a timeout) and stop watching."""
        self._stopping = True
        self._changed.set()
        await self._terminate()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._close_fifo()

    # ------------------------------------------------------------------ loop

    def _ensure_started(self) -> None:
        if self._task is None and not self._stopping:
            self._open_fifo()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="keepalived")

    async def _mark_applied(self, gen: int) -> None:
        async with self._applied:
            self._applied_gen = max(self._applied_gen, gen)
            self._applied.notify_all()

    async def _run(self) -> None:
        backoff = self.backoff_initial_s
        while not self._stopping:
            self._changed.clear()
            desired, gen = self._desired, self._desired_gen
            if desired is None or not desired.instances:
                # Nothing to run on this node: keepalived is not needed.
                await self._mark_applied(gen)
                await self._changed.wait()
                continue
            started_at = time.monotonic()
            proc = await self._spawn(desired)
            if not await self._wait_ready(proc):
                _log().warning("keepalived did not become ready", pid=proc.pid)
            else:
                await self._mark_applied(gen)
            exit_waiter = asyncio.ensure_future(proc.wait())
            try:
                while not exit_waiter.done():
                    change = asyncio.ensure_future(self._changed.wait())
                    await asyncio.wait({exit_waiter, change}, return_when=asyncio.FIRST_COMPLETED)
                    change.cancel()
                    if exit_waiter.done() or self._stopping:
                        break
                    self._changed.clear()
                    if self._desired is None or not self._desired.instances:
                        break
                    await self._reload_if_changed(proc)
            finally:
                if not exit_waiter.done():
                    exit_waiter.cancel()
            if self._stopping:
                return
            if proc.returncode is None:
                # Desired is now empty: stop keepalived, then wait for work again.
                await self._terminate()
                continue
            self.counters.unexpected_exits += 1
            _log().error("keepalived exited", returncode=proc.returncode, pid=proc.pid)
            await self._after_exit()
            if time.monotonic() - started_at > self.stable_after_s:
                backoff = self.backoff_initial_s
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    while not self._stopping:
                        await self._changed.wait()
                        self._changed.clear()
            backoff = min(backoff * 2, self.backoff_max_s)

    async def _reload_if_changed(self, proc: asyncio.subprocess.Process) -> None:
        desired, gen = self._desired, self._desired_gen
        assert desired is not None
        if self._running is not None and desired.text == self._running.text:
            self._running = desired  # same text; keep the newest plan objects
            await self._mark_applied(gen)
            return
        _write_atomic(self.dirs.config, desired.text)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGHUP)
        self._running = desired
        self.counters.reloads += 1
        removed = {i.name for i in self._states.values()} - {i.name for i in desired.instances}
        for name in removed:
            self._states.pop(name, None)
        _log().info("keepalived reloaded", instances=len(desired.instances))
        await self._mark_applied(gen)

    async def _spawn(self, desired: Rendered) -> asyncio.subprocess.Process:
        _write_atomic(self.dirs.config, desired.text)
        for p in (self.dirs.pid, self.dirs.vrrp_pid):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        # keepalived's own log: appended across restarts, started afresh when large.
        mode = "ab" if _size(self.dirs.log) < _LOG_MAX_BYTES else "wb"
        logf = self.dirs.log.open(mode)
        try:
            proc = await asyncio.create_subprocess_exec(
                self.binary,
                "--dont-fork",
                "--log-console",
                "--no-syslog",
                "--vrrp",
                "--use-file",
                str(self.dirs.config),
                "--pid",
                str(self.dirs.pid),
                "--vrrp_pid",
                str(self.dirs.vrrp_pid),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=logf,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            logf.close()
        self._proc = proc
        self._running = desired
        self.counters.starts += 1
        _log().info("keepalived started", pid=proc.pid, instances=len(desired.instances))
        return proc

    async def _wait_ready(self, proc: asyncio.subprocess.Process) -> bool:
        """Ready = the VRRP child wrote its pid file (signal handlers are installed)."""
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline and proc.returncode is None:
            with contextlib.suppress(FileNotFoundError, ValueError):
                child = int(self.dirs.vrrp_pid.read_text().strip())
                os.kill(child, 0)
                return True
            await asyncio.sleep(0.01)
        return False

    async def _terminate(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self.stop_timeout_s):
                await proc.wait()
        except TimeoutError:
            _log().warning("keepalived ignored SIGTERM; killing it", pid=proc.pid)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            await self._after_exit()
            return
        self._drop_states()

    async def _after_exit(self) -> None:
        """keepalived is gone: forget states and remove any VIP it left behind."""
        running = self._running
        # The VRRP child may outlive a killed parent for a moment; it must not
        # re-add addresses after we remove them.
        _kill_orphan_child(self.dirs.vrrp_pid)
        self._drop_states()
        if running is not None:
            removed = await asyncio.to_thread(self.remove_addresses, running)
            self.counters.stale_vips_removed += removed
            if removed:
                _log().warning("removed VIPs left by a dead keepalived", count=removed)

    def _drop_states(self) -> None:
        for name in list(self._states):
            self._emit(Transition("INSTANCE", name, VrrpState.STOP, None))

    # ------------------------------------------------------------------ notify FIFO

    def _open_fifo(self) -> None:
        path = self.dirs.fifo
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISFIFO(path.stat().st_mode):
                path.unlink()
        if not path.exists():
            os.mkfifo(path, 0o600)
        # O_RDWR: we hold a writer ourselves, so keepalived restarting never gives EOF.
        self._fifo_fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        asyncio.get_running_loop().add_reader(self._fifo_fd, self._on_fifo)

    def _close_fifo(self) -> None:
        if self._fifo_fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fifo_fd)
            os.close(self._fifo_fd)
            self._fifo_fd = None

    def _on_fifo(self) -> None:
        assert self._fifo_fd is not None
        try:
            data = os.read(self._fifo_fd, 65536)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                return
            raise
        for event in self._parser.feed(data):
            if isinstance(event, UnparsedLine):
                self.counters.unparsed_notify_lines += 1
                _log().warning("unparsed keepalived notify line", line=event.line, why=event.reason)
            elif event.kind == "INSTANCE":
                self._emit(event)

    def _emit(self, event: Transition) -> None:
        self.counters.transitions[event.state.value] += 1
        if event.state is VrrpState.MASTER_RX_LOWER_PRI:
            self.counters.dual_master_resolutions += 1
        elif event.state in (VrrpState.DELETED, VrrpState.STOP):
            self._states.pop(event.name, None)
        elif event.state.is_state:
            plan = self._running.instance(event.name) if self._running else None
            self._states[event.name] = InstanceStatus(
                name=event.name,
                state=event.state,
                priority=event.priority,
                vips=plan.vips if plan else (),
                since=time.monotonic(),
            )
        _log().info(
            "vrrp transition", instance=event.name, state=event.state.value, prio=event.priority
        )
        if self.on_transition is not None:
            try:
                self.on_transition(event)
            except Exception:
                _log().exception("transition callback failed")


_LOG_MAX_BYTES = 16 << 20


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _kill_orphan_child(pid_file: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        child = int(pid_file.read_text().strip())
        if Path(f"/proc/{child}/comm").read_text().startswith("keepalived"):
            os.kill(child, signal.SIGKILL)


def _remove_addresses(rendered: Rendered) -> int:
    """Delete every address keepalived may have added for ``rendered``; count removals."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    removed = 0
    ipr: Any = IPRoute()
    try:
        for plan in rendered.instances:
            links = ipr.link_lookup(ifname=plan.interface)
            if not links:
                continue
            anchor = ipaddress.ip_interface(anchor_address(plan.family, plan.vrid))
            wanted = [(a, a.max_prefixlen) for a in plan.vips] + [
                (anchor.ip, anchor.network.prefixlen)
            ]
            for addr, plen in wanted:
                try:
                    ipr.addr("del", index=links[0], address=str(addr), prefixlen=plen)
                    removed += 1
                except NetlinkError:
                    pass  # not there: nothing to clean
    finally:
        ipr.close()
    return removed
