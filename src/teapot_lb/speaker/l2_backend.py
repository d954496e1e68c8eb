"""L2 backend: heartbeats among the speakers, and ARP/NDP responders for the claimed IPs.

Membership (:mod:`teapot_lb.membership`) tells which speakers are alive; the plan uses
that (`PlanOptions.live_speakers`) for the per-IP election, so every speaker computes the
same owner. This backend then only acquires and releases IPs on the responders. Like the
standalone L2 agent, a starting speaker claims nothing for one detection interval, so it
has heard every live peer first and never answers alongside the current owner.

Two owners at once (heartbeats cut while the LAN works, or two speakers that saw a
configuration change a few hundred milliseconds apart) are settled on the wire by the
split-brain arbiter (:mod:`teapot_lb.l2.claims`): when another station claims an IP we
answer for, the node ranked better wins and the other stops answering. The ranking is
the election order among the nodes *allowed* to own the IP (liveness ignored, so both
sides of a heartbeat partition agree), then every other known node: a node that in its
own view of the configuration may no longer own the IP never silences one that may.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from ipaddress import ip_address
from typing import Any

from teapot_lb import log
from teapot_lb.announce.announcement import Decision, L2Claim, Mode
from teapot_lb.announce.election import ranking
from teapot_lb.announce.fleet import l2_election_orders
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.cluster import ClusterView
from teapot_lb.kept import by_name
from teapot_lb.l2.announcer import Claim, IPAddress
from teapot_lb.l2.claims import ClaimArbiter, ClaimTiming, Verdict
from teapot_lb.l2.responder import Responder
from teapot_lb.membership.core import MemberChanged, Membership, Timing
from teapot_lb.membership.udp import DEFAULT_PORT, UdpHeartbeats
from teapot_lb.model import Node
from teapot_lb.speaker.backend import Step, Wiring
from teapot_lb.speaker.desired import l2_claims
from teapot_lb.speaker.interfaces import (
    InterfaceInfo,
    TimedListing,
    default_interfaces,
    interfaces,
)
from teapot_lb.timers import LoopTimers


def peer_addresses(
    view: ClusterView, node: str, known: dict[str, tuple[Node, list[tuple[int, str]]]] | None = None
) -> list[str]:
    """The other nodes' InternalIPs of this node's heartbeat family (IPv4 first).

    `known` (kept by the caller between calls) holds each Node's parsed addresses, by
    name, for as long as the view holds the very same Node object: a step then parses only
    the Nodes that changed, not all 1,000 (issue 19).
    """
    every = by_name(
        view.nodes,
        {} if known is None else known,
        lambda n: [(a.version, str(a)) for a in n.addresses()],
    )
    mine = every.get(node, [])
    if not mine:
        return []
    family = min(version for version, _ in mine)
    out: list[str] = []
    for name in sorted(every):
        if name != node:
            out.extend(a for version, a in every[name] if version == family)
    return out


class L2Backend:
    """A :class:`~teapot_lb.speaker.backend.Backend` of the node speaker."""

    def __init__(
        self,
        node: str,
        *,
        on_change: Callable[[], None],
        timing: Timing | None = None,
        claim_timing: ClaimTiming | None = None,
        port: int = DEFAULT_PORT,
        key: bytes | None = None,
        list_interfaces: Callable[[], Awaitable[dict[str, InterfaceInfo]]] = interfaces,
        responder: Callable[..., Responder] = Responder,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.timing = timing or Timing()
        self.port = port
        self._on_change = on_change
        self._list_interfaces = TimedListing(list_interfaces, clock=clock)
        self._responder = responder  # a fake in unit tests (the real one needs AF_PACKET)
        self._clock = clock
        self.membership = Membership(
            node=node, incarnation=time.time_ns(), timing=self.timing, key=key
        )
        self.responders: dict[str, Responder] = {}
        self.owned: dict[IPAddress, tuple[str, ...]] = {}  # IP -> interfaces answering
        self.errors: dict[str, str] = {}  # IP -> why it cannot be answered
        self.arbiter = ClaimArbiter(node, claim_timing or ClaimTiming())
        self.orders: Mapping[str, tuple[str, ...]] = {}  # IP -> nodes allowed, election order
        self._silences: LoopTimers[IPAddress] = LoopTimers(self._silence_over)
        self.claims_judged: dict[str, int] = {}  # verdict -> count
        self._peers: tuple[str, ...] = ()
        self._node_addresses: dict[str, tuple[Node, list[tuple[int, str]]]] = {}
        self._heartbeats: UdpHeartbeats | None = None
        self._task: asyncio.Task[None] | None = None
        self._started_at: float | None = None  # when heartbeats first started
        # Kept between steps, so that a step applies what its plan changed (issue 19):
        # each IP's claims (their interface tuples, counted: two Services may claim one
        # IP) and the IP -> interfaces map they make; what the last apply saw (answering
        # at all, the interfaces); whether the arbiter changed its mind since.
        self._claim_counts: dict[str, dict[tuple[str, ...], int]] | None = None
        self._claims: dict[str, tuple[str, ...]] = {}
        self._seen: tuple[bool, dict[str, InterfaceInfo] | None] | None = None
        self._judged = False
        self.resolved = 0  # IPs resolved by the last apply (for tests and benchmarks)
        self._ready_timer: asyncio.TimerHandle | None = None
        self._log = log.get("speaker.l2").bind(node=node)

    # --- the node speaker's backend protocol ------------------------------------------------

    @property
    def mode(self) -> Mode:
        return Mode.L2

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        """The speakers alive (membership): the per-IP election runs among them."""
        return replace(options, live_speakers=self.live_speakers())

    async def apply_plan(self, step: Step) -> None:
        view = step.view
        self.set_peers(peer_addresses(view, step.node, self._node_addresses))
        orders = (
            l2_election_orders(view, step.options, cache=step.cache)
            if view.l2_advertisements
            else {}
        )
        delta = step.delta
        if delta is None or self._claim_counts is None:
            mine = [a for a in step.plan.of_mode(Mode.L2) if isinstance(a, L2Claim)]
            self._claim_counts, self._claims = {}, {}
            self._recount(mine, [])
            await self.apply(self._claims, orders)
            return
        added, removed = delta.of_mode(Mode.L2)
        changed = self._recount(
            [a for a in added if isinstance(a, L2Claim)],
            [a for a in removed if isinstance(a, L2Claim)],
        )
        await self.apply(self._claims, orders, only=changed)

    def _recount(self, added: Sequence[L2Claim], removed: Sequence[L2Claim]) -> set[str]:
        """Count claims in and out; the IPs whose claims changed (their interfaces as
        :func:`~teapot_lb.speaker.desired.l2_claims` makes them, in `_claims`)."""
        counts = self._claim_counts
        assert counts is not None
        for claims, by in ((removed, -1), (added, +1)):
            for c in claims:
                per_ip = counts.setdefault(c.ip, {})
                n = per_ip.get(c.interfaces, 0) + by
                if n > 0:
                    per_ip[c.interfaces] = n
                else:
                    per_ip.pop(c.interfaces, None)
        changed = {c.ip for c in (*removed, *added)}
        for ip in changed:
            held = counts.get(ip)
            if not held:
                counts.pop(ip, None)
                self._claims.pop(ip, None)
            else:
                self._claims[ip] = l2_claims(L2Claim(ip, ifs) for ifs in held)[ip]
        return changed

    def failure_inputs(self) -> object:
        return dict(self.errors)

    def failure(self, decision: Decision) -> str | None:
        return self.errors.get(decision.ip)

    async def withdraw(self) -> None:
        self.shutdown()

    # --- liveness ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True one detection interval after heartbeats started: every live peer heard."""
        started = self._started_at
        return started is not None and self._clock() >= started + self.timing.detection

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
        if self._started_at is None:
            self._started_at = self._clock()
            delay = self.timing.detection + 0.001
            self._ready_timer = asyncio.get_running_loop().call_later(delay, self._on_change)

    def _members_changed(self, changes: list[MemberChanged]) -> None:
        for c in changes:
            self._log.info("member", **c.log_fields())
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

    async def apply(
        self,
        claims: Mapping[str, tuple[str, ...]],
        orders: Mapping[str, tuple[str, ...]] | None = None,
        only: Collection[str] | None = None,
    ) -> None:
        """Answer for exactly these IPs (IP → interfaces; empty: by subnet).

        `orders`: every L2 IP of the cluster → the nodes allowed to own it, in election
        order (for the split-brain arbiter; see the module docstring). `only`: the IPs
        whose claims changed since the last apply — only those are looked at, unless
        something else may have changed any IP's answer since (starting to answer, the
        interfaces, a claim judged or a silence over): then all are.
        """
        self.orders = orders if orders is not None else {}  # read, never copied
        answering = bool(claims) and self.ready
        infos = await self._list_interfaces() if answering else None
        seen = (answering, infos)
        if only is not None and answering and not self._judged and seen == self._seen:
            self._apply_some(claims, only, infos or {})
            return
        self._seen, self._judged = seen, False
        want: dict[IPAddress, tuple[str, ...]] = {}
        self.errors = {}
        self.resolved = 0
        if infos is not None:
            self.membership.macs = tuple(i.mac for i in infos.values() if any(i.mac))
            for text, ifaces in claims.items():
                ip = ip_address(text)
                names = self._resolve(text, ip, ifaces, infos)
                if names:
                    want[ip] = names
        for ip, held in list(self.owned.items()):
            self._hold(ip, held, want.get(ip, ()), acquire=False)
        for ip, wanted in want.items():
            self._hold(ip, self.owned.get(ip, ()), wanted, release=False)

    def _apply_some(
        self,
        claims: Mapping[str, tuple[str, ...]],
        only: Collection[str],
        infos: dict[str, InterfaceInfo],
    ) -> None:
        """:meth:`apply` for the IPs of `only` (the others' answers cannot have changed)."""
        self.resolved = 0
        for text in only:
            self.errors.pop(text, None)
            ip = ip_address(text)
            ifaces = claims.get(text)
            wanted = self._resolve(text, ip, ifaces, infos) if ifaces is not None else ()
            self._hold(ip, self.owned.get(ip, ()), wanted)

    def _resolve(
        self, text: str, ip: IPAddress, ifaces: tuple[str, ...], infos: dict[str, InterfaceInfo]
    ) -> tuple[str, ...]:
        """The interfaces to answer for `ip` on (an error noted when there are none, or
        some are missing); a responder started on each that has none yet."""
        self.resolved += 1
        if self.arbiter.silenced(ip):
            self.errors[text] = "yielded: a better-ranked node claims it (split brain)"
            return ()
        names: list[str] = list(ifaces) or default_interfaces(ip, infos)
        missing = [n for n in names if n not in infos]
        names = [n for n in names if n in infos]
        if missing:
            self.errors[text] = f"interface(s) {', '.join(missing)} not on this node"
        if not names:
            self.errors.setdefault(text, "no interface's subnet contains the IP")
            return ()
        for name in names:
            if name not in self.responders:
                r = self._responder(infos[name], on_claim=self._on_claim)
                r.watch(_Watched(self, name))
                r.start()
                self.responders[name] = r
        return tuple(names)

    def _hold(
        self,
        ip: IPAddress,
        held: tuple[str, ...],
        wanted: tuple[str, ...],
        *,
        release: bool = True,
        acquire: bool = True,
    ) -> None:
        """Answer for `ip` on `wanted` instead of `held`."""
        if release:
            for name in held:
                if name not in wanted:
                    self.responders[name].release(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=False)
            if not wanted:
                self.owned.pop(ip, None)
        if acquire and wanted:
            for name in wanted:
                if name not in held:
                    self.responders[name].acquire(ip)
                    self._log.info("ownership", ip=str(ip), iface=name, owned=True)
            self.owned[ip] = wanted

    def _ranking(self, ip: IPAddress) -> tuple[str, ...]:
        allowed = self.orders.get(str(ip), ())
        rest = [n for n in self.membership.known() if n not in allowed]
        return allowed + ranking(ip, rest)

    def _on_claim(self, responder: Responder, claim: Claim) -> None:
        self._judged = True  # (a silence, or an IP released: the next apply looks at all)
        now = self._clock()
        claimant = self.membership.node_of_mac(claim.mac)
        judgement = self.arbiter.judge(
            claim.ip,
            claimant=claimant,
            claimant_mac=claim.mac,
            own_mac=responder.info.mac,
            ranking=self._ranking(claim.ip),
            owned=claim.ip in responder.owned,
        )
        for order in judgement.timers:
            self._silences.apply(order)
        verdict = judgement.verdict
        if verdict is Verdict.IGNORE:
            return
        self.claims_judged[verdict.value] = self.claims_judged.get(verdict.value, 0) + 1
        self._log.info(
            "claim",
            ip=str(claim.ip),
            iface=responder.info.name,
            claimant=claimant,
            verdict=verdict.value,
        )
        if verdict is Verdict.DEFEND:
            t = self.arbiter.timing
            responder.defend(claim.ip, until=now + t.memory, every=t.refresh)
        else:
            responder.release(claim.ip)  # at once; the next plan keeps it released
        self._on_change()  # re-plan (a yielded IP stays released) and report

    def _silence_over(self, ip: IPAddress) -> None:
        self._judged = True
        self.arbiter.timer_expired(ip)
        self._on_change()  # plan again: the IP may be ours to answer now

    def counters(self) -> dict[str, Any]:
        return {name: vars(r.counters) for name, r in self.responders.items()}

    def shutdown(self) -> None:
        """Stop answering at once and tell the peers we leave, so they take over now."""
        for ip, names in self.owned.items():
            for name in names:
                self.responders[name].release(ip)
        self.owned.clear()
        self._seen = None  # (a later apply looks at every IP)
        if self._heartbeats is not None:
            with contextlib.suppress(OSError):
                self._heartbeats.goodbye()
        self._stop_heartbeats()
        if self._ready_timer is not None:
            self._ready_timer.cancel()
        self._silences.cancel()
        for r in self.responders.values():
            r.close()
        self.responders.clear()


def build(wiring: Wiring) -> L2Backend:
    """The backend of `--modes l2`: heartbeats on `l2_port` (authenticated with
    `heartbeat_key` when set), ARP/NDP responders."""
    return L2Backend(
        wiring.node,
        on_change=wiring.notify,
        timing=Timing(interval=wiring.heartbeat_interval_s),
        port=wiring.l2_port,
        key=wiring.heartbeat_key,
    )


__all__ = ["DEFAULT_PORT", "L2Backend", "build", "peer_addresses"]


class _Watched:
    """The IPs one interface reports claims by other stations for (the split-brain
    arbiter's input): those it answers for, and every other L2 IP of the cluster that this
    node answers for nowhere: a node that yielded an IP, or lost it in the election, keeps
    hearing the winner to stay silent and notices when it is gone. Read from the backend
    at each claim, never copied: a step costs nothing per L2 IP of the cluster."""

    __slots__ = ("_backend", "_name")

    def __init__(self, backend: L2Backend, name: str) -> None:
        self._backend = backend
        self._name = name

    def __contains__(self, ip: object) -> bool:
        where = self._backend.owned.get(ip)  # type: ignore[call-overload]
        if where is not None:
            return self._name in where
        return str(ip) in self._backend.orders
