"""L2 owner election order: which node answers ARP/NDP for a Service IP (pure).

Every speaker computes the same answer from the same view without talking: the
candidates (the live speakers on eligible nodes, decided by :mod:`teapot_lb.announce.plan`
with :class:`teapot_lb.model.LabelSelector` and a reason for every node left out) are
ordered by ``sha256(node, ip)``; the first one owns the IP. Hashing per IP spreads IPs
over nodes, and when a node goes away only the IPs it owned move.

The same order bounds BGP ECMP (``BGPAdvertisement.spec.maxNodesPerIP``): the first *k*
of an IP's ranking announce it (rendezvous, or highest-random-weight, hashing). A node
joining or leaving changes the chosen set only of the IPs it enters or leaves: about
*k*/N of them.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv6Address, ip_address

EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


def _suffix(ip: IPv4Address | IPv6Address | str) -> bytes:
    canonical = str(ip_address(ip)) if isinstance(ip, str) else str(ip)
    return b"\x00" + canonical.encode()


def exclusion(labels: Mapping[str, str], network_unavailable: bool) -> str | None:
    """Why a node with these labels and condition may announce nothing at all, or None."""
    if EXCLUDE_LABEL in labels:
        return f"excluded: node has label {EXCLUDE_LABEL}"
    if network_unavailable:
        return "excluded: node condition NetworkUnavailable is True"
    return None


def suffix(ip: IPv4Address | IPv6Address | str) -> bytes:
    """What :func:`score` hashes after the node's name, for one IP (kept to score many
    nodes against it: ``scored_as(name, suffix)``)."""
    return _suffix(ip)


def scored_as(name: bytes, ip_suffix: bytes) -> bytes:
    """:func:`score` with the node's name encoded and the IP's :func:`suffix` computed
    once (one node scored for many IPs)."""
    return hashlib.sha256(name + ip_suffix).digest()


def score(node: str, ip: IPv4Address | IPv6Address | str) -> bytes:
    """The sort key of ``node`` for ``ip``; lower wins. Same bytes on every speaker:
    ``sha256(node NUL ip)``, the IP in its canonical text."""
    return hashlib.sha256(node.encode() + _suffix(ip)).digest()


def _scored(ip: IPv4Address | IPv6Address, nodes: Iterable[str]) -> list[tuple[bytes, str]]:
    # The IP's text once per IP, not once per node: this runs for every IP over every node.
    suffix, sha256 = _suffix(ip), hashlib.sha256
    return [(sha256(n.encode() + suffix).digest(), n) for n in set(nodes)]


def ranking(ip: IPv4Address | IPv6Address, nodes: Iterable[str]) -> tuple[str, ...]:
    """``nodes`` in election order for ``ip`` (ties, impossible in practice, by name)."""
    return tuple(n for _, n in sorted(_scored(ip, nodes)))


def chosen(ip: IPv4Address | IPv6Address, nodes: Iterable[str], k: int) -> tuple[str, ...]:
    """The first ``k`` of :func:`ranking` (in that order), without sorting every node."""
    return tuple(n for _, n in heapq.nsmallest(k, _scored(ip, nodes)))
