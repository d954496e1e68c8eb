"""Rules for AddressPools: not empty, no overlap within a pool or between pools.

Of two overlapping pools, the problem goes to the one that yields: a pool that holds no
Service IP yields to one that does, then the newer to the older (`creationTimestamp`),
then by name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import NamedTuple

from teapot_lb.model.common import IPAddress, ObjectRef, creation_order
from teapot_lb.model.pool import AddressPool, AddressRange
from teapot_lb.model.problem import Problem, problem
from teapot_lb.model.service import ANNOTATION_ALLOCATED_FROM
from teapot_lb.validation.config import ConfigSet
from teapot_lb.validation.selectors import selector_problems


def pool_problems(config: ConfigSet) -> Iterator[Problem]:
    for pool in config.pools:
        yield from _single_pool(pool)
    yield from _overlaps(config)


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


def _overlaps(config: ConfigSet) -> Iterator[Problem]:
    """Each pair of overlapping entries once, reported on the entry that yields (see
    :class:`_Precedence`)."""
    pools = config.pools
    precedence: _Precedence | None = None
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
            precedence = precedence or _Precedence(config)
            yield _overlap_problem(earlier, entry, common, precedence)
        open_entries.append(entry)


class _Precedence:
    """Which of two overlapping pools keeps its range: the one holding a Service IP over
    one holding none, then the older one, then by name, so a newcomer never takes the
    range of the pool in use. A pool holds a Service's IP (in its status or requested)
    when the IP is in the pool and the Service names that pool (`lb.teapot.io/pool` or
    `lb.teapot.io/allocated-from`) or no other pool contains it. Computed only when pools
    overlap."""

    def __init__(self, config: ConfigSet) -> None:
        self.config = config
        self.claims: list[tuple[IPAddress, str | None]] = []
        for svc in config.services:
            if not svc.is_handled():
                continue
            ips = set(svc.ingress_ips())
            with contextlib.suppress(ValueError):  # reported by the Service rules
                ips.update(svc.requested_ips())
            named = svc.requested_pool or svc.metadata.annotations.get(ANNOTATION_ALLOCATED_FROM)
            self.claims.extend((ip, named) for ip in ips)
        self._holds: dict[ObjectRef, bool] = {}

    def holds_service_ip(self, pool: AddressPool) -> bool:
        found = self._holds.get(pool.ref)
        if found is None:
            found = any(
                pool.contains(ip)
                and (named == pool.name or (named is None and self._only_pool_of(ip)))
                for ip, named in self.claims
            )
            self._holds[pool.ref] = found
        return found

    def _only_pool_of(self, ip: IPAddress) -> bool:
        return len(self.config.pools_holding(ip)) == 1

    def key(self, entry: _Entry) -> tuple[bool, tuple[datetime, str, str], int]:
        pool = entry.pool
        return (not self.holds_service_ip(pool), creation_order(pool), entry.position)


def _overlap_problem(
    a: _Entry, b: _Entry, common: AddressRange, precedence: _Precedence
) -> Problem:
    # Report on the entry that yields, naming the one that keeps the range.
    first, second = sorted((a, b), key=precedence.key)
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
