"""What a node reports about its announcements (pure): a per-Service summary and Events.

Kubernetes: each speaker sets the annotation `announce.lb.teapot.io/<node>` on the
Services it has something to say about (one key per node, so speakers never conflict),
e.g. ``bgp 192.0.2.10 to router-a,router-b; l2 192.0.2.11``; `kubectl describe svc`
shows them with the Events `NodeAnnouncing` (started or stopped announcing) and
`AnnounceFailed` (the plan says announce, the backend could not). Standalone mode
writes the same summaries into its status file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teapot_lb.announce.plan import Decision, Mode, Plan

ANNOTATION_PREFIX = "announce.lb.teapot.io/"
REASON_ANNOUNCING = "NodeAnnouncing"
REASON_FAILED = "AnnounceFailed"


def annotation_key(node: str) -> str:
    """The per-node annotation key (the name part of a key is at most 63 characters)."""
    return ANNOTATION_PREFIX + node[:63]


@dataclass(frozen=True)
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
    out: dict[str, list[Announcing]] = {}
    for d in plan.decisions:
        if d.announces and d.mode is not None:
            out.setdefault(d.service, []).append(Announcing(d.ip, d.mode, d.peers))
    return {k: tuple(sorted(v, key=lambda a: (a.ip, a.mode.value))) for k, v in out.items()}


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


@dataclass(frozen=True)
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
) -> list[ServiceEvent]:
    """Events for what changed: started/stopped announcing, and new backend failures.

    `failures`: Service key → IP → why the backend could not announce it.
    """
    out: list[ServiceEvent] = []
    for key in sorted(set(before) | set(after)):
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
    for key in sorted(failures):
        for ip, why in sorted(failures[key].items()):
            if failures_before.get(key, {}).get(ip) != why:
                out.append(
                    ServiceEvent(
                        key, True, REASON_FAILED, f"node {node} cannot announce {ip}: {why}"
                    )
                )
    return out


def decisions_json(decisions: tuple[Decision, ...] | list[Decision]) -> list[dict[str, object]]:
    return [
        {
            "service": d.service,
            "ip": d.ip,
            "node": d.node,
            "mode": d.mode.value if d.mode is not None else None,
            "announces": d.announces,
            "reason": d.reason,
            "peers": list(d.peers),
        }
        for d in decisions
    ]
