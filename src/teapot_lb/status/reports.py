"""What one node's speaker reports, from either source, in one shape (pure).

Standalone mode: the node's ``status.json`` (:func:`report_from_status`). A cluster: the
speaker's ``announce.lb.teapot.io/<node>`` annotations on the Services and, when it can
be reached, its ``/metrics`` text (:func:`report_from_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from teapot_lb.cluster import ClusterView
from teapot_lb.speaker.metrics import PREFIX
from teapot_lb.speaker.report import annotation_key, parse_summary


@dataclass(frozen=True)
class NodeReport:
    """``reported`` False: nothing heard from the node (``why`` says what was tried).

    ``announcing``: Service key → (mode, IP) pairs the node announces; ``sessions``: BGPPeer
    name → (state, last error) — None when the source does not tell; ``vip_masters`` /
    ``l2_owned``: the IPs it is VRRP master of / answers ARP/NDP for (None: unknown).
    """

    node: str
    reported: bool = True
    stopped: bool = False
    why: str = ""
    announcing: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    sessions: Mapping[str, tuple[str | None, str | None]] | None = None
    vip_masters: frozenset[str] | None = None
    l2_owned: frozenset[str] | None = None
    failures: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def report_from_status(node: str, doc: Mapping[str, Any] | None) -> NodeReport:
    """From a standalone node's ``status.json`` (None: the file is missing or unreadable)."""
    if not doc:
        return NodeReport(node, reported=False, why="no status.json")
    if doc.get("stopped"):
        return NodeReport(node, stopped=True, why="speaker stopped")
    services: Mapping[str, Any] = doc.get("services") or {}
    announcing = {
        key: frozenset(parse_summary(str(entry.get("announcing") or "")))
        for key, entry in services.items()
    }
    failures = {
        key: {str(ip): str(why) for ip, why in (entry.get("failures") or {}).items()}
        for key, entry in services.items()
        if entry.get("failures")
    }
    sessions = None
    if "bgp" in doc:
        peers: Mapping[str, Any] = (doc["bgp"] or {}).get("peers") or {}
        sessions = {name: (p.get("state"), p.get("error")) for name, p in peers.items()}
    vip = doc.get("vip")
    l2 = doc.get("l2")
    return NodeReport(
        node,
        announcing=announcing,
        sessions=sessions,
        vip_masters=frozenset(vip.get("masters") or ()) if vip is not None else None,
        l2_owned=frozenset(l2.get("owned") or ()) if l2 is not None else None,
        failures=failures,
        problems=tuple(str(p) for p in doc.get("problems") or ()),
    )


def announcing_from_annotations(
    view: ClusterView, node: str
) -> dict[str, frozenset[tuple[str, str]]]:
    """Service key → (mode, IP) pairs, from the speaker's annotation on each Service."""
    key = annotation_key(node)
    out: dict[str, frozenset[tuple[str, str]]] = {}
    for name, svc in view.services.items():
        text = svc.metadata.annotations.get(key)
        if text:
            out[name] = frozenset(parse_summary(text))
    return out


def report_from_metrics(
    view: ClusterView, node: str, metrics: str | None, why: str = ""
) -> NodeReport:
    """A cluster node: its annotations, plus its speaker's ``/metrics`` text when read
    (None: not reachable, ``why`` says why; sessions and VIP masters are then unknown)."""
    announcing = announcing_from_annotations(view, node)
    if metrics is None:
        return NodeReport(node, announcing=announcing, why=why)
    sessions: dict[str, tuple[str | None, str | None]] = {}
    masters: set[str] = set()
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == f"{PREFIX}_bgp_session_state" and sample.value == 1:
                sessions[sample.labels["peer"]] = (sample.labels["state"], None)
            elif sample.name == f"{PREFIX}_bgp_session_up":
                sessions.setdefault(sample.labels["peer"], (None, None))
            elif sample.name == f"{PREFIX}_vip_master" and sample.value == 1:
                masters.add(sample.labels["ip"])
    has_vip = f"{PREFIX}_vrrp_reloads_total" in metrics
    return NodeReport(
        node,
        announcing=announcing,
        sessions=sessions if f"{PREFIX}_bgp_session_up" in metrics else None,
        vip_masters=frozenset(masters) if has_vip else None,
    )
