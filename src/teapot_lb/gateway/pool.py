"""The backend pool: HAProxy backend sections made ahead, so that a new backend needs no
reload.

HAProxy 2.6 cannot add a backend section at run time (it can change a server's address
and state, and a map's rows). So the backends that only HTTP routing sends to, and that
look alike (http mode, no health check, no PROXY protocol, slots not fixed: `pooled`),
are not rendered under their own name but in a section of the pool (`pool_<i>`), and the
pool keeps spare sections, empty, their server slots in maintenance. A new such backend
takes a spare: its endpoints go into the spare's slots (`set server`) and the maps route
to it; a backend gone leaves its section to the pool as a spare (the slots to
maintenance). The sections' text does not change either way (a slot's address and state
are not structure), so neither needs a reload.

Placement is sticky, as slots are (slots.py): a backend keeps its section while it
exists; a new one takes the spare empty the longest that has slots enough for it (a
spare freed by this very change is not taken: its servers may still hold idle
connections to the endpoints just removed, which HAProxy would reuse for the new
backend's requests). Only when no spare is left does the pool grow (a reload), by half
its use, so that growth is rare (`pool_size`); it never shrinks while the gateway runs.
Pure: the previous pool and the slot table in, the next pool out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from teapot_lb.gateway.config import Backend, GatewayConfig
from teapot_lb.gateway.slots import NEVER_USED, Slot, SlotTable, assign_backend, slot_count

POOL_STEP = 16
"""The fewest spares the pool grows by, and the size it is a multiple of."""

SPARE = Backend(name="spare")
"""What a spare section holds: no endpoints (its slots are all empty)."""


def pool_size(used: int) -> int:
    """Sections for `used` backends and half as many spares (at least POOL_STEP), rounded
    up to a multiple of POOL_STEP."""
    need = used + max(POOL_STEP, used // 2)
    return -(-need // POOL_STEP) * POOL_STEP


POOL_PREFIX = "pool_"
"""The pool's section ids (a named backend's section is `be_<name>`: no clash)."""


def pool_id(index: int) -> str:
    return f"{POOL_PREFIX}{index}"


def pooled(backend: Backend) -> bool:
    """A backend whose section looks like every spare's (given it is sent to in http
    mode): no health check, no PROXY protocol, its slot count not fixed."""
    return backend.health_check is None and not backend.proxy_protocol and backend.slots is None


@dataclass(frozen=True)
class Section:
    """One section of the pool: the backend in it (None: a spare) and its slots."""

    backend: str | None
    slots: tuple[Slot, ...]

    @property
    def freed(self) -> int:
        """The number of the change that emptied its last slot (of a spare: since when it
        has been empty; NEVER_USED: never held an endpoint)."""
        return max((s.freed for s in self.slots), default=NEVER_USED)


@dataclass(frozen=True)
class Pool:
    """The pool's sections (pool_0 first) and which section holds which backend."""

    sections: tuple[Section, ...] = ()

    def ids(self) -> dict[str, str]:
        """Backend name -> its section's id."""
        return {s.backend: pool_id(i) for i, s in enumerate(self.sections) if s.backend}

    @property
    def used(self) -> int:
        return sum(s.backend is not None for s in self.sections)


def _spare_slots(count: int) -> tuple[Slot, ...]:
    return (Slot(None),) * count


def place(
    backends: Sequence[Backend], table: SlotTable, previous: Pool | None = None, change: int = 0
) -> tuple[Pool, dict[str, tuple[Slot, ...]]]:
    """The pool for `backends` (those to be pooled, in the config's order) at change number
    `change` and the slots of each backend that has just taken a spare (its endpoints
    placed in the spare's slots; `table` has every other one's). A section whose backend
    and slots are as they were is the same object (a spare stays as it is)."""
    wanted = {b.name: b for b in backends}
    sections: list[Section] = []
    for old in previous.sections if previous is not None else ():
        if old.backend is not None and old.backend in wanted:
            held = table[old.backend]
            sections.append(old if held is old.slots else Section(old.backend, held))
        elif old.backend is None:
            sections.append(old)
        else:  # freed now: empty, its slots freed by this change
            sections.append(Section(None, assign_backend(SPARE, old.slots, change)))
    held_now = {s.backend for s in sections}
    new = [b for b in backends if b.name not in held_now]
    if not new:
        return Pool(tuple(sections)), {}
    free = [i for i, s in enumerate(sections) if s.backend is None and s.freed < change]
    if len(free) < len(new):
        size = max(pool_size(len(wanted)), len(sections) + len(new) - len(free))
        free += range(len(sections), size)
        sections += [Section(None, _spare_slots(slot_count(0)))] * (size - len(sections))
    # The spares by slot count, each in the order they are taken: empty the longest
    # first, then the lowest.
    by_count: dict[int, deque[int]] = {}
    for i in sorted(free, key=lambda i: (sections[i].freed, i)):
        by_count.setdefault(len(sections[i].slots), deque()).append(i)
    placed: dict[str, tuple[Slot, ...]] = {}
    for b in new:
        need = slot_count(len(b.endpoints))
        # A spare with slots enough (no growth, no reload), else the one with the most.
        heads = [q for n, q in by_count.items() if q and n >= need]
        if not heads:
            heads = [
                max((q for q in by_count.values() if q), key=lambda q: len(sections[q[0]].slots))
            ]
        queue = min(heads, key=lambda q: (sections[q[0]].freed, q[0]))
        pick = queue.popleft()
        placed[b.name] = assign_backend(b, sections[pick].slots, change)
        sections[pick] = Section(b.name, placed[b.name])
    return Pool(tuple(sections)), placed


def stream_backends(config: GatewayConfig) -> set[str]:
    """The backends a TCP, TLS passthrough or UDP route sends to (never pooled: their
    frontends name them)."""
    names = {r.backend for route in config.tls_routes for r in route.backends}
    names.update(r.backend for route in config.tcp_routes for r in route.backends)
    names.update(r.backend for route in config.udp_routes for r in route.backends)
    return names


__all__ = [
    "POOL_PREFIX",
    "POOL_STEP",
    "SPARE",
    "Pool",
    "Section",
    "place",
    "pool_id",
    "pool_size",
    "pooled",
    "stream_backends",
]
