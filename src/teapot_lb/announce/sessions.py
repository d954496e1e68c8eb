"""Which BGP sessions are Established, laid over decisions planned as if all were.

A route is held for a peer whose session is not Established, never dropped: the routes a
node announces do not depend on its sessions, only the words and peers of its BGP
decisions do ("announced to tor1; held for tor2 ..."). So the planner decides every
Service as if every session were up, and the sessions are laid over the decisions
afterwards (:func:`lay`). With a plan cache (:class:`Laid`), a session coming up or
going down then costs a pass over the kept decisions, not planning every Service again,
and changes no announcement (issue 37 goal 5: a session flap at 10,000 Services had every
Service planned again, ~0.8 s of CPU, while new Services waited).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from teapot_lb.announce.announcement import Decision, Mode
from teapot_lb.announce.per_service import PerService
from teapot_lb.announce.totals import PlanResult

ANNOUNCED = "announced to "


@dataclass(frozen=True)
class Sessions:
    """`established`: the peers whose session on this node is Established (None: assume
    every one is); `down`: peers known not to be, also when `established` is None."""

    established: frozenset[str] | None = None
    down: frozenset[str] = frozenset()
    _held: dict[tuple[str, ...], tuple[str, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _words: dict[tuple[tuple[str, ...], str], _Words | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def of(cls, established: Collection[str] | None, down: Collection[str]) -> Sessions:
        if established is None and not down:
            return ALL_UP
        return cls(None if established is None else frozenset(established), frozenset(down))

    def held(self, targets: tuple[str, ...]) -> tuple[str, ...]:
        """Of `targets`, the peers a route is held for (sorted), once per distinct set."""
        found = self._held.get(targets)
        if found is None:
            up = self.established
            found = tuple(
                sorted(p for p in targets if p in self.down or (up is not None and p not in up))
            )
            self._held[targets] = found
        return found

    def words(self, targets: tuple[str, ...], reason: str) -> _Words | None:
        """What a decision announced to `targets` with `reason` (every session up) says
        with these sessions; None: the same. Once per distinct reason (most decisions of a
        node share a few)."""
        key = (targets, reason)
        if key in self._words:
            return self._words[key]
        waiting = self.held(targets)
        found = _words(targets, reason, waiting) if waiting else None
        self._words[key] = found
        return found


_Words = tuple[bool, str, tuple[str, ...], tuple[str, ...]]


def _words(targets: tuple[str, ...], reason: str, waiting: tuple[str, ...]) -> _Words:
    """A decision's words and peers, announced to `targets` with every session up (its
    `reason`), when the sessions of `waiting` are not Established."""
    suffix = reason[len(ANNOUNCED) + len(", ".join(targets)) :]  # bounds, notes
    held = f"held for {', '.join(waiting)} (session not Established: not received there)"
    up = tuple(p for p in targets if p not in waiting)
    if not up:
        return False, f"no session Established: {held}{suffix}", (), waiting
    return True, sys.intern(ANNOUNCED + ", ".join(up) + f"; {held}" + suffix), up, waiting


ALL_UP = Sessions()


def announced(peers: tuple[str, ...], suffix: str) -> str:
    """The reason of a BGP decision announced to `peers` (sorted), every one Established;
    `suffix`: the bounds and notes that follow (empty, or starting with " (" or "; ")."""
    return sys.intern(ANNOUNCED + ", ".join(peers) + suffix)  # one string per reason


def with_sessions(decision: Decision, sessions: Sessions) -> Decision:
    """`decision` (made with every session up) as it is with `sessions`: the same object
    unless a peer it is announced to has no Established session."""
    if decision.mode is not Mode.BGP or not decision.announces or sessions is ALL_UP:
        return decision
    words = sessions.words(decision.peers, decision.reason)
    if words is None:
        return decision
    announces, reason, peers, waiting = words
    d = decision
    return Decision(d.service, d.ip, d.node, d.mode, announces, reason, peers, waiting)


def lay(decisions: tuple[Decision, ...], sessions: Sessions) -> tuple[Decision, ...]:
    """:func:`with_sessions` of each decision: `decisions` itself when none changes."""
    if sessions is ALL_UP:
        return decisions
    laid = tuple(with_sessions(d, sessions) for d in decisions)
    return decisions if all(a is b for a, b in zip(laid, decisions, strict=True)) else laid


def _lay_result(result: PlanResult, sessions: Sessions) -> PlanResult:
    decisions = lay(result[1], sessions)
    return result if decisions is result[1] else (result[0], decisions)


Delta = list[tuple[str, PlanResult | None, PlanResult | None]]


class Laid:
    """The sessions laid over a plan cache's per-Service results, kept between calls: the
    results as the totals hold them, changed by what the plans and the sessions changed."""

    def __init__(self) -> None:
        self.sessions = ALL_UP
        # Where the laid result is not the planned one itself (a held route).
        self._laid: dict[str, PlanResult] = {}

    def results(self, plans: PerService[PlanResult]) -> Iterator[PlanResult]:
        """Every Service's result with the sessions laid, in key order."""
        laid = self._laid
        return (laid.get(key, result) for key, result in plans.items())

    def update(self, plans: PerService[PlanResult], sessions: Sessions) -> Delta | None:
        """Lay `sessions` over what `plans` just gave: what changed in the laid results
        since the last call, or None when the plans walked every Service (the totals are
        then built again from :meth:`results`)."""
        before, self.sessions = self.sessions, sessions
        laid = self._laid
        if plans.delta is None:
            self._laid = {}
            for key, result in plans.items():
                if (mine := _lay_result(result, sessions)) is not result:
                    self._laid[key] = mine
            return None
        delta: Delta = []
        for key, old, new in plans.delta:
            held: PlanResult | None = laid.pop(key, old)
            given = None if new is None else _lay_result(new, sessions)
            if given is not None and given is not new:
                laid[key] = given
            delta.append((key, held, given))
        if sessions != before:  # every Service's words may change, not its routes
            planned = {key for key, _, _ in plans.delta}
            for key, result in plans.items():
                if key in planned:
                    continue
                was = laid.get(key, result)
                now = _lay_result(result, sessions)
                if now is was or now == was:
                    continue
                if now is result:
                    del laid[key]
                else:
                    laid[key] = now
                delta.append((key, was, now))
        return delta
