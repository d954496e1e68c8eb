"""Rules for AddressPools: not empty, no overlap within a pool or between pools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from teapot_lb.model.pool import AddressPool, AddressRange
from teapot_lb.model.problem import Problem, problem
from teapot_lb.validation.config import ConfigSet
from teapot_lb.validation.selectors import selector_problems


def pool_problems(config: ConfigSet) -> Iterator[Problem]:
    for pool in config.pools:
        yield from _single_pool(pool)
    yield from _overlaps(config.pools)


def _single_pool(pool: AddressPool) -> Iterator[Problem]:
    ref = pool.ref
    if not pool.spec.addresses:
        yield problem(ref, "spec.addresses", "the pool is empty; list at least one CIDR or range")
        return
    if pool.address_count(4) + pool.address_count(6) == 0:
        yield problem(
            ref,
            "spec.addresses",
            "the pool has no usable address: avoidBuggyIPs excludes every one"
            " (IPv4 addresses ending in .0 or .255)",
        )
    scope = pool.spec.service_allocation
    if scope is not None:
        yield from selector_problems(
            ref, "spec.serviceAllocation.namespaceSelectors", scope.namespace_selectors
        )
        yield from selector_problems(
            ref, "spec.serviceAllocation.serviceSelectors", scope.service_selectors
        )


class _Entry(NamedTuple):
    range: AddressRange
    pool: AddressPool
    position: int


def _overlaps(pools: list[AddressPool]) -> Iterator[Problem]:
    """Each pair of overlapping entries once, reported on the entry that comes later."""
    entries = sorted(
        (_Entry(rng, pool, i) for pool in pools for i, rng in enumerate(pool.address_ranges())),
        key=lambda e: (e.range.version, int(e.range.first), int(e.range.last)),
    )
    # Sweep in start order: an entry can only overlap earlier entries still "open".
    open_entries: list[_Entry] = []
    for entry in entries:
        open_entries = [
            e
            for e in open_entries
            if e.range.version == entry.range.version
            and int(e.range.last) >= int(entry.range.first)
        ]
        for earlier in open_entries:
            common = earlier.range.overlap(entry.range)
            assert common is not None
            yield _overlap_problem(earlier, entry, common)
        open_entries.append(entry)


def _overlap_problem(a: _Entry, b: _Entry, common: AddressRange) -> Problem:
    # Report on the entry listed later (by pool name, then index) so the message is stable.
    first, second = sorted((a, b), key=lambda e: (e.pool.name, e.position))
    where = f"spec.addresses[{second.position}]"
    theirs = f"spec.addresses[{first.position}] ({first.pool.spec.addresses[first.position]})"
    if first.pool is second.pool:
        return problem(second.pool.ref, where, f"overlaps {theirs} of the same pool at {common}")
    return problem(
        second.pool.ref,
        where,
        f"overlaps AddressPool {first.pool.name!r} {theirs} at {common};"
        " an address may belong to one pool only",
        first.pool.ref,
    )
