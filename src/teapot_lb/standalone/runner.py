"""`teapot-lb run`: controller and speaker of one node, fed by a manifest directory.

Loop: wait for the manifest watch (inotify, :mod:`.watch`) to report a change — or for
the slow safety re-check, or, without inotify, for the next poll — then compare the
directory's fingerprint; on a change read it (bad documents become
problems, the rest is used), assign IPs with the controller core
(:mod:`teapot_lb.standalone.assign`), put the objects — Services with their assigned
status — into the speaker's Store and let the speaker plan and apply. Status goes to
`<state-dir>/status.json` (rewritten atomically after every step) and Events are
appended to `<state-dir>/events.log`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.cluster import Kind, Store, object_key
from teapot_lb.controller import ControllerOptions
from teapot_lb.model import IPAddress, Problem, Service
from teapot_lb.model.problem import FILE
from teapot_lb.speaker.node import NodeSpeaker, StepResult, announced_ips
from teapot_lb.speaker.report import ServiceEvent, decisions_json
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.standalone.assign import (
    Assigner,
    Assignment,
    Planned,
    planned_objects,
    planned_of,
)
from teapot_lb.standalone.delta import (
    Changes,
    blocked,
    file_delta,
    move_requests,
    new_problems,
    patched,
    requests_of,
)
from teapot_lb.standalone.directory import (
    PRETTY_MAX,
    FileCache,
    Fingerprint,
    Snapshot,
    fingerprint,
    manifest_files,
    read,
    write_json,
    write_text,
)
from teapot_lb.standalone.first_seen import FirstSeen
from teapot_lb.standalone.status_parts import StatusParts, entry
from teapot_lb.standalone.watch import (
    RECHECK_S,
    SETTLE_S,
    InotifyInit,
    ManifestWatch,
    WatchUnavailable,
    libc_inotify_init,
)


def default_state_dir(manifests: Path, node: str) -> Path:
    base = manifests if manifests.is_dir() else manifests.parent
    return base / ".state" / node


@dataclass
class Loaded:
    snapshot: Snapshot
    assignments: dict[str, Assignment]
    generation: int


@dataclass
class Reloaded:
    """What a reload computed: for the speaker's Store, every object it plans from (a
    full reload), or only what changed (:mod:`.delta`) and the Services whose assignment
    may have (`reassigned`); the assignments go to the Store beside the Services."""

    snapshot: Snapshot
    assignments: dict[str, Assignment]
    planned: Planned | None = None
    changes: Changes | None = None
    reassigned: tuple[str, ...] = ()
    seconds: float = 0.0  # what reading and assigning took
    read_all: bool = True  # every file read (else only the changed ones: .delta)
    # Every Service assigned again (else only those changed: the Assigner's `added`).
    assigned_all: bool = True


class ManifestSource:
    """Keeps the speaker's Store equal to the directory (plus assigned statuses)."""

    def __init__(
        self,
        manifests: Path,
        store: Store,
        *,
        state_dir: Path | None = None,
        options: ControllerOptions | None = None,
        poll_s: float = 0.2,
        recheck_s: float = RECHECK_S,
        settle_s: float = SETTLE_S,
        inotify_init: InotifyInit = libc_inotify_init,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.manifests = manifests
        self.store = store
        self.state_dir = state_dir
        self.options = options or ControllerOptions()
        self.poll_s = poll_s  # only without inotify
        self.recheck_s = recheck_s
        self.settle_s = settle_s
        self.inotify_init = inotify_init
        self.watch: ManifestWatch | None = None
        self._woken = asyncio.Event()
        self.on_change = on_change
        self.loaded: Loaded | None = None
        self._seen: Fingerprint | None = None
        self._files = FileCache()
        self._first_seen = FirstSeen(state_dir)
        # The objects the assignment reads (its own Store: it runs in a thread).
        self._assigning = Store()
        self._assigner = Assigner()
        # Which Services request each IP (for the checks of a quick reload; made by each
        # full reload, then kept up to date).
        self._requests: dict[IPAddress, set[str]] | None = None
        self.quick_reloads = 0  # reloads that patched the last one (:mod:`.delta`)
        self._gone = False
        self._log = log.get("standalone")

    def reload_if_changed(self) -> bool:
        if not self.manifests.exists():
            return self._missing()
        self._gone = False
        files = manifest_files(self.manifests, self.state_dir)
        fp = fingerprint(files)
        if fp == self._seen:
            return False
        self._seen = fp
        self.reload()
        return True

    def _missing(self) -> bool:
        """The manifest directory (or file) is gone: most likely being replaced (a
        checkout, a volume re-mounted), so what was loaded stays in use — withdrawing
        every Service would be the one wrong answer — and the problem is reported."""
        if self._gone:
            return False
        self._gone = True
        self._seen = None  # whatever comes back is read, even an empty directory
        self._files = FileCache()
        message = "does not exist; the last manifests read stay in use until it is back"
        problem = Problem(FILE, str(self.manifests), None, "", message, source=None)
        self._log.error("manifests missing", manifests=str(self.manifests))
        if self.loaded is not None:
            snap = replace(self.loaded.snapshot, problems=[problem])
            self.loaded = replace(self.loaded, snapshot=snap, generation=self.loaded.generation + 1)
        else:
            self.loaded = Loaded(Snapshot(problems=[problem]), {}, 1)
        if self.on_change is not None:
            self.on_change()
        return True

    def reload(self) -> Loaded:
        return self._apply(self._compute())

    def _compute(self) -> Reloaded:
        """Read and assign (the slow part; not the speaker's Store, no loop: may run in a
        thread). Only Services and EndpointSlices changed: the last reload patched
        (:meth:`_quick`). Else everything is read, and what did not change comes out as
        the same objects as the last time (the file cache, the creation stamps and the
        assigned copies are kept): the speaker's Store records only what changed, and its
        plan cache replans only that."""
        started = time.perf_counter()
        quick = self._quick()
        if quick is not None:
            self.quick_reloads += 1
            return replace(quick, seconds=time.perf_counter() - started)
        stamp = self._first_seen.at(datetime.now(UTC))
        snap = read(self.manifests, self.state_dir, self._files, stamp)
        snap.fill(self._assigning)
        view = self._assigning.view()
        assignments, planned = planned_objects(
            view, self.options, snap.unparsed_pools, self._assigner
        )
        # Made now, so the first edit after a full reload is as quick as the next ones.
        self._requests = requests_of(view.services.values())
        return Reloaded(
            snap,
            assignments,
            planned=planned,
            seconds=time.perf_counter() - started,
            assigned_all=self._assigner.added is None,
        )

    def _quick(self) -> Reloaded | None:
        """The last reload patched with what changed, when only Services and EndpointSlices
        did and nothing else can be affected (:mod:`.delta`); None: read everything."""
        loaded = self.loaded
        if loaded is None or self._gone:
            return None
        files = manifest_files(self.manifests, self.state_dir)
        now = datetime.now(UTC)
        delta = file_delta(files, self._files, self._first_seen.at(now).parsed)
        if delta is None:
            return None
        last = loaded.snapshot
        why = blocked(last, delta)
        if why is not None:
            self._log.debug("reading every manifest", why=why)
            return None
        gone = delta.gone()
        # Stamped first: the checks and the assignment decide by age.
        came = self._first_seen.stamp_changed(delta.came(), [str(r) for r in gone], now)
        changes: Changes = {}
        for ref in gone:
            changes.setdefault(Kind(ref.kind), {})[object_key(ref.namespace, ref.name)] = None
        for obj in came:
            key = object_key(obj.metadata.namespace, obj.metadata.name)
            changes.setdefault(Kind(obj.kind), {})[key] = obj
        services = [o for o in came if isinstance(o, Service)]
        held = last.objects.get(Kind.SERVICE, {})
        if self._requests is None:
            return None
        old = [held[k] for k in changes.get(Kind.SERVICE, {}) if k in held]
        move_requests(self._requests, (s for s in old if isinstance(s, Service)), services)
        if services and new_problems(last, services, self._requests):
            return None  # the full reload reports them, in their place
        for name in delta.removed:
            del self._files.entries[name]
        self._files.entries.update(delta.entries)
        snap = patched(last, changes, files)
        for kind, by_key in changes.items():
            for key, new in by_key.items():
                if new is None:
                    self._assigning.delete(kind, key)
                else:
                    self._assigning.put(kind, key, new)
        view = self._assigning.view()
        assignments, unused = self._assigner.assign(view, self.options, snap.unparsed_pools)
        added = self._assigner.added
        if added is None:  # assigned from scratch (a Service edited or removed)
            planned = planned_of(view, unused)
            return Reloaded(snap, assignments, planned=planned, read_all=False)
        keys = (*changes.get(Kind.SERVICE, {}), *added)
        return Reloaded(
            snap,
            assignments,
            changes=changes,
            reassigned=keys,
            read_all=False,
            assigned_all=False,
        )

    def _apply(self, reloaded: Reloaded) -> Loaded:
        snap, assignments = reloaded.snapshot, reloaded.assignments
        if reloaded.changes is not None:
            for kind, by_key in reloaded.changes.items():
                for key, obj in by_key.items():
                    if obj is None:
                        self.store.delete(kind, key)
                    else:
                        self.store.put(kind, key, obj)
            for key in reloaded.reassigned:
                self.store.assign(key, assignments.get(key))
        else:
            snap.fill(self.store, reloaded.planned)
            self.store.replace_assigned(assignments)
        generation = (self.loaded.generation + 1) if self.loaded else 1
        self.loaded = Loaded(snap, assignments, generation)
        for p in snap.problems:
            self._log.warning("manifest problem", problem=str(p))
        self._log.info(
            "manifests loaded",
            files=len(snap.files),
            objects=sum(len(v) for v in snap.objects.values()),
            problems=len(snap.problems),
            generation=generation,
            read="all" if reloaded.read_all else "changes",
            assigned="all" if reloaded.assigned_all else "changes",
            seconds=round(reloaded.seconds, 4),
        )
        if self.on_change is not None:
            self.on_change()
        return self.loaded

    async def poll(self) -> bool:
        """:meth:`reload_if_changed` with the reading done in a thread, so a huge manifest
        does not stall the event loop (L2 heartbeats, BGP keepalives) while it parses."""
        if not self.manifests.exists():
            return self._missing()
        self._gone = False
        files = manifest_files(self.manifests, self.state_dir)
        fp = await asyncio.to_thread(fingerprint, files)
        if fp == self._seen:
            return False
        self._seen = fp
        self._apply(await asyncio.to_thread(self._compute))
        return True

    async def run(self) -> None:
        """Reload on every change until cancelled: woken by inotify (then re-checked every
        `recheck_s`), or polling every `poll_s` where inotify is unavailable."""
        self.watch = self._open_watch()
        try:
            while True:
                self._rescan_if_needed()
                try:
                    await self.poll()
                except Exception:
                    self._log.exception("reading manifests failed")
                await self._next_look()
        finally:
            if self.watch is not None:
                self.watch.close()
                self.watch = None

    def _open_watch(self) -> ManifestWatch | None:
        try:
            watch = ManifestWatch(
                self.manifests, self._woken.set, skip=self.state_dir, init=self.inotify_init
            )
        except WatchUnavailable as err:
            self._polling_because(str(err))
            return None
        try:
            watch.start(asyncio.get_running_loop())
        except WatchUnavailable as err:
            watch.close()
            self._polling_because(str(err))
            return None
        self._log.info("watching manifests", recheck_s=self.recheck_s)
        return watch

    def _rescan_if_needed(self) -> None:
        if self.watch is None or not self.watch.rescan_needed:
            return
        try:
            self.watch.rescan()
        except WatchUnavailable as err:
            self.watch.close()
            self.watch = None
            self._polling_because(str(err))

    def _polling_because(self, reason: str) -> None:
        self._log.warning("manifest watch unavailable, polling", reason=reason, poll_s=self.poll_s)

    async def _next_look(self) -> None:
        if self.watch is None:
            await asyncio.sleep(self.poll_s)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.recheck_s):
                await self._woken.wait()
        if self._woken.is_set():
            await asyncio.sleep(self.settle_s)
            # Cleared before reading: an event while the reload runs wakes the next one.
            self._woken.clear()


