"""From one rendering to the next: a reload, or runtime API actions, and why.

A reload is needed when the structure changes (frontends, routes, backends, slot counts,
the crt-lists). Everything else goes over the runtime API without one: an endpoint moving
in or out of a slot (`set server addr`, `set server state`) and a certificate's new PEM
(`set ssl cert` + `commit ssl cert`). Pure: two renderings in, a `Change` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from teapot_lb.gateway.render import Rendered, backend_id, sections, server_name
from teapot_lb.gateway.slots import Slot


class ServerState(StrEnum):
    READY = "ready"
    MAINT = "maint"  # no new traffic; requests in flight finish (a removed endpoint drains)


@dataclass(frozen=True)
class SetServer:
    """Point a slot at an endpoint (address/port None: leave the address) and set its state."""

    backend: str
    server: str
    state: ServerState
    address: str | None = None
    port: int | None = None


@dataclass(frozen=True)
class SetCertificate:
    """Replace a loaded certificate's PEM (chain and key) at `path`."""

    path: str
    pem: str


RuntimeAction = SetServer | SetCertificate


@dataclass(frozen=True)
class Change:
    """What applying the new rendering takes: a reload (with the reasons) or actions."""

    reload: bool
    reasons: tuple[str, ...] = ()
    actions: tuple[RuntimeAction, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.reload and not self.actions


def _section_changes(old: str, new: str) -> list[str]:
    before, after = dict(sections(old)), dict(sections(new))
    reasons = [f"{h} added" for h in after if h not in before]
    reasons += [f"{h} removed" for h in before if h not in after]
    reasons += [f"{h} changed" for h in after if h in before and before[h] != after[h]]
    return reasons


def _slot_actions(backend: str, index: int, old: Slot, new: Slot) -> list[SetServer]:
    be, srv = backend_id(backend), server_name(index)
    e = new.endpoint
    if e is None:
        return [] if old.endpoint is None else [SetServer(be, srv, ServerState.MAINT)]
    state = ServerState.READY if e.ready else ServerState.MAINT
    if old.key != new.key:
        return [SetServer(be, srv, state, str(e.address), e.port)]
    if old.endpoint is not None and old.endpoint.ready != e.ready:
        return [SetServer(be, srv, state)]
    return []


def plan(old: Rendered | None, new: Rendered) -> Change:
    """What it takes to go from `old` (None: nothing running) to `new`."""
    if old is None:
        return Change(True, ("first configuration",))
    if old.structure != new.structure:
        return Change(True, tuple(_section_changes(old.structure, new.structure)) or ("crt-list",))
    actions: list[RuntimeAction] = []
    for backend, slots in new.slots.items():
        previous = old.slots.get(backend, ())
        for i, (before, after) in enumerate(zip(previous, slots, strict=True)):
            actions += _slot_actions(backend, i, before, after)
    for path, pem in new.certificates.items():
        if old.certificates.get(path) != pem:
            actions.append(SetCertificate(path, pem))
    return Change(False, (), tuple(actions))
