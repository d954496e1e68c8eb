"""Rules for BGPPeers and BGPAdvertisements."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from teapot_lb.model.bgp import BGPAdvertisement, BGPPeer
from teapot_lb.model.common import parse_duration, selector_lists_may_overlap
from teapot_lb.model.pool import AddressPool, AddressRange
from teapot_lb.model.problem import Problem, problem
from teapot_lb.validation.advertisements import selected_pools, selection_problems
from teapot_lb.validation.config import ConfigSet
from teapot_lb.validation.selectors import selector_problems

MAX_HOLD_TIME = 65535  # RFC 4271 §4.2: a 2-octet number of seconds.


def peer_problems(config: ConfigSet) -> Iterator[Problem]:
    for peer in config.bgp_peers:
        yield from _single_peer(peer)
        if config.secrets is not None:
            yield from _password_secret(peer, config.secrets)
    yield from _duplicate_peers(config.bgp_peers)


def _password_secret(
    peer: BGPPeer, secrets: Mapping[str, Mapping[str, bytes]]
) -> Iterator[Problem]:
    """The Secret a peer's MD5 password comes from must be there, with key `password`
    (checked when the set knows the Secrets: standalone mode's manifests)."""
    ref = peer.spec.password_secret
    if ref is None:
        return
    namespace = ref.namespace or peer.metadata.namespace
    key = f"{namespace}/{ref.name}" if namespace else ref.name
    data = secrets.get(key)
    if data is None:
        yield problem(
            peer.ref,
            "spec.passwordSecret",
            f"Secret {key} not found: add it to the manifests (apiVersion: v1, kind: Secret,"
            " stringData: {password: ...})",
        )
    elif "password" not in data:
        keys = ", ".join(sorted(data)) or "none"
        yield problem(
            peer.ref,
            "spec.passwordSecret",
            f"Secret {key} has no key 'password' (its keys: {keys})",
        )


def _single_peer(peer: BGPPeer) -> Iterator[Problem]:
    ref, spec = peer.ref, peer.spec
    if spec.peer_asn is None and spec.dynamic_asn is None:
        yield problem(ref, "spec.peerASN", "required field is missing (or set dynamicASN)")
    if spec.peer_asn is not None and spec.dynamic_asn is not None:
        yield problem(ref, "spec.dynamicASN", "set either peerASN or dynamicASN, not both")
    if spec.peer_address is None and spec.interface is None:
        yield problem(ref, "spec.peerAddress", "required field is missing")
    if spec.peer_address is not None and spec.interface is not None:
        yield problem(ref, "spec.interface", "set either peerAddress or interface, not both")
    for field, value in (("interface", spec.interface), ("vrf", spec.vrf)):
        if value is not None:
            yield problem(ref, f"spec.{field}", "reserved: not implemented yet; remove the field")
    if spec.peer_address is not None:
        addr = spec.peer_address
        if addr.is_unspecified or addr.is_multicast or addr.is_loopback:
            yield problem(ref, "spec.peerAddress", f"{addr} is not a usable unicast address")
        src = spec.source_address
        if src is not None and src.version != addr.version:
            yield problem(
                ref,
                "spec.sourceAddress",
                f"{src} is IPv{src.version} but peerAddress {addr} is IPv{addr.version}",
            )
    rid = spec.router_id
    if rid is not None and (rid.version != 4 or int(rid) == 0):
        yield problem(
            ref,
            "spec.routerID",
            f"{rid} is not a BGP identifier: a non-zero 32-bit number written as IPv4 (RFC 6286)",
        )
    yield from _timers(peer)
    if spec.password is not None and spec.password_secret is not None:
        yield problem(ref, "spec.passwordSecret", "set either password or passwordSecret, not both")
    if spec.ebgp_multi_hop and peer.is_ibgp():
        yield problem(ref, "spec.ebgpMultiHop", "applies to eBGP only, but this session is iBGP")
    seen: set[str] = set()
    for i, family in enumerate(spec.families):
        if family in seen:
            yield problem(ref, f"spec.families[{i}]", f"{family} is listed twice")
        seen.add(family)
    yield from selector_problems(ref, "spec.nodeSelectors", spec.node_selectors)


def _timers(peer: BGPPeer) -> Iterator[Problem]:
    ref, spec = peer.ref, peer.spec
    hold = parse_duration(spec.hold_time) if spec.hold_time is not None else None
    if hold is not None:
        if hold != int(hold):
            yield problem(ref, "spec.holdTime", f"{spec.hold_time} is not whole seconds")
        elif hold != 0 and hold < 3:
            yield problem(
                ref, "spec.holdTime", f"{spec.hold_time}: must be 0 or at least 3s (RFC 4271 §4.2)"
            )
        elif hold > MAX_HOLD_TIME:
            yield problem(ref, "spec.holdTime", f"{spec.hold_time}: at most {MAX_HOLD_TIME}s")
    if spec.keepalive_time is not None:
        keepalive = parse_duration(spec.keepalive_time)
        effective_hold = peer.hold_time_seconds()
        if keepalive != int(keepalive):
            yield problem(ref, "spec.keepaliveTime", f"{spec.keepalive_time} is not whole seconds")
        elif effective_hold == 0 and keepalive != 0:
            yield problem(ref, "spec.keepaliveTime", "must be 0 when holdTime is 0 (no keepalives)")
        elif effective_hold != 0 and keepalive >= effective_hold:
            yield problem(
                ref,
                "spec.keepaliveTime",
                f"{spec.keepalive_time} must be shorter than holdTime ({effective_hold:g}s);"
                " a third of it is usual",
            )
    if spec.connect_time is not None:
        connect = parse_duration(spec.connect_time)
        if not 1 <= connect <= MAX_HOLD_TIME:
            yield problem(ref, "spec.connectTime", f"{spec.connect_time}: must be 1s-65535s")


def _session_key(peer: BGPPeer) -> tuple[str | None, str, int]:
    spec = peer.spec
    target = str(spec.peer_address) if spec.peer_address is not None else f"%{spec.interface}"
    return (peer.metadata.namespace, target, spec.peer_port)


def _duplicate_peers(peers: list[BGPPeer]) -> Iterator[Problem]:
    """Two BGPPeers to one router (address and port) must not both apply to the same node."""
    seen: dict[tuple[str | None, str, int], list[BGPPeer]] = {}
    for peer in peers:
        key = _session_key(peer)
        for other in seen.get(key, []):
            if selector_lists_may_overlap(peer.spec.node_selectors, other.spec.node_selectors):
                yield problem(
                    peer.ref,
                    "spec.nodeSelectors",
                    f"duplicates BGPPeer {other.name!r} (same peer {key[1]} port {key[2]})"
                    " on nodes both select; a node holds one session per router",
                    other.ref,
                )
                break
        seen.setdefault(key, []).append(peer)


def bgp_advertisement_problems(config: ConfigSet) -> Iterator[Problem]:
    for adv in config.bgp_advertisements:
        yield from selection_problems(config, adv.ref, adv.spec)
        yield from _peer_references(config, adv)
        yield from _bounded_aggregate(adv)
        for pool in selected_pools(config, adv.metadata.namespace, adv.spec):
            yield from _aggregation(adv, pool)


def _bounded_aggregate(adv: BGPAdvertisement) -> Iterator[Problem]:
    """maxNodesPerIP chooses nodes per IP; an aggregate route carries many IPs, so each node
    would announce it for any one of them and the bound would not hold."""
    spec = adv.spec
    if spec.max_nodes_per_ip is None:
        return
    for name, length, host in (
        ("aggregationLength", spec.aggregation_length, 32),
        ("aggregationLengthV6", spec.aggregation_length_v6, 128),
    ):
        if length is not None and length < host:
            yield problem(
                adv.ref,
                "spec.maxNodesPerIP",
                f"bounds the nodes per IP, but {name} {length} announces aggregates of many"
                f" IPs: use one or the other (or {name} {host})",
            )


def _peer_references(config: ConfigSet, adv: BGPAdvertisement) -> Iterator[Problem]:
    known = config.peers_in(adv.metadata.namespace)
    for i, name in enumerate(adv.spec.peers):
        if name in known or config.is_unparsed("BGPPeer", adv.metadata.namespace, name):
            continue
        listing = ", ".join(sorted(known)) or "none"
        yield problem(adv.ref, f"spec.peers[{i}]", f"no BGPPeer named {name!r} (known: {listing})")


def _aggregation(adv: BGPAdvertisement, pool: AddressPool) -> Iterator[Problem]:
    """An aggregate route must not cover addresses outside the pool (foreign address space)."""
    lengths = {4: adv.spec.aggregation_length, 6: adv.spec.aggregation_length_v6}
    fields = {4: "spec.aggregationLength", 6: "spec.aggregationLengthV6"}
    for version, length in lengths.items():
        if length is None:
            continue
        ranges = [r for r in pool.address_ranges() if r.version == version]
        covered = _merged(ranges)
        for block in (b for r in ranges for b in r.cidrs()):
            if length >= block.prefixlen:
                continue
            aggregate = block.supernet(new_prefix=length)
            first, last = int(aggregate.network_address), int(aggregate.broadcast_address)
            if not any(lo <= first and last <= hi for lo, hi in covered):
                yield problem(
                    adv.ref,
                    fields[version],
                    f"/{length} is shorter than the block {block} of AddressPool {pool.name!r}: the"
                    f" aggregate {aggregate} would announce addresses outside the pool"
                    f" (use {block.prefixlen} or more)",
                    pool.ref,
                )
                break


def _merged(ranges: list[AddressRange]) -> list[tuple[int, int]]:
    """Ranges as sorted, coalesced integer intervals."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted((int(r.first), int(r.last)) for r in ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged
