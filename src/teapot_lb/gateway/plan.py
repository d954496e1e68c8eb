"""From one rendering to the next: a reload, or runtime API actions, and why.

A reload is needed when the structure changes (frontends, routes, backends, slot counts),
a crt-list's first line (the default) or a certificate's names in it change, or a
certificate map's name now chooses another certificate.
Everything else goes over the runtime API without one: an endpoint moving in or out of a
slot (`set server addr`, `set server state`), a certificate's new PEM (`set ssl cert` +
`commit ssl cert`, the gateway's own default one too), a certificate added to a crt-list
(`new ssl cert`, `set`, `commit`, `add ssl crt-list`; HAProxy picks a certificate by SNI,
whatever the place of its line after the first, which is always the gateway's own), and
its names added to the certificate maps of the 421 check (`add map`); a certificate's
line removed from a crt-list (its names out of those maps, `del map`, then `del ssl
crt-list`, and `del ssl cert` once no crt-list has it). Tenant lines
reordered change nothing HAProxy does (each name is in one line only). The fast map's
rows (exact host -> backend section) change over the runtime API whatever the change
(`add map`, `set map`, `del map`): with the backend pool (gateway.pool) a simple virtual
host added to a new backend takes a spare section, which is one of these and `set
server`s. Pure: two renderings in, a `Change` out.

The order of the actions makes before it breaks: servers that come up first, then
certificates, then the rows that route to them; rows that route away before the servers
that go to maintenance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from teapot_lb.gateway import slots
from teapot_lb.gateway.config import GatewayConfig
from teapot_lb.gateway.pool import POOL_PREFIX, pool_id
from teapot_lb.gateway.render import Paths, Rendered, render, sections, server_name
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


@dataclass(frozen=True)
class AddCertificate:
    """Load a new certificate at `path` (unless `loaded`) and add its crt-list `line`."""

    path: str
    pem: str
    crt_list: str
    line: str
    loaded: bool = False


@dataclass(frozen=True)
class RemoveCertificate:
    """Remove the line of certificate `path` from crt-list `crt_list` and, `unload`, the
    certificate itself (no crt-list has it any more)."""

    path: str
    crt_list: str
    unload: bool


@dataclass(frozen=True)
class AddMapEntry:
    """Add `key` -> `value` to the loaded map file `path` (a certificate map's new name, a
    fast host's); `replace`: change the value of the row `key` has (a host sent
    elsewhere)."""

    path: str
    key: str
    value: str
    replace: bool = False


@dataclass(frozen=True)
class DelMapEntry:
    """Remove `key` from the loaded map file `path` (a host no longer routed by it)."""

    path: str
    key: str


RuntimeAction = (
    SetServer | SetCertificate | AddCertificate | RemoveCertificate | AddMapEntry | DelMapEntry
)


@dataclass(frozen=True)
class Change:
    """What applying the new rendering takes: a reload (with the reasons) or actions."""

    reload: bool
    reasons: tuple[str, ...] = ()
    actions: tuple[RuntimeAction, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.reload and not self.actions


def _section_changes(old: Rendered, new: Rendered) -> list[str]:
    """What differs, by section; a pool section named with the backend it holds."""
    before, after = dict(sections(old.structure)), dict(sections(new.structure))
    held = {f"backend {pool_id(i)}": s.backend for i, s in enumerate(new.pool.sections)}
    grown = [h for h in after if h not in before and h.startswith(f"backend {POOL_PREFIX}")]
    reasons = []
    if grown:  # (one reason, not one per section)
        used = len([h for h in before if h.startswith(f"backend {POOL_PREFIX}")])
        reasons.append(f"backend pool grown from {used} to {used + len(grown)} sections")
    reasons += [f"{h} added" for h in after if h not in before and h not in grown]
    reasons += [f"{h} removed" for h in before if h not in after]
    reasons += [
        f"{h} ({held[h]}) changed" if held.get(h) else f"{h} changed"
        for h in after
        if h in before and before[h] != after[h]
    ]
    return reasons


def _slot_actions(section: str, index: int, old: Slot, new: Slot) -> list[SetServer]:
    be, srv = section, server_name(index)
    e = new.endpoint
    if e is None:
        return [] if old.endpoint is None else [SetServer(be, srv, ServerState.MAINT)]
    state = ServerState.READY if e.ready else ServerState.MAINT
    if old.key != new.key:
        return [SetServer(be, srv, state, str(e.address), e.port)]
    if old.endpoint is not None and old.endpoint.ready != e.ready:
        return [SetServer(be, srv, state)]
    return []


def step(
    config: GatewayConfig, running: Rendered | None, paths: Paths, pems: Mapping[str, str]
) -> tuple[Rendered, Change]:
    """The rendering of `config` after `running` (what HAProxy serves; None: nothing),
    with the sticky state carried over (slots, the backend pool, the crt-lists' lines),
    and what it takes to get there. When that is a reload, the crt-lists are made again
    with one line per certificate (HAProxy reads them anew)."""
    if running is None:
        number, table, pool, held = 0, slots.assign(config), None, None
    else:
        number = running.change + 1
        table = slots.assign(config, running.slots, number, running.backends)
        pool, held = running.pool, running.crt_lists
    new = render(config, table, paths, pems, running, pool, held, number)
    change = plan(running, new)
    if change.reload and held is not None:
        new = render(config, table, paths, pems, new, pool, change=number)
    return new, change


def plan(old: Rendered | None, new: Rendered) -> Change:
    """What it takes to go from `old` (None: nothing running) to `new`."""
    if old is None:
        return Change(True, ("first configuration",))
    if old.structure != new.structure:
        return Change(True, tuple(_section_changes(old, new)) or ("?",))
    added, unloaded, why = _crt_list_changes(old, new)
    rows, unnamed, why_maps = _certificate_map_changes(old.certificate_maps, new.certificate_maps)
    if why or why_maps:
        return Change(True, (*why, *why_maps))
    up: list[RuntimeAction] = []
    down: list[RuntimeAction] = []
    for section, held in new.servers.items():
        previous = old.servers.get(section, ())
        if previous is held:  # (a section whose slots did not change: the same object)
            continue
        for i, (before, after) in enumerate(zip(previous, held, strict=True)):
            for action in _slot_actions(section, i, before, after):
                # Make before break: servers come up before others go to maintenance, so a
                # backend whose only endpoint is replaced always has one to send to.
                (down if action.state is ServerState.MAINT else up).append(action)
    actions = up
    fresh = {a.path for a in added}
    for path, pem in new.certificates.items():
        if path in old.certificates and old.certificates[path] != pem:
            actions.append(SetCertificate(path, pem))
        elif path not in old.certificates and path not in fresh:
            return Change(True, (f"certificate {path} added",))
    actions += added
    # After the certificates: either order is consistent (both names of a request are
    # looked up in the same maps), this one also matches what HAProxy presents.
    actions += rows
    routed, unrouted = _route_map_changes(old.route_maps, new.route_maps)
    actions += routed
    actions += unrouted
    # A certificate's names out of the 421 check's maps, then out of the crt-lists.
    actions += unnamed
    actions += unloaded
    actions += down
    return Change(False, (), tuple(actions))


def _changed_rows(old: str, new: str) -> tuple[dict[str, str], dict[str, str]]:
    """A map's rows (key -> value) that `new` has and `old` has not (added, or with another
    value), and those `old` has and `new` has not, each in its map's order. (The lines
    compared as sets: a change costs its rows, not a dict of every row.)"""
    before, after = old.splitlines(), new.splitlines()
    came, went = set(after).difference(before), set(before).difference(after)
    return _rows(after, came), _rows(before, went)


def _rows(lines: list[str], wanted: set[str]) -> dict[str, str]:
    if not wanted:
        return {}
    return dict(line.partition(" ")[::2] for line in lines if line in wanted)


def _route_map_changes(
    old: dict[str, str], new: dict[str, str]
) -> tuple[list[RuntimeAction], list[RuntimeAction]]:
    """The fast maps' rows added or changed, and those removed, as actions (a map itself
    is added or removed with its frontend: a reload, decided by the structure)."""
    routed: list[RuntimeAction] = []
    unrouted: list[RuntimeAction] = []
    for path in sorted(old.keys() & new.keys()):
        if old[path] == new[path]:
            continue
        came, went = _changed_rows(old[path], new[path])
        routed += [AddMapEntry(path, k, v, replace=k in went) for k, v in came.items()]
        unrouted += [DelMapEntry(path, key) for key in went if key not in came]
    return routed, unrouted


def _certificate_map_changes(
    old: dict[str, str], new: dict[str, str]
) -> tuple[list[AddMapEntry], list[DelMapEntry], list[str]]:
    """The rows added to and removed from the certificate maps (as actions), or why that
    is not enough (a reload: a name that now chooses another certificate)."""
    added: list[AddMapEntry] = []
    removed: list[DelMapEntry] = []
    why: list[str] = []
    for path in sorted(old.keys() | new.keys()):
        if path not in old or path not in new:
            why.append(f"map {path} " + ("added" if path in new else "removed"))
            continue
        if old[path] == new[path]:
            continue
        came, went = _changed_rows(old[path], new[path])
        if any(k in went for k in came):
            why.append(f"map {path} changed")
            continue
        added += [AddMapEntry(path, k, v) for k, v in came.items()]
        removed += [DelMapEntry(path, k) for k in went]
    return added, removed, why


def _crt_list_changes(
    old: Rendered, new: Rendered
) -> tuple[list[AddCertificate], list[RemoveCertificate], list[str]]:
    """The lines added to and removed from crt-lists (as actions), or why that is not
    enough (a reload: the first line, the default, changed, or a certificate's names)."""
    added: list[AddCertificate] = []
    removed: list[RemoveCertificate] = []
    loading: set[str] = set()
    why: list[str] = []
    for path in sorted(old.crt_lists.keys() | new.crt_lists.keys()):
        if path not in old.crt_lists or path not in new.crt_lists:
            why.append(f"crt-list {path} " + ("added" if path in new.crt_lists else "removed"))
            continue
        if old.crt_lists[path] == new.crt_lists[path]:
            continue
        before = old.crt_lists[path].splitlines()
        after = new.crt_lists[path].splitlines()
        gone = [line for line in before if line not in set(after)]
        came = [line for line in after if line not in set(before)]
        # (a certificate whose names changed would be out of the list for a moment; one
        # with several lines cannot be told which to delete: HAProxy numbers the lines
        # added at run time as it likes)
        moved = {line.split()[0] for line in gone} & {line.split()[0] for line in came}
        lines_of = Counter(line.split()[0] for line in before)
        if before[:1] != after[:1] or moved or any(lines_of[x.split()[0]] > 1 for x in gone):
            why.append(f"crt-list {path} changed")
            continue
        for line in came:
            cert = line.split()[0]
            loaded = cert in old.certificates or cert in loading
            loading.add(cert)
            pem = new.certificates.get(cert, "")
            added.append(AddCertificate(cert, pem, path, line, loaded))
        for line in gone:
            cert = line.split()[0]
            removed.append(RemoveCertificate(cert, path, cert not in new.certificates))
    # A certificate in two crt-lists is unloaded after its last line is gone.
    last = {r.path: i for i, r in enumerate(removed)}
    removed = [replace(r, unload=r.unload and last[r.path] == i) for i, r in enumerate(removed)]
    return added, removed, why
