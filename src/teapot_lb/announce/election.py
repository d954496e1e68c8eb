"""L2 owner election: which node answers ARP/NDP for a Service IP (pure).

Every speaker computes the same answer from the same view without talking: the
candidates are the live speakers on eligible nodes, ordered by ``sha256(node, ip)``; the
first one owns the IP. Hashing per IP spreads IPs over nodes, and when a node goes away
only the IPs it owned move. Every node that does not own the IP gets a reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address, IPv6Address, ip_address

EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry of a Kubernetes label selector."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case Operator.IN:
                return labels.get(self.key) in self.values
            case Operator.NOT_IN:
                return labels.get(self.key) not in self.values
            case Operator.EXISTS:
                return self.key in labels
            case Operator.DOES_NOT_EXIST:
                return self.key not in labels


@dataclass(frozen=True)
class NodeSelector:
    """A Kubernetes label selector: all of ``match_labels`` and all ``match_expressions``."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    network_unavailable: bool = False  # the NetworkUnavailable condition is True


@dataclass(frozen=True)
class ServiceIP:
    """One IP to elect an owner for, with what restricts its candidates.

    ``node_selectors`` are OR-ed (an empty tuple selects every node), as in an
    L2Advertisement. With ``local_traffic_policy`` only ``ready_nodes`` (nodes with a ready
    local endpoint) are candidates.
    """

    ip: IPv4Address | IPv6Address
    node_selectors: tuple[NodeSelector, ...] = ()
    local_traffic_policy: bool = False
    ready_nodes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Election:
    ip: IPv4Address | IPv6Address
    owner: str | None
    candidates: tuple[str, ...]  # in election order; ``owner`` is the first
    reasons: Mapping[str, str]  # node -> why it does (not) own the IP

    def reason(self, node: str) -> str:
        return self.reasons.get(node, "unknown node")


def score(node: str, ip: IPv4Address | IPv6Address | str) -> bytes:
    """The sort key of ``node`` for ``ip``; lower wins. Same bytes on every speaker."""
    canonical = str(ip_address(ip)) if isinstance(ip, str) else str(ip)
    return hashlib.sha256(f"{node}\x00{canonical}".encode()).digest()


def ranking(ip: IPv4Address | IPv6Address, nodes: Iterable[str]) -> tuple[str, ...]:
    """``nodes`` in election order for ``ip`` (ties, impossible in practice, by name)."""
    return tuple(sorted(set(nodes), key=lambda n: (score(n, ip), n)))


def eligibility(service: ServiceIP, node: Node) -> str | None:
    """None when ``node`` may announce ``service``, else the reason why not."""
    if EXCLUDE_LABEL in node.labels:
        return f"excluded: node has label {EXCLUDE_LABEL}"
    if node.network_unavailable:
        return "excluded: node condition NetworkUnavailable is True"
    if service.node_selectors and not any(s.matches(node.labels) for s in service.node_selectors):
        return "not selected: no node selector of the advertisement matches the node"
    if service.local_traffic_policy and node.name not in service.ready_nodes:
        return "no local endpoint: externalTrafficPolicy is Local and no ready endpoint here"
    return None


def elect(service: ServiceIP, nodes: Iterable[Node], live_speakers: Collection[str]) -> Election:
    """Elect the owner of ``service.ip`` among ``nodes`` whose speaker is live."""
    reasons: dict[str, str] = {}
    eligible: list[str] = []
    for node in nodes:
        why_not = eligibility(service, node)
        if why_not is not None:
            reasons[node.name] = why_not
        elif node.name not in live_speakers:
            reasons[node.name] = "speaker not alive"
        else:
            eligible.append(node.name)
    order = ranking(service.ip, eligible)
    owner = order[0] if order else None
    for pos, name in enumerate(order):
        reasons[name] = (
            "elected"
            if pos == 0
            else f"not elected: owner is {owner} (rank {pos + 1} of {len(order)})"
        )
    return Election(ip=service.ip, owner=owner, candidates=order, reasons=reasons)