def vip_details(vip: VIPBackend) -> dict[str, Any]:
    """The VIP backend's instances as keepalived runs them, and the supervisor's counters:
    what an operator (or the lab) needs to see which node is master of what, and why."""
    sup = vip.supervisor
    states = sup.states
    instances = vip.rendered.instances if vip.rendered is not None else ()
    return {
        "instance_states": {
            i.name: {
                "vrid": i.vrid,
                "interface": i.interface,
                "priority": i.priority,
                "groups": list(i.groups),
                "vips": [str(v) for v in i.vips],
                "state": states[i.name].state.value if i.name in states else None,
            }
            for i in instances
        },
        "counters": {
            "starts": sup.counters.starts,
            "reloads": sup.counters.reloads,
            "unexpected_exits": sup.counters.unexpected_exits,
            "dual_master_resolutions": sup.counters.dual_master_resolutions,
            "stale_vips_removed": sup.counters.stale_vips_removed,
            "transitions": dict(sup.counters.transitions),
        },
    }


# With more Services than PRETTY_MAX, status.json is rewritten at most this often (the
# latest step's state; always at stop): at 100k Services a write costs over a second of
# the event loop, and a burst of steps would spend most of its time rewriting the file.
LARGE_STATUS_INTERVAL_S = 5.0


