"""A runnable L2 speaker for a static set of IPs: membership + election + responders.

    python -m teapot_lb.l2.agent --node node-a --peers 192.0.2.2,192.0.2.3 \\
        --ips 192.0.2.100,2001:db8::100

Every node runs the same command with its own name and the others' addresses. Each IP is
owned by the first live node in hash order (:mod:`teapot_lb.announce.election`); the owner
answers ARP/NDP on the interfaces whose subnet contains the IP (or on ``--iface``). A node
owns nothing until one detection interval after start, so it has heard every live peer
before claiming (a restarted former owner never answers alongside the current one).
Ownership changes are logged as JSON lines (``"event": "ownership"``) on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any

import click

from teapot_lb import log
from teapot_lb.announce.election import Node, ServiceIP, elect, ranking
from teapot_lb.l2.announcer import Claim, IPAddress
from teapot_lb.l2.claims import ClaimArbiter, ClaimTiming, Verdict
from teapot_lb.l2.responder import InterfaceInfo, Responder, default_interfaces, interfaces
from teapot_lb.l2.wire import format_mac
from teapot_lb.membership.core import MemberChanged, Membership, Timing
from teapot_lb.membership.udp import DEFAULT_PORT, UdpHeartbeats


@dataclass
class AgentConfig:
    node: str
    ips: Sequence[IPAddress]
    peers: Sequence[str]
    ifaces: Sequence[str] = ()  # empty: per IP, the interfaces whose subnet contains it
    port: int = DEFAULT_PORT
    bind: str | None = None
    timing: Timing = field(default_factory=Timing)
    claim_timing: ClaimTiming = field(default_factory=ClaimTiming)
    refresh: float | None = None
    key: bytes | None = None


class Agent:
    """Wires the pure pieces to sockets; :meth:`reconcile` is level-triggered and idempotent."""

    def __init__(
        self,
        config: AgentConfig,
        infos: dict[str, InterfaceInfo],
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self._clock = clock
        self._infos = infos
        self._log: Any = log.get("l2.agent").bind(node=config.node)
        self.services: dict[IPAddress, ServiceIP] = {}
        self.nodes: list[Node] | None = None  # None: every speaker heard, without labels
        self.placement: dict[IPAddress, list[str]] = {}
        self.responders: dict[str, Responder] = {}
        self._running = False
        self.membership = Membership(
            node=config.node, incarnation=time.time_ns(), timing=config.timing, key=config.key
        )
        self.heartbeats = UdpHeartbeats(
            self.membership,
            config.peers,
            on_change=self._on_members,
            port=config.port,
            bind=config.bind,
            clock=clock,
        )
        self.arbiter = ClaimArbiter(config.node, config.claim_timing)
        self._started_at = clock()
        self._ready = False
        self._timer: asyncio.TimerHandle | None = None
        self.update([ServiceIP(ip) for ip in config.ips])

    def update(self, services: Sequence[ServiceIP], nodes: Sequence[Node] | None = None) -> None:
        """Replace the IPs to announce and, optionally, the node view (labels, conditions).

        The speaker calls this whenever its informers change; IPs that disappear are
        released at once, new ones are placed on interfaces and elected.
        """
        self.services = {svc.ip: svc for svc in services}
        self.nodes = list(nodes) if nodes is not None else None
        for ip in list(self.placement):
            if ip not in self.services:
                for name in self.placement.pop(ip):
                    if ip in self.responders[name].owned:
                        self.responders[name].release(ip)
                        self._log.info(
                            "ownership", ip=str(ip), iface=name, owned=False, reason="removed"
                        )
        for ip in self.services:
            if ip not in self.placement:
                self.placement[ip] = self._place(ip)
        for names in self.placement.values():
            for name in names:
                if name not in self.responders:
                    r = Responder(
                        self._infos[name], on_claim=self._on_claim, refresh=self.config.refresh
                    )
                    self.responders[name] = r
                    if self._running:
                        r.start()
        self.membership.macs = tuple(r.info.mac for r in self.responders.values())
        for r in self.responders.values():
            r.watch(set(self.placement))
        if self._running:
            self.reconcile()

    def _place(self, ip: IPAddress) -> list[str]:
        names = list(self.config.ifaces) or default_interfaces(ip, self._infos)
        missing = [n for n in names if n not in self._infos]
        if missing:
            raise click.UsageError(f"unknown interface(s) {', '.join(missing)}")
        if not names:
            # Not fatal: the other IPs still work. Interfaces are read once at start.
            self._log.warning("unplaced", ip=str(ip), reason="no interface subnet contains it")
        return names

    # --- decisions ---

    def desired(self, now: float) -> dict[IPAddress, str]:
        """IP -> why this node does or does not own it now (owned iff the value is 'elected')."""
        if not self._ready:
            return {
                ip: "starting: waiting one detection interval to hear peers"
                for ip in self.placement
            }
        nodes = self.nodes if self.nodes is not None else [Node(n) for n in self.membership.known()]
        alive = self.membership.alive()
        out: dict[IPAddress, str] = {}
        for ip in self.placement:
            reason = elect(self.services[ip], nodes, alive).reason(self.config.node)
            if reason == "elected" and self.arbiter.silenced(ip, now):
                reason = "yielded: a better-ranked node claims it (split-brain arbitration)"
            out[ip] = reason
        return out

    def reconcile(self) -> None:
        now = self._clock()
        if not self._ready and now >= self._started_at + self.config.timing.detection:
            self._ready = True
        for ip, reason in self.desired(now).items():
            want = reason == "elected"
            for name in self.placement[ip]:
                responder = self.responders[name]
                if want and ip not in responder.owned:
                    responder.acquire(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=True, reason=reason)
                elif not want and ip in responder.owned:
                    responder.release(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=False, reason=reason)
        self._arm(now)

    def _arm(self, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        deadlines = [self.arbiter.next_deadline()]
        if not self._ready:
            deadlines.append(self._started_at + self.config.timing.detection)
        pending = [d for d in deadlines if d is not None]
        if pending:
            delay = max(min(pending) - now, 0.0) + 0.001
            self._timer = asyncio.get_running_loop().call_later(delay, self.reconcile)

    # --- events ---

    def _on_members(self, changes: list[MemberChanged]) -> None:
        for c in changes:
            self._log.info("member", **c.log_fields())
        self.reconcile()

    def _on_claim(self, responder: Responder, claim: Claim) -> None:
        now = self._clock()
        claimant = self.membership.node_of_mac(claim.mac)
        verdict = self.arbiter.judge(
            claim.ip,
            claimant=claimant,
            claimant_mac=claim.mac,
            own_mac=responder.info.mac,
            ranking=ranking(claim.ip, self.membership.known()),
            owned=claim.ip in responder.owned,
            now=now,
        )
        if verdict is Verdict.IGNORE:
            return
        self._log.info(
            "claim",
            ip=str(claim.ip),
            iface=responder.info.name,
            claimant=claimant,
            mac=format_mac(claim.mac),
            verdict=verdict.value,
        )
        if verdict is Verdict.DEFEND:
            t = self.arbiter.timing
            responder.defend(claim.ip, until=now + t.memory, every=t.refresh)
        else:
            self.reconcile()

    # --- running ---

    async def _keep_defending(self) -> None:
        """While a heartbeat partition lasts, keep the IPs we defended announced."""
        t = self.arbiter.timing
        while True:
            await asyncio.sleep(t.refresh)
            now = self._clock()
            for ip in self.arbiter.still_contested(self.membership.alive()):
                owning = [n for n in self.placement.get(ip, []) if ip in self.responders[n].owned]
                if not owning:
                    del self.arbiter.contested[ip]  # released meanwhile: nothing to defend
                for name in owning:
                    self.responders[name].keep_defending(ip, until=now + t.memory, every=t.refresh)

    async def run(self) -> None:
        self._running = True
        for r in self.responders.values():
            r.start()
        self._log.info(
            "started",
            ips=[str(ip) for ip in self.placement],
            ifaces=sorted(self.responders),
            peers=list(self.config.peers),
            interval=self.config.timing.interval,
            dead_after=self.config.timing.dead_after,
        )
        self.reconcile()
        defending = asyncio.ensure_future(self._keep_defending())
        try:
            await self.heartbeats.run()
        finally:
            defending.cancel()

    def shutdown(self) -> None:
        """Graceful stop: stop answering, tell peers to take over now."""
        for r in self.responders.values():
            for ip in list(r.owned):
                r.release(ip)
                self._log.info(
                    "ownership", ip=str(ip), iface=r.info.name, owned=False, reason="shutdown"
                )
        self.heartbeats.goodbye()
        self._log.info(
            "counters",
            **{name: vars(r.counters) for name, r in self.responders.items()},
            heartbeats=vars(self.membership.counters),
            max_gap_s={m.node: round(m.max_gap, 4) for m in self.membership.members.values()},
        )
        for r in self.responders.values():
            r.close()
        self.heartbeats.close()


async def _main(config: AgentConfig) -> None:
    agent = Agent(config, await interfaces())
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(agent.run())
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    agent.shutdown()


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


@click.command("l2-agent")
@click.option("--node", required=True, help="This node's name (unique among the speakers).")
@click.option("--ips", required=True, help="Comma-separated Service IPs (v4 and/or v6).")
@click.option("--peers", default="", help="Comma-separated addresses of the other speakers.")
@click.option("--iface", "ifaces", default="", help="Comma-separated interfaces to answer on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, help="Heartbeat UDP port.")
@click.option("--bind", default=None, help="Local address for heartbeats (default: any).")
@click.option("--interval", default=0.02, show_default=True, help="Heartbeat interval (s).")
@click.option("--suspect-after", default=3, show_default=True, help="Missed intervals.")
@click.option("--dead-after", default=8, show_default=True, help="Missed intervals.")
@click.option("--refresh", default=None, type=float, help="Re-announce owned IPs every N s.")
@click.option("--claim-hold", default=3.0, show_default=True, help="Yield to a claim for N s.")
@click.option(
    "--claim-memory", default=10.0, show_default=True, help="Defend after a claim for N s."
)
@click.option("--key-file", default=None, type=click.Path(exists=True, dir_okay=False))
@click.option("--log-level", default="info", show_default=True)
def main(
    node: str,
    ips: str,
    peers: str,
    ifaces: str,
    port: int,
    bind: str | None,
    interval: float,
    suspect_after: int,
    dead_after: int,
    refresh: float | None,
    claim_hold: float,
    claim_memory: float,
    key_file: str | None,
    log_level: str,
) -> None:
    """Run membership, election and ARP/NDP responders for a static set of IPs."""
    log.configure(log_level, json=True, component="l2-agent")
    key = None
    if key_file:
        with open(key_file, "rb") as fh:
            key = fh.read().strip()
    config = AgentConfig(
        node=node,
        ips=[ip_address(i) for i in _split(ips)],
        peers=_split(peers),
        ifaces=_split(ifaces),
        port=port,
        bind=bind,
        timing=Timing(interval=interval, suspect_after=suspect_after, dead_after=dead_after),
        claim_timing=ClaimTiming(
            hold=claim_hold, memory=claim_memory, refresh=min(1.0, claim_hold / 3)
        ),
        refresh=refresh,
        key=key,
    )
    asyncio.run(_main(config))
    sys.exit(0)


if __name__ == "__main__":
    main()
