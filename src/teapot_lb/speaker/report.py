"""What a node reports about its announcements (pure): a per-Service summary and Events.

Kubernetes: each speaker sets the annotation `announce.lb.teapot.io/<node>` on the
Services it has something to say about (one key per node, so speakers never conflict),
e.g. ``bgp 192.0.2.10 to router-a,router-b; l2 192.0.2.11``; `kubectl describe svc`
shows them with the Events `NodeAnnouncing` (started or stopped announcing) and
`AnnounceFailed` (the plan says announce, the backend could not). Standalone mode
writes the same summaries into its status file.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from teapot_lb.announce.announcement import Decision, Mode, Plan

ANNOTATION_PREFIX = "announce.lb.teapot.io/"
REASON_ANNOUNCING = "NodeAnnouncing"
REASON_FAILED = "AnnounceFailed"


def annotation_key(node: str) -> str:
    """The per-node annotation key (the name part of a key is at most 63 characters)."""
    return ANNOTATION_PREFIX + node[:63]


@dataclass(frozen=True, slots=True)
class Announcing:
    """One IP this node announces for a Service, by one mode."""

    ip: str
    mode: Mode
    peers: tuple[str, ...] = ()

    def text(self) -> str:
        to = f" to {','.join(self.peers)}" if self.peers else ""
        return f"{self.mode.value} {self.ip}{to}"


def announcing(plan: Plan) -> dict[str, tuple[Announcing, ...]]:
    """Service key → what this node announces for it (Services announced by nothing: absent)."""
    return announcing_of(plan.decisions)


def announcing_of(decisions: Iterable[Decision]) -> dict[str, tuple[Announcing, ...]]:
    out: dict[str, list[Announcing]] = {}
    for d in decisions:
        if d.announces and d.mode is not None:
            out.setdefault(d.service, []).append(Announcing(d.ip, d.mode, d.peers))
    return {k: tuple(sorted(v, key=lambda a: (a.ip, a.mode.value))) for k, v in out.items()}


Failure = Callable[[Decision], "str | None"]


def failures_of(decisions: Iterable[Decision], failure: Failure) -> dict[str, dict[str, str]]:
    """Service → IP → why an IP this node should announce does not work here."""
    out: dict[str, dict[str, str]] = {}
    for d in decisions:
        if d.announces or d.waiting:  # a route held for a peer that is not up may fail too
            why = failure(d)
            if why is not None:
                out.setdefault(d.service, {})[d.ip] = why
    return out


@dataclass(frozen=True)
class Report:
    """What one step reports: per Service, what this node announces and what fails, the
    Services where either changed since the last report, and the Events."""

    announcing: Mapping[str, tuple[Announcing, ...]]
    failures: Mapping[str, Mapping[str, str]]
    changed: frozenset[str]
    events: tuple[ServiceEvent, ...]


class Reporting:
    """The report kept between steps, so that a step costs what changed.

    A Service is looked at again only when its decisions changed (the plan cache hands an
    unchanged Service's decisions back as the very same tuple) or when what the backends
    answer failures from changed (`failure_inputs`; then every Service is).
    """

    def __init__(self, node: str) -> None:
        self.node = node
        self._decisions: dict[str, tuple[Decision, ...]] = {}
        self._inputs: object = None
        self._primed = False  # an update has run: _decisions holds its plan's
        self.announcing: dict[str, tuple[Announcing, ...]] = {}
        self.failures: dict[str, dict[str, str]] = {}
        self.looked_at = 0  # Services looked at by the last update (for tests, benchmarks)

    def update(
        self,
        plan: Plan,
        failure: Failure,
        failure_inputs: object,
        changed: Collection[str] | None = None,
    ) -> Report:
        """The report of `plan`. `changed`: the Services whose decisions may differ from
        the plan of the previous update (the plan cache's
        :meth:`~teapot_lb.announce.totals.PlanTotals.take_changed`); only those are looked
        at. None: every Service is compared (by identity) with the previous update."""
        by_service = plan.by_service
        every = failure_inputs != self._inputs
        self._inputs = failure_inputs
        old = self._decisions
        if changed is not None and self._primed and not every:
            # Present first, then gone, each in key order: as the walk below.
            keys = sorted(k for k in changed if k in by_service and old.get(k) is not by_service[k])
            keys += sorted(k for k in changed if k not in by_service and k in old)
            for key in keys:
                if key in by_service:
                    old[key] = by_service[key]
                else:
                    del old[key]
        else:
            keys = [k for k, decs in by_service.items() if every or old.get(k) is not decs]
            keys += [k for k in old if k not in by_service]
            self._decisions = dict(by_service)
        self._primed = True
        before_ann = {k: self.announcing[k] for k in keys if k in self.announcing}
        before_fail = {k: self.failures[k] for k in keys if k in self.failures}
        for key in keys:
            decs = by_service.get(key, ())
            now = announcing_of(decs).get(key)
            if now is None:
                self.announcing.pop(key, None)
            else:
                self.announcing[key] = now
            fails = failures_of(decs, failure).get(key)
            if fails is None:
                self.failures.pop(key, None)
            else:
                self.failures[key] = fails
        self.looked_at = len(keys)
        changed = frozenset(
            k
            for k in keys
            if before_ann.get(k) != self.announcing.get(k)
            or before_fail.get(k) != self.failures.get(k)
        )
        found = events(
            self.node, before_ann, self.announcing, self.failures, before_fail, keys=changed
        )
        return Report(dict(self.announcing), dict(self.failures), changed, tuple(found))


def summary(items: tuple[Announcing, ...]) -> str:
    return "; ".join(a.text() for a in items)


def parse_summary(text: str) -> set[tuple[str, str]]:
    """(mode, IP) pairs of a :func:`summary` (as read back from an annotation or status)."""
    out: set[tuple[str, str]] = set()
    for part in text.split(";"):
        words = part.split()
        if len(words) >= 2:
            out.add((words[0], words[1]))
    return out


@dataclass(frozen=True, slots=True)  # a first step makes one per announced Service
class ServiceEvent:
    service: str
    warning: bool
    reason: str
    message: str


def events(
    node: str,
    before: Mapping[str, tuple[Announcing, ...]],
    after: Mapping[str, tuple[Announcing, ...]],
    failures: Mapping[str, Mapping[str, str]] | None = None,
    failures_before: Mapping[str, Mapping[str, str]] | None = None,
    keys: Iterable[str] | None = None,
) -> list[ServiceEvent]:
    """Events for what changed: started/stopped announcing, and new backend failures.

    `failures`: Service key → IP → why the backend could not announce it. `keys`: the only
    Services that may have changed (None: look at all of them).
    """
    out: list[ServiceEvent] = []
    looked = sorted(set(before) | set(after)) if keys is None else sorted(keys)
    for key in looked:
        old, new = set(before.get(key, ())), set(after.get(key, ()))
        started = sorted(new - old, key=lambda a: (a.ip, a.mode.value))
        stopped = sorted(old - new, key=lambda a: (a.ip, a.mode.value))
        if started:
            text = "; ".join(a.text() for a in started)
            out.append(ServiceEvent(key, False, REASON_ANNOUNCING, f"node {node} announces {text}"))
        if stopped:
            text = "; ".join(a.text() for a in stopped)
            out.append(
                ServiceEvent(
                    key, False, REASON_ANNOUNCING, f"node {node} stopped announcing {text}"
                )
            )
    failures = failures or {}
    failures_before = failures_before or {}
    for key in sorted(failures) if keys is None else [k for k in looked if k in failures]:
        for ip, why in sorted(failures[key].items()):
            if failures_before.get(key, {}).get(ip) != why:
                out.append(
                    ServiceEvent(
                        key, True, REASON_FAILED, f"node {node} cannot announce {ip}: {why}"
                    )
                )
    return out


def decisions_json(decisions: Iterable[Decision]) -> list[dict[str, object]]:
    return [
        {
            "service": d.service,
            "ip": d.ip,
            "node": d.node,
            "mode": d.mode.value if d.mode is not None else None,
            "announces": d.announces,
            "reason": d.reason,
            "peers": list(d.peers),
            "waiting": list(d.waiting),
        }
        for d in decisions
    ]
