"""Which changed tenant namespaces the gateway's reconcile translates this turn.

The reconcile is one key: every change coalesces into the next turn, and a turn
translates, applies and writes the status of each namespace that changed since the last.
A tenant churning hundreds of changes a second is then in every turn, and another
tenant's change waits for that tenant's work twice (the turn under way and its own).
The budget: a namespace that was translated last turn and changed again waits one turn
while namespaces that were not are served alone; it is never put off two turns running,
so a churning tenant is still served at least every other turn (its changes meanwhile
fold into that one translation).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    now: frozenset[str]  # translated this turn
    later: frozenset[str]  # put off to the next turn


def this_turn(changed: Set[str], last: Set[str], put_off_last: Set[str]) -> Turn:
    """`changed`: the namespaces changed since the last turn; `last`: those it translated;
    `put_off_last`: those it put off."""
    churning = {ns for ns in changed if ns in last and ns not in put_off_last}
    waiting = set(changed) - churning
    if not churning or not waiting:
        return Turn(frozenset(changed), frozenset())
    return Turn(frozenset(waiting), frozenset(churning))


__all__ = ["Turn", "this_turn"]
