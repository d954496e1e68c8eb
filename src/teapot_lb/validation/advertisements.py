"""Rules every advertisement shares (pool references, selectors) and the L2 / VIP / OVN ones."""

from __future__ import annotations

from collections.abc import Iterator

from teapot_lb.model.common import ObjectRef, parse_duration, selector_lists_may_overlap
from teapot_lb.model.pool import AddressPool, PoolSelection
from teapot_lb.model.problem import Problem, problem
from teapot_lb.model.vip import VIPAdvertisement
from teapot_lb.validation.config import ConfigSet
from teapot_lb.validation.selectors import selector_problems


def selected_pools(
    config: ConfigSet, namespace: str | None, selection: PoolSelection
) -> list[AddressPool]:
    """The pools (of the advertisement's namespace) an advertisement covers."""
    return [p for p in config.pools_in(namespace).values() if selection.selects_pool(p)]


def selection_problems(
    config: ConfigSet, ref: ObjectRef, selection: PoolSelection
) -> Iterator[Problem]:
    known = config.pools_in(ref.namespace)
    for i, name in enumerate(selection.address_pools):
        if name in known or config.is_unparsed("AddressPool", ref.namespace, name):
            continue
        listing = ", ".join(sorted(known)) or "none"
        yield problem(
            ref, f"spec.addressPools[{i}]", f"no AddressPool named {name!r} (known: {listing})"
        )
    yield from selector_problems(ref, "spec.addressPoolSelectors", selection.address_pool_selectors)
    yield from selector_problems(ref, "spec.nodeSelectors", selection.node_selectors)


def l2_problems(config: ConfigSet) -> Iterator[Problem]:
    for adv in config.l2_advertisements:
        yield from selection_problems(config, adv.ref, adv.spec)
        seen: set[str] = set()
        for i, name in enumerate(adv.spec.interfaces):
            if name in seen:
                yield problem(adv.ref, f"spec.interfaces[{i}]", f"{name!r} is listed twice")
            seen.add(name)


def ovn_problems(config: ConfigSet) -> Iterator[Problem]:
    for adv in config.ovn_advertisements:
        yield from selection_problems(config, adv.ref, adv.spec)
        if adv.spec.node_selectors:
            yield problem(
                adv.ref,
                "spec.nodeSelectors",
                "OVN mode has no announcing nodes (OVN carries the traffic); name the"
                " gateway routers and logical switches instead",
            )
        check = adv.spec.health_check
        if check is not None and check.source_ip.version != 4:
            yield problem(
                adv.ref,
                "spec.healthCheck.sourceIP",
                f"{check.source_ip}: OVN service monitors probe IPv4 backends only",
            )
        for i, router in enumerate(adv.spec.gateway_routers):
            if any(r.name == router.name for r in adv.spec.gateway_routers[:i]):
                yield problem(
                    adv.ref, f"spec.gatewayRouters[{i}].name", f"{router.name!r} is listed twice"
                )


# RFC 5798 §5.2.7: Max Adver Int is 12 bits of centiseconds.
MIN_INTERVAL, MAX_INTERVAL = 0.01, 40.95


def vip_problems(config: ConfigSet) -> Iterator[Problem]:
    for adv in config.vip_advertisements:
        yield from selection_problems(config, adv.ref, adv.spec)
        yield from _single_vip(adv)
        yield from _arp_contention(config, adv)
    yield from _vrid_overlaps(config.vip_advertisements)


def _single_vip(adv: VIPAdvertisement) -> Iterator[Problem]:
    spec = adv.spec
    if spec.vrid_range is not None and spec.vrid_range.start > spec.vrid_range.end:
        yield problem(
            adv.ref,
            "spec.vridRange",
            f"start {spec.vrid_range.start} is after end {spec.vrid_range.end}",
        )
    if spec.advertisement_interval is not None:
        seconds = parse_duration(spec.advertisement_interval)
        centis = seconds * 100
        if not MIN_INTERVAL <= seconds <= MAX_INTERVAL or abs(centis - round(centis)) > 1e-9:
            yield problem(
                adv.ref,
                "spec.advertisementInterval",
                f"{spec.advertisement_interval}: VRRPv3 intervals are 10ms-40.95s in steps"
                " of 10ms (RFC 5798 §5.2.7)",
            )


def _arp_contention(config: ConfigSet, vip: VIPAdvertisement) -> Iterator[Problem]:
    """keepalived and the L2 speaker would both answer ARP/NDP for the same addresses."""
    namespace = vip.metadata.namespace
    vip_pools = {p.name for p in selected_pools(config, namespace, vip.spec)}
    for l2 in config.l2_advertisements:
        if l2.metadata.namespace != namespace:
            continue
        if not selector_lists_may_overlap(vip.spec.node_selectors, l2.spec.node_selectors):
            continue
        both = sorted(vip_pools & {p.name for p in selected_pools(config, namespace, l2.spec)})
        if both:
            yield problem(
                vip.ref,
                "spec.addressPools",
                f"AddressPool {', '.join(repr(n) for n in both)} is also announced by"
                f" L2Advertisement {l2.name!r} on nodes both select; keepalived and the L2"
                " speaker would both answer ARP/NDP for the same addresses",
                l2.ref,
            )


def _vrid_overlaps(advs: list[VIPAdvertisement]) -> Iterator[Problem]:
    """VRRP routers on one link are told apart by VRID (RFC 5798 §5.2.3)."""
    for i, adv in enumerate(advs):
        for other in advs[:i]:
            if other.metadata.namespace != adv.metadata.namespace:
                continue
            if None not in (adv.spec.interface, other.spec.interface) and (
                adv.spec.interface != other.spec.interface
            ):
                continue
            if not selector_lists_may_overlap(adv.spec.node_selectors, other.spec.node_selectors):
                continue
            mine, theirs = adv.vrids(), other.vrids()
            lo, hi = max(mine.start, theirs.start), min(mine.stop, theirs.stop) - 1
            if lo <= hi:
                yield problem(
                    adv.ref,
                    "spec.vridRange",
                    f"VRIDs {lo}-{hi} are also used by VIPAdvertisement {other.name!r} on the"
                    " same nodes and link; give each a distinct vridRange",
                    other.ref,
                )
