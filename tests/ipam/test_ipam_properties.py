"""Properties of the allocator under random operation sequences (hypothesis)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from ipam_builders import pool

from teapot_lb.ipam import (
    Allocator,
    Assigned,
    ChangeReason,
    IPAddress,
    IPFamily,
    IPFamilyPolicy,
    Pool,
    RefusalReason,
    Refused,
    ServiceRequest,
    TrafficPolicy,
)
from teapot_lb.ipam.free_space import FreeSpace

# Address blocks a configuration distributes over pools. Small ones run full; the /64 never
# does. The second block straddles .255/.0 so avoidBuggyIPs matters.
BLOCKS = (
    ("192.0.2.0-192.0.2.1",),
    ("192.0.2.254-192.0.2.255", "198.51.100.0-198.51.100.1"),
    ("203.0.113.8/31",),
    ("2001:db8::/126",),
    ("2001:db8:1::/64",),
)
POOL_NAMES = ("p0", "p1", "p2")
WANTED_IPS = [
    ip_address(s)
    for s in (
        "192.0.2.1",
        "192.0.2.2",  # in no block
        "192.0.2.255",
        "198.51.100.0",
        "203.0.113.9",
        "2001:db8::2",
        "2001:db8:1::5",
    )
]
SMALL = 64  # pools smaller than this are checked by enumeration


@st.composite
def pool_configs(draw: st.DrawFn) -> list[Pool]:
    owners = draw(st.lists(st.sampled_from((*POOL_NAMES, None)), min_size=5, max_size=5))
    pools = []
    for name in POOL_NAMES:
        specs = [
            spec
            for block, owner in zip(BLOCKS, owners, strict=True)
            if owner == name
            for spec in block
        ]
        if not specs:
            continue
        pools.append(
            pool(
                name,
                *specs,
                priority=draw(st.sampled_from((None, 1, 2))),
                auto_assign=draw(st.sampled_from((True, True, True, False))),
                avoid_buggy_ips=draw(st.booleans()),
                namespaces=draw(st.sampled_from((frozenset(), frozenset({"ns-a"})))),
            )
        )
    return pools


@st.composite
def service_requests(draw: st.DrawFn) -> ServiceRequest:
    policy = draw(
        st.sampled_from(
            (IPFamilyPolicy.SINGLE_STACK,) * 3
            + (IPFamilyPolicy.PREFER_DUAL_STACK, IPFamilyPolicy.REQUIRE_DUAL_STACK)
        )
    )
    primary = draw(st.sampled_from(IPFamily))
    requested: tuple[IPAddress, ...] = ()
    if draw(st.integers(0, 5)) == 0:
        requested = tuple(draw(st.lists(st.sampled_from(WANTED_IPS), min_size=1, max_size=2)))
    local = draw(st.integers(0, 3)) == 0
    return ServiceRequest(
        draw(st.sampled_from(("ns-a", "ns-b"))),
        draw(st.sampled_from(("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"))),
        ip_family_policy=policy,
        ip_families=(primary, primary.other),
        requested_ips=requested,
        requested_pool=draw(st.sampled_from((None,) * 8 + (*POOL_NAMES, "gone"))),
        sharing_key=draw(st.sampled_from((None, "k1", "k1", "k2"))),
        ports=frozenset(
            draw(st.lists(st.sampled_from((("TCP", 80), ("TCP", 443), ("UDP", 53))), max_size=1))
        ),
        external_traffic_policy=TrafficPolicy.LOCAL if local else TrafficPolicy.CLUSTER,
        selector={"app": draw(st.sampled_from(("a", "b")))},
    )


def _family(a: IPAddress) -> IPFamily:
    return IPFamily.of(a)


def may_share(a: ServiceRequest, b: ServiceRequest) -> bool:
    """The sharing rule, restated independently of the implementation."""
    if a.sharing_key is None or a.sharing_key != b.sharing_key:
        return False
    if a.ports & b.ports:
        return False
    if a.external_traffic_policy != b.external_traffic_policy:
        return False
    return a.external_traffic_policy is TrafficPolicy.CLUSTER or dict(a.selector) == dict(
        b.selector
    )


def in_scope(p: Pool, request: ServiceRequest) -> bool:
    return not p.namespaces or request.namespace in p.namespaces


def pool_addresses(p: Pool, family: IPFamily) -> list[int]:
    """Every usable address of a small pool, by enumeration (the slow, obvious way)."""
    out = []
    for first, last in p.ranges:
        if _family(first) is not family:
            continue
        for n in range(int(first), int(last) + 1):
            if family is IPFamily.V4 and p.avoid_buggy_ips and n & 0xFF in (0, 255):
                continue
            if family is IPFamily.V6 and n % 2**64 == 0 and first != last:
                continue  # the Subnet-Router anycast address of its /64 (RFC 4291 §2.6.1)
            out.append(n)
    return out


def pool_size(p: Pool, family: IPFamily) -> int:
    sizes = [int(last) - int(first) + 1 for first, last in p.ranges if _family(first) is family]
    total = sum(sizes)
    if total <= SMALL:
        return len(pool_addresses(p, family))
    anycast = sum(
        int(last) // 2**64 - (int(first) - 1) // 2**64
        for first, last in p.ranges
        if _family(first) is family and family is IPFamily.V6 and first != last
    )
    return total - anycast


class AllocatorMachine(RuleBasedStateMachine):
    """Random assign / release / reconfigure / rebuild sequences against the invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.pools: list[Pool] = []
        self.alloc = Allocator()
        self.requests: dict[str, ServiceRequest] = {}  # the request each holder was assigned on

    @initialize(pools=pool_configs())
    def configure(self, pools: list[Pool]) -> None:
        self.pools = pools
        self.alloc = Allocator(pools)

    @rule(request=service_requests())
    def assign(self, request: ServiceRequest) -> None:
        lowest = self._lowest_free_before(request)
        result = self.alloc.assign(request)
        event(f"assign: {result.reason if isinstance(result, Refused) else 'assigned'}")
        if isinstance(result, Refused):
            assert self.alloc.assignment(request.key) is None
            self.requests.pop(request.key, None)
            if lowest is not None:
                assert result.reason is not RefusalReason.NO_FREE_ADDRESS, (result, lowest)
            return
        self.requests[request.key] = request
        families = [_family(a) for a in result.ips]
        assert len(set(families)) == len(families)
        if request.requested_ips:
            assert set(result.ips) == set(request.requested_ips)
        elif request.ip_family_policy is IPFamilyPolicy.REQUIRE_DUAL_STACK:
            assert set(families) == {IPFamily.V4, IPFamily.V6}
        elif request.ip_family_policy is IPFamilyPolicy.SINGLE_STACK:
            assert families == [request.ip_families[0]]
        if lowest is not None:
            event("assign: checked against the brute-force lowest free address")
            # A fresh single-stack Service without a key gets the lowest free address of
            # the first eligible pool with room.
            assert (result.pool, int(result.ips[0])) == lowest

    def _lowest_free_before(self, request: ServiceRequest) -> tuple[str, int] | None:
        """For a new, simple request: (pool, lowest free address) of the first eligible pool
        with room, from brute force."""
        if (
            request.key in self.requests
            or request.requested_ips
            or request.sharing_key is not None
            or request.ip_family_policy is not IPFamilyPolicy.SINGLE_STACK
        ):
            return None
        family = request.ip_families[0]
        for p in sorted(self.pools, key=lambda q: q.order):
            if request.requested_pool is not None and p.name != request.requested_pool:
                continue
            if request.requested_pool is None and not p.auto_assign:
                continue
            if not in_scope(p, request) or family not in p.families():
                continue
            if pool_size(p, family) > SMALL:
                return None  # the huge pool always has room; nothing to compare by brute force
            ip_of = IPv4Address if family is IPFamily.V4 else IPv6Address
            free = [n for n in pool_addresses(p, family) if not self.alloc.holders(ip_of(n))]
            if free:
                return p.name, min(free)
        return None

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data())
    def assign_again_unchanged(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.requests)))
        before = self.alloc.assignment(key)
        assert before is not None
        again = self.alloc.assign(self.requests[key])
        complete = len(before.ips) == len(self.requests[key].families)
        if complete or self.requests[key].requested_ips:
            assert again == before
        else:  # PreferDualStack may gain its missing family, never lose what it has
            assert isinstance(again, Assigned) and set(before.ips) <= set(again.ips)

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.requests)))
        before = self.alloc.assignment(key)
        assert before is not None
        released = self.requests[key]
        assert self.alloc.release(key) == before.ips
        del self.requests[key]
        assert self.alloc.assignment(key) is None
        for a in before.ips:
            assert key not in self.alloc.holders(a)
        # A released address can be had again (unless another sharer still holds it).
        for a in before.ips:
            if self.alloc.holders(a):
                continue
            probe = ServiceRequest(
                released.namespace,
                "probe",
                ip_families=(_family(a),),
                requested_ips=(a,),
            )
            got = self.alloc.assign(probe)
            assert isinstance(got, Assigned) and got.ips == (a,), got
            assert self.alloc.release(probe.key) == (a,)

    @rule(pools=pool_configs())
    def reconfigure(self, pools: list[Pool]) -> None:
        before = self.alloc.assignments()
        changes = self.alloc.reconfigure(pools)
        self.pools = pools
        changed = {c.key for c in changes}
        for change in changes:
            event(f"reconfigure: {change.reason}")
        after = self.alloc.assignments()
        for key, assigned in before.items():
            if key not in changed:
                assert after[key].ips == assigned.ips  # unaffected Services keep their IPs
        for change in changes:
            assert change.previous == before[change.key].ips
            if isinstance(change.result, Refused):
                assert change.key not in after
                del self.requests[change.key]
            else:
                assert after[change.key] == change.result

    @rule()
    def restart(self) -> None:
        restarted = Allocator(self.pools)
        before = self.alloc.assignments()
        changes = restarted.rebuild(self.alloc.holdings())
        # A restart changes nothing, except that a PreferDualStack Service holding one
        # family gets its other one if an address of it was freed meanwhile (the rebuild
        # re-assigns as a reconcile would); it keeps what it had and stays in its pool.
        for change in changes:
            event("restart: a PreferDualStack Service completed")
            assert change.reason is ChangeReason.FAMILY_ADDED, change
            request = self.requests[change.key]
            assert request.ip_family_policy is IPFamilyPolicy.PREFER_DUAL_STACK
            assert isinstance(change.result, Assigned)
            assert len(change.previous) == 1 and len(change.result.ips) == 2
            assert set(change.previous) < set(change.result.ips)
            assert change.result.pool == before[change.key].pool
        changed = {c.key for c in changes}
        after = restarted.assignments()
        assert {k: v for k, v in after.items() if k not in changed} == {
            k: v for k, v in before.items() if k not in changed
        }
        if not changes:
            assert restarted.usage() == self.alloc.usage()
        self.alloc = restarted

    @invariant()
    def no_ip_is_held_twice_unless_legally_shared(self) -> None:
        holders: dict[IPAddress, list[str]] = {}
        for key, assigned in self.alloc.assignments().items():
            for a in assigned.ips:
                holders.setdefault(a, []).append(key)
        for a, keys in holders.items():
            assert sorted(self.alloc.holders(a)) == sorted(keys)
            if len(keys) > 1:
                event("an IP is shared")
            for i, one in enumerate(keys):
                for other in keys[i + 1 :]:
                    assert may_share(self.requests[one], self.requests[other]), (a, one, other)

    @invariant()
    def every_assigned_ip_lies_in_an_eligible_pool(self) -> None:
        by_name = {p.name: p for p in self.pools}
        for key, assigned in self.alloc.assignments().items():
            p = by_name[assigned.pool]
            request = self.requests[key]
            assert in_scope(p, request)
            assert request.requested_pool in (None, p.name)
            for a in assigned.ips:
                family = _family(a)
                inside = any(
                    int(first) <= int(a) <= int(last)
                    for first, last in p.ranges
                    if _family(first) is family
                )
                assert inside, (a, p)
                assert not (
                    family is IPFamily.V4 and p.avoid_buggy_ips and int(a) & 0xFF in (0, 255)
                )

    @invariant()
    def usage_counts_distinct_held_addresses(self) -> None:
        held: dict[tuple[str, IPFamily], set[IPAddress]] = {}
        for assigned in self.alloc.assignments().values():
            for a in assigned.ips:
                held.setdefault((assigned.pool, _family(a)), set()).add(a)
        for p in self.pools:
            for family, use in self.alloc.usage()[p.name].items():
                count = len(held.get((p.name, family), ()))
                assert use.assigned == count
                assert use.available == pool_size(p, family) - count


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@settings(max_examples=200, deadline=None)
@given(
    first=st.integers(0, 2**32 - 1),
    length=st.integers(0, 2000),
    avoid_buggy=st.booleans(),
)
def test_free_space_size_matches_enumeration(first: int, length: int, avoid_buggy: bool) -> None:
    last = min(first + length, 2**32 - 1)
    space = FreeSpace([(first, last)], avoid_buggy, set())
    expected = sum(1 for n in range(first, last + 1) if not (avoid_buggy and n & 0xFF in (0, 255)))
    assert space.size == expected


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=80))
def test_free_space_always_hands_out_the_lowest_free_address(ops: list[tuple[bool, int]]) -> None:
    lo = 250  # the 30 addresses from here cross a .255/.0 boundary
    universe = range(lo, lo + 30)
    held: set[int] = set()
    space = FreeSpace([(lo, lo + 29)], True, held)
    for take, index in ops:
        if take:
            got = space.take()
            free = [n for n in universe if n not in held and n & 0xFF not in (0, 255)]
            assert got == (min(free) if free else None)
            if got is not None:
                held.add(got)
        elif held:
            n = sorted(held)[index % len(held)]
            held.discard(n)
            space.put_back(n)