class StatusWriter:
    """Writes what this node decided and does to `<state-dir>/status.json`: after every
    step, or at most every :data:`LARGE_STATUS_INTERVAL_S` past :data:`PRETTY_MAX` Services
    (`events.log` still gets every Event at once)."""

    def __init__(
        self,
        node: str,
        state_dir: Path,
        source: ManifestSource,
        large_interval_s: float = LARGE_STATUS_INTERVAL_S,
        large_above: int = PRETTY_MAX,
    ) -> None:
        self.node = node
        self.state_dir = state_dir
        self.source = source
        self.large_interval_s = large_interval_s
        self.large_above = large_above
        self._parts = StatusParts()
        self._parts_lock = threading.Lock()
        self._in_order = asyncio.Lock()
        self._writing: asyncio.Future[None] | None = None  # a held-back write under way
        # Each status write's number; a worker's write lands only if no later write began
        # (a step cancelled at stop leaves its worker running: its older status must not
        # replace the one written at stop).
        self._writes = 0
        self._file_lock = threading.Lock()
        self._written_at: float | None = None  # loop time of the last write
        self._pending: asyncio.TimerHandle | None = None
        self._latest: StepResult | None = None
        self.speaker: NodeSpeaker | None = None
        self.stopped = False
        state_dir.mkdir(parents=True, exist_ok=True)
        self.events_path = state_dir / "events.log"

    def _ensure_state_dir(self) -> None:
        """Recreate the state directory if it went (the default one is inside the
        manifest directory, which may be removed and recreated) — but never recreate a
        vanished manifest directory by doing so: that would read as "no manifests"."""
        if not self.state_dir.exists() and self.source.manifests.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True)

    async def __call__(self, result: StepResult) -> None:
        self._ensure_state_dir()
        if len(result.events) > self.large_above:
            # (Every Service's at once, as when a session comes up: 0.2 s of encoding
            # under load, in a worker thread as the large status file is.)
            await asyncio.to_thread(self._append_events, result.events)
        else:
            self._append_events(result.events)
        self._latest = result
        loop = asyncio.get_running_loop()
        if not self._large():
            self.write(result)
            return
        wait = 0.0
        if self._written_at is not None:
            wait = self._written_at + self.large_interval_s - loop.time()
        if wait <= 0:
            await self._write_large(result)
        elif self._pending is None:
            self._pending = loop.call_later(wait, self._write_latest)

    def _append_events(self, events: tuple[ServiceEvent, ...]) -> None:
        with self.events_path.open("a") as fh:
            for ev in events:
                kind = "Warning" if ev.warning else "Normal"
                line = {"time": time.time(), "service": ev.service, "type": kind}
                fh.write(json.dumps({**line, "reason": ev.reason, "message": ev.message}) + "\n")

    def _write_latest(self) -> None:
        self._pending = None
        self._writing = asyncio.ensure_future(self._write_large(self._latest))

    async def _write_large(self, result: StepResult | None) -> None:
        """A large status file, encoded and written in a worker thread: after a change
        that touches every Service (a BGP session up or down) that is a second of CPU at
        10,000 Services under load, and the event loop must go on meanwhile (BFD at 100 ms,
        BGP keepalives). What is read from the live backends is read here, on the loop."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._written_at = asyncio.get_running_loop().time()
        self._ensure_state_dir()
        base = self._base(result, routes=False)
        self._writes += 1
        async with self._in_order:  # (a held-back write and a step's: the later one last)
            await asyncio.to_thread(self._write_text, result, base, self._writes)

    def _write_text(self, result: StepResult | None, base: dict[str, Any], number: int) -> None:
        text = self.large_text(result, base)
        with self._file_lock:
            if number == self._writes:
                write_text(self.state_dir / "status.json", text)

    def document(self, result: StepResult | None) -> dict[str, Any]:
        """The whole status document (as written up to :data:`PRETTY_MAX` Services)."""
        loaded = self.source.loaded
        assignments: Mapping[str, Assignment] = loaded.assignments if loaded else {}
        announcing = result.announcing if result else {}
        failures = result.failures if result else {}
        doc = self._base(result, routes=True)
        doc["services"] = {
            key: entry(a, announcing.get(key, ()), failures.get(key, {}))
            for key, a in sorted(assignments.items())
        }
        doc["announcing"] = announced_ips(result)
        doc["decisions"] = decisions_json(result.plan.decisions) if result else []
        return doc

    def large_text(self, result: StepResult | None, base: dict[str, Any] | None = None) -> str:
        """The status document past :data:`PRETTY_MAX` Services, as JSON text on one line:
        the entries that did not change since the last write are not encoded again
        (:class:`~.status_parts.StatusParts`); every decision and each BGP peer's list of
        routes are left out (`teapot-lb explain` gives the decisions of a Service;
        `prefixes_sent` counts the routes). `base`: :meth:`_base`'s part, when read
        already (this may run in a worker thread; the backends are read on the loop)."""
        loaded = self.source.loaded
        announcing = result.announcing if result else {}
        failures = result.failures if result else {}
        if base is None:
            base = self._base(result, routes=False)
        with self._parts_lock:  # (the write at stop may meet a worker's)
            assignments = loaded.assignments if loaded else {}
            services = self._parts.services(assignments, announcing, failures)
            announced = self._parts.announced(announcing)
        head = json.dumps(base, sort_keys=True)
        return f'{head[:-1]},"services":{services},"announcing":{announced}}}'

    def _base(self, result: StepResult | None, *, routes: bool) -> dict[str, Any]:
        """Everything but the per-Service parts."""
        loaded = self.source.loaded
        doc: dict[str, Any] = {
            "node": self.node,
            "time": time.time(),
            "pid": os.getpid(),
            "stopped": self.stopped,
            "generation": loaded.generation if loaded else 0,
            "problems": [str(p) for p in loaded.snapshot.problems] if loaded else [],
        }
        sp = self.speaker
        if sp is not None and sp.bgp is not None:
            peers: dict[str, Any] = {}
            errors = sp.bgp.errors()
            for name in sorted(sp.bgp.setups):
                address = sp.bgp.address_of(name)
                peer = sp.bgp.speaker.peers.get(address) if sp.bgp.speaker and address else None
                peers[name] = {
                    "address": address,
                    "state": peer.state.value if peer is not None else None,
                    "error": errors.get(name) or (peer.last_error if peer is not None else None),
                    "prefixes_sent": peer.prefixes_sent if peer is not None else 0,
                    "times_established": peer.counters.established if peer is not None else 0,
                }
                if routes:
                    peers[name]["routes"] = sorted(str(p) for p in sp.bgp.routes.get(name, {}))
            doc["bgp"] = {"peers": peers, "session_resets": sp.bgp.session_resets}
        if sp is not None and sp.l2 is not None:
            doc["l2"] = {
                "ready": sp.l2.ready,
                "owned": sorted(str(ip) for ip in sp.l2.owned),
                "live_speakers": sorted(sp.l2.live_speakers()),
                "errors": sp.l2.errors,
                "counters": sp.l2.counters(),
                "claims_judged": sp.l2.claims_judged,
                # The longest silence heard from each peer: how close to being declared
                # dead it came (the stability benchmark reads it under CPU load).
                "heartbeat_max_gap_s": {
                    m.node: round(m.max_gap, 4) for m in sp.l2.membership.members.values()
                },
            }
        if sp is not None and sp.vip is not None:
            rendered = sp.vip.rendered
            doc["vip"] = {
                "masters": sorted(sp.vip.masters()),
                "instances": [i.name for i in rendered.instances] if rendered else [],
                "errors": sp.vip.errors,
                "keepalived_pid": sp.vip.supervisor.pid,
                "reloads": sp.vip.supervisor.counters.reloads,
                **vip_details(sp.vip),
            }
        return doc

    def write(self, result: StepResult | None) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        with contextlib.suppress(RuntimeError):  # (no loop: a write at stop, or a test's)
            self._written_at = asyncio.get_running_loop().time()
        self._ensure_state_dir()
        path = self.state_dir / "status.json"
        self._writes += 1
        with self._file_lock:
            if self._large():
                write_text(path, self.large_text(result))
            else:
                write_json(path, self.document(result))

    def _large(self) -> bool:
        loaded = self.source.loaded
        return loaded is not None and len(loaded.assignments) > self.large_above
