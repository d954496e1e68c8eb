"""Split-brain arbiter: what an owner does when another station claims its IP (pure).

Heartbeats can be lost while nodes and the data path are fine (a firewall dropping the
heartbeat port, a one-way fault). Then two speakers may each think they own an IP. The
newcomer sends a gratuitous ARP / unsolicited NA at once on acquisition; the sitting owner
sees it as a *claim*. Both sides apply the same rule to the same pair, so they agree
without talking:

* the node ranked better for the IP (the election's hash order over every node ever
  heard, alive or not) wins; if the claimant's node is unknown (its MAC never appeared in
  a heartbeat), the lower MAC wins;
* the winner *defends*: it re-announces at once, so the link's last word is its own, and
  every ``refresh`` seconds for ``memory`` seconds after the last claim — and for as long
  as the claimant (a known node) stays dead in its view, i.e. the partition lasts;
* the loser *yields*: it stops answering at once and stays silent while it keeps hearing
  the winner (``hold`` seconds after the winner's last announcement). If the winner dies
  during the partition, the loser takes the IP back ``hold`` seconds later.

Two owners therefore coexist for one frame's round trip per claim, not indefinitely: the
winner's refreshes keep the loser silent for the whole partition. (A claimant whose MAC no
heartbeat ever listed is defended against for ``memory`` seconds only; if it claims again,
that conflict is again resolved in one round trip.) Announcements by a better-ranked node
only silence a node that owns the IP or has already yielded it: a standby never lets the
owner's routine announcements delay its takeover.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import Enum
from ipaddress import IPv4Address, IPv6Address

from teapot_lb.timers import ArmTimer

IPAddress = IPv4Address | IPv6Address


class Verdict(Enum):
    IGNORE = "ignore"  # not ours and the claimant does not outrank us
    DEFEND = "defend"  # we own it and outrank the claimant: re-announce
    YIELD = "yield"  # the claimant outranks us: stop answering


@dataclass(frozen=True)
class ClaimTiming:
    hold: float = 3.0  # a loser stays silent this long after the winner's last claim
    memory: float = 10.0  # a winner keeps re-announcing this long after the last claim
    refresh: float = 1.0  # ... at this interval (well below ``hold``)


@dataclass(frozen=True)
class Judgement:
    """A verdict, and the timer orders that come with it: yielding (re)arms the IP's
    silence for ``hold`` seconds (the timers' style of :mod:`teapot_lb.timers`; the
    adapter calls :meth:`ClaimArbiter.timer_expired` when it runs out)."""

    verdict: Verdict
    timers: tuple[ArmTimer[IPAddress], ...] = ()


@dataclass
class ClaimArbiter:
    """Judges claims; no clock: the silence of a yielded IP is a timer it orders."""

    node: str
    timing: ClaimTiming = field(default_factory=ClaimTiming)
    _silenced: set[IPAddress] = field(default_factory=set, init=False)
    # IP -> the known node we defended it against, while that node may try again.
    contested: dict[IPAddress, str] = field(default_factory=dict, init=False)

    def judge(
        self,
        ip: IPAddress,
        *,
        claimant: str | None,
        claimant_mac: bytes,
        own_mac: bytes,
        ranking: Sequence[str],
        owned: bool,
    ) -> Judgement:
        """Judge a claim for ``ip`` by ``claimant`` (None: its MAC maps to no known node)."""
        if claimant == self.node:
            return Judgement(Verdict.IGNORE)  # another interface of ours
        if claimant is not None and claimant in ranking and self.node in ranking:
            claimant_wins = ranking.index(claimant) < ranking.index(self.node)
        else:
            claimant_wins = claimant_mac < own_mac
        if claimant_wins:
            # The legitimate owner's announcements are claims too; they only silence a node
            # that answers for the IP (a conflict) or already yielded it (keep yielding).
            if owned or self.silenced(ip):
                self._silenced.add(ip)
                return Judgement(Verdict.YIELD, (ArmTimer(ip, self.timing.hold),))
            return Judgement(Verdict.IGNORE)
        if not owned:
            return Judgement(Verdict.IGNORE)
        if claimant is not None:
            self.contested[ip] = claimant
        return Judgement(Verdict.DEFEND)

    def still_contested(self, alive: Collection[str]) -> list[IPAddress]:
        """The IPs to keep defending: their claimant is still dead in our view, so the
        partition that made it claim lasts and it would claim again when its hold ends.
        Claimants we hear again agree with us on the owner: those IPs are settled."""
        for ip, claimant in list(self.contested.items()):
            if claimant in alive:
                del self.contested[ip]
        return list(self.contested)

    def silenced(self, ip: IPAddress) -> bool:
        """True while a better-ranked claimant was heard less than ``hold`` ago."""
        return ip in self._silenced

    def timer_expired(self, ip: IPAddress) -> None:
        """``hold`` passed without the winner's claim: ``ip`` may be answered again."""
        self._silenced.discard(ip)
