"""Server slots: which HAProxy server line of a backend holds which endpoint.

HAProxy can change a server's address and state at run time but not add servers, so each
backend gets a fixed number of server lines ("slots"); endpoints move in and out of them
through the runtime API. Assignment is sticky: an endpoint keeps its slot while it exists
(its connections and health state stay put), a removed endpoint's slot is freed, a new one
takes the free slot that has been empty the longest (lowest first on a tie). HAProxy keeps a
server line's idle connections across `set server addr`, so a slot freed by this very
change, still holding connections to the endpoint just removed, is the last choice: taking
it would send requests to the removed endpoint over those connections. Only when endpoints
outgrow the slots does the count grow (a reload). Pure: the previous table and the change's
number in, the next table out.

An empty slot holds the number of the change that freed it, not a count of changes since
(which would move at every change): a backend whose endpoints did not change keeps its
slots as they were, so a change costs the backends it touched (`assign` keeps the others'
slots by identity, and the renderer and the plan skip them by identity too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teapot_lb.gateway.config import Backend, Endpoint, GatewayConfig

MIN_SLOTS = 4
NEVER_USED = -(1 << 62)  # `Slot.freed` of a slot no endpoint has held: freed before any change


def slot_count(endpoints: int) -> int:
    """Room for the endpoints and as many again (a rolling update doubles them briefly),
    as a power of two so that slow growth rarely changes the count."""
    need = max(MIN_SLOTS, 2 * endpoints)
    return 1 << (need - 1).bit_length()


@dataclass(frozen=True)
class Slot:
    """One server line: the endpoint in it (None: empty, in maintenance) and, while it is
    empty, the number of the change that freed it (the smaller, the longer it has been
    empty)."""

    endpoint: Endpoint | None
    freed: int = NEVER_USED

    @property
    def key(self) -> tuple[str, int] | None:
        e = self.endpoint
        return None if e is None else (str(e.address), e.port)


SlotTable = Mapping[str, tuple[Slot, ...]]
"""Backend name → its slots (server s1 is index 0)."""


def assign_backend(
    backend: Backend, previous: tuple[Slot, ...] | None, change: int
) -> tuple[Slot, ...]:
    """One backend's slots at change number `change`, keeping its endpoints of `previous`
    where they were (the slots of the section it is rendered as: its own, or a spare's
    when it has just taken one)."""
    by_key = {(str(e.address), e.port): e for e in backend.endpoints}
    wanted = backend.slots or slot_count(len(by_key))
    count = max(wanted, len(previous or ())) if backend.slots is None else wanted
    if count < len(by_key):
        count = slot_count(len(by_key))
    slots: list[Endpoint | None] = [None] * count
    freed = [NEVER_USED] * count
    kept: list[Slot | None] = [None] * count  # (an empty slot left as it was: the same object)
    placed: set[tuple[str, int]] = set()
    for i, old in enumerate((previous or ())[:count]):
        key = old.key
        if key is not None and key in by_key:
            slots[i] = by_key[key]
            placed.add(key)
        elif key is not None:
            freed[i] = change  # its endpoint went with this change
        else:
            freed[i], kept[i] = old.freed, old
    # Empty the longest first (the lowest number), the lowest slot on a tie; one freed by
    # this change last.
    free = iter(sorted((i for i, e in enumerate(slots) if e is None), key=lambda i: freed[i]))
    for key, endpoint in by_key.items():
        if key not in placed:
            slots[next(free)] = endpoint
    return tuple(
        Slot(e) if e is not None else kept[i] or Slot(None, freed[i]) for i, e in enumerate(slots)
    )


def assign(
    config: GatewayConfig,
    previous: SlotTable | None = None,
    change: int = 0,
    assigned_from: Mapping[str, Backend] | None = None,
) -> dict[str, tuple[Slot, ...]]:
    """The slot table for `config` at change number `change` (each change a higher one),
    keeping every endpoint of `previous` where it was. `assigned_from`: the backends
    `previous` was assigned for, by name; one of `config` that is the same object keeps its
    slots of `previous` as they are (the same result, without a look at its endpoints)."""
    prev = previous or {}
    before = assigned_from or {}
    table: dict[str, tuple[Slot, ...]] = {}
    for b in config.backends:
        held = prev.get(b.name)
        if held is not None and before.get(b.name) is b:
            table[b.name] = held
        else:
            table[b.name] = assign_backend(b, held, change)
    return table
