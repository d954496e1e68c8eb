"""L2 backend: heartbeats among the speakers, and ARP/NDP responders for the claimed IPs.

Membership (:mod:`teapot_lb.membership`) tells which speakers are alive; the plan uses
that (`PlanOptions.live_speakers`) for the per-IP election, so every speaker computes the
same owner. This backend then only acquires and releases IPs on the responders. Like the
standalone L2 agent, a starting speaker claims nothing for one detection interval, so it
has heard every live peer first and never answers alongside the current owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from ipaddress import ip_address
from typing import Any

from teapot_lb import log
from teapot_lb.l2.announcer import IPAddress
from teapot_lb.l2.responder import InterfaceInfo, Responder, default_interfaces, interfaces
from teapot_lb.membership.core import MemberChanged, Membership, Timing
from teapot_lb.membership.udp import DEFAULT_PORT, UdpHeartbeats


class L2Backend:
    def __init__(
        self,
        node: str,
        *,
        on_change: Callable[[], None],
        timing: Timing | None = None,
        port: int = DEFAULT_PORT,
        list_interfaces: Callable[[], Awaitable[dict[str, InterfaceInfo]]] = interfaces,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.timing = timing or Timing()
        self.port = port
        self._on_change = on_change
        self._list_interfaces = list_interfaces
        self._clock = clock
        self.membership = Membership(node=node, incarnation=time.time_ns(), timing=self.timing)
        self.responders: dict[str, Responder] = {}
        self.owned: dict[IPAddress, tuple[str, ...]] = {}  # IP -> interfaces answering
        self.errors: dict[str, str] = {}  # IP -> why it cannot be answered
        self._peers: tuple[str, ...] = ()
        self._heartbeats: UdpHeartbeats | None = None
        self._task: asyncio.Task[None] | None = None
        self._started_at = clock()
        self._ready_timer: asyncio.TimerHandle | None = None
        self._log: Any = log.get("speaker.l2").bind(node=node)

    # --- liveness ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._clock() >= self._started_at + self.timing.detection

    def live_speakers(self) -> frozenset[str]:
        return self.membership.alive()

    def set_peers(self, addresses: Sequence[str]) -> None:
        """The other speakers' addresses; heartbeats restart only when the set changes."""
        peers = tuple(sorted(set(addresses)))
        if peers == self._peers and self._heartbeats is not None:
            return
        self._peers = peers
        self._stop_heartbeats()
        self._heartbeats = UdpHeartbeats(
            self.membership, list(peers), on_change=self._members_changed, port=self.port
        )
        self._task = asyncio.get_running_loop().create_task(
            self._heartbeats.run(), name="l2-heartbeats"
        )
        if self._ready_timer is None and not self.ready:
            delay = self._started_at + self.timing.detection - self._clock() + 0.001
            self._ready_timer = asyncio.get_running_loop().call_later(delay, self._on_change)

    def _members_changed(self, changes: list[MemberChanged]) -> None:
        for c in changes:
            self._log.info(
                "member",
                member=c.node,
                old=c.old.value if c.old else None,
                new=c.new.value,
                reason=c.reason,
            )
        self._on_change()

    def _stop_heartbeats(self) -> None:
        task, heartbeats = self._task, self._heartbeats
        self._task = self._heartbeats = None
        if heartbeats is None:
            return
        if task is None or task.done():
            heartbeats.close()
            return
        # Close the socket only once the task has let go of it (it removes its reader).
        task.add_done_callback(lambda _: heartbeats.close())
        task.cancel()

    # --- claims -----------------------------------------------------------------------------

    async def apply(self, claims: Mapping[str, tuple[str, ...]]) -> None:
        """Answer for exactly these IPs (IP → interfaces; empty: by subnet)."""
        want: dict[IPAddress, tuple[str, ...]] = {}
        self.errors = {}
        if claims and self.ready:
            infos = await self._list_interfaces()
            for text, ifaces in claims.items():
                ip = ip_address(text)
                names: list[str] = list(ifaces) or default_interfaces(ip, infos)
                missing = [n for n in names if n not in infos]
                names = [n for n in names if n in infos]
                if missing:
                    self.errors[text] = f"interface(s) {', '.join(missing)} not on this node"
                if not names:
                    self.errors.setdefault(text, "no interface's subnet contains the IP")
                    continue
                want[ip] = tuple(names)
                for name in names:
                    if name not in self.responders:
                        r = Responder(infos[name])
                        r.start()
                        self.responders[name] = r
        for ip, held in list(self.owned.items()):
            keep = want.get(ip, ())
            for name in held:
                if name not in keep:
                    self.responders[name].release(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=False)
            if not keep:
                del self.owned[ip]
        for ip, wanted in want.items():
            had = self.owned.get(ip, ())
            for name in wanted:
                if name not in had:
                    r = self.responders[name]
                    r.watch(set(want) | set(r.owned))
                    r.acquire(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=True)
            self.owned[ip] = wanted
        for r in self.responders.values():
            r.watch({ip for ip, where in want.items() if r.info.name in where})

    def counters(self) -> dict[str, Any]:
        return {name: vars(r.counters) for name, r in self.responders.items()}

    def shutdown(self) -> None:
        """Stop answering at once and tell the peers we leave, so they take over now."""
        for ip, names in self.owned.items():
            for name in names:
                self.responders[name].release(ip)
        self.owned.clear()
        if self._heartbeats is not None:
            with contextlib.suppress(OSError):
                self._heartbeats.goodbye()
        self._stop_heartbeats()
        if self._ready_timer is not None:
            self._ready_timer.cancel()
        for r in self.responders.values():
            r.close()
        self.responders.clear()


__all__ = ["DEFAULT_PORT", "L2Backend"]
