"""The address allocator: which Service holds which IPs, and from which pool.

State is only what Services hold; everything else (free lists, counts, the sharing index)
is derived and rebuilt from it on a restart or a configuration change. Each operation is
O(log n) amortized in the number of held addresses (plus the number of pools, and of IPs
under the Service's sharing key), so 100k Services cost the same per Service as 10k.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from itertools import pairwise

from teapot_lb.ipam.free_space import FreeSpace
from teapot_lb.ipam.outcome import (
    Assigned,
    Change,
    ChangeReason,
    FamilyUsage,
    RefusalReason,
    Refused,
    Result,
)
from teapot_lb.ipam.pool import Pool
from teapot_lb.ipam.request import (
    Holding,
    IPAddress,
    IPFamily,
    IPFamilyPolicy,
    ServiceRequest,
)
from teapot_lb.ipam.sharing import sharing_refusal

V4, V6 = IPFamily.V4, IPFamily.V6

# An address as the allocator handles it.
Claim = tuple[IPFamily, int]
# An address a Service can no longer keep, and why.
Drop = tuple[IPAddress, ChangeReason, str]


# What a Service holds, as stored: its pool's name and its addresses, IPv6 ones marked by
# a bit above the 128 address bits. Only str and int inside, so the garbage collector
# stops tracking these tuples after its first look and never walks 100k of them again.
_Record = tuple[str, tuple[int, ...]]
_V6_MARK = 1 << 128


def _ip(family: IPFamily, n: int) -> IPAddress:
    return IPv4Address(n) if family is V4 else IPv6Address(n)


def _decode(code: int) -> tuple[IPFamily, int]:
    return (V6, code ^ _V6_MARK) if code >= _V6_MARK else (V4, code)


def _record_ips(record: _Record) -> tuple[IPAddress, ...]:
    return tuple(_ip(*_decode(code)) for code in record[1])


def _complete(request: ServiceRequest, held: int) -> bool:
    """Holding `held` addresses, `request` has all it asks for."""
    return held == (len(request.requested_ips) or len(request.families))


def _families_text(families: Iterable[IPFamily]) -> str:
    return " and ".join(str(f) for f in families)


@dataclass(slots=True)
class _PoolState:
    pool: Pool
    spaces: dict[IPFamily, FreeSpace]
    open_scope: bool  # admits every Service; skips the scope check on the hot path


class Allocator:
    """Assigns, keeps and releases Services' load-balancer IPs. Pure: no I/O, no clock.

    Pools must not overlap and must have distinct names (validation rejects such configs
    before they get here; a ValueError says so if one slips through).
    """

    def __init__(self, pools: Iterable[Pool] = ()) -> None:
        self._install(pools)

    # -- public API -------------------------------------------------------------------

    @property
    def pools(self) -> tuple[Pool, ...]:
        """The configured pools, in the order they are tried."""
        return tuple(state.pool for state in self._order)

    def assign(self, request: ServiceRequest) -> Result:
        """Give `request` its IPs: the ones it holds when still valid, else new ones."""
        record = self._assigned.get(request.key)
        if record is None:
            return self._fresh(request)
        if self._requests[request.key] == request and _complete(request, len(record[1])):
            return Assigned(request.key, _record_ips(record), record[0])
        return self._settle(request, self._unhold(request.key))

    def release(self, key: str) -> tuple[IPAddress, ...]:
        """`key` (namespace/name) gives its IPs back; returns them (empty if it held none)."""
        return self._unhold(key)

    def reconfigure(self, pools: Iterable[Pool]) -> list[Change]:
        """Switch to a new pool configuration.

        Services whose IPs are still valid keep them; the others are re-assigned (or
        refused), each reported as a Change with the reason.
        """
        items = [(self._requests[key], _record_ips(rec)) for key, rec in self._assigned.items()]
        self._install(pools)
        return self._replay(items)

    def rebuild(self, holdings: Iterable[Holding]) -> list[Change]:
        """Forget all state and take it from what Services hold (after a restart).

        Call it with every Service that has IPs before assigning to Services without
        any, so no new Service is handed an IP that an existing one holds.
        """
        items = [(h.request, h.ips) for h in holdings if h.ips]
        self._install(self.pools)
        return self._replay(items)

    def assignment(self, key: str) -> Assigned | None:
        record = self._assigned.get(key)
        return None if record is None else Assigned(key, _record_ips(record), record[0])

    def assignments(self) -> dict[str, Assigned]:
        return {key: Assigned(key, _record_ips(rec), rec[0]) for key, rec in self._assigned.items()}

    def holdings(self) -> list[Holding]:
        """The whole state, in the form `rebuild` takes."""
        return [
            Holding(self._requests[key], _record_ips(rec)) for key, rec in self._assigned.items()
        ]

    def holders(self, ip: IPAddress) -> tuple[str, ...]:
        """The Services holding `ip` (several only when they legally share it)."""
        return self._holders[IPFamily.of(ip)].get(int(ip), ())

    def usage(self) -> dict[str, dict[IPFamily, FamilyUsage]]:
        """Per pool and family: addresses assigned (shared ones once) and still available."""
        return {
            state.pool.name: {
                family: FamilyUsage(space.assigned, space.available)
                for family, space in sorted(state.spaces.items())
            }
            for state in self._order
        }

    # -- configuration ----------------------------------------------------------------

    def _install(self, pools: Iterable[Pool]) -> None:
        """New pools and empty state; on a ValueError the allocator is left as it was."""
        holders: dict[IPFamily, dict[int, tuple[str, ...]]] = {V4: {}, V6: {}}
        order: list[_PoolState] = []
        by_name: dict[str, _PoolState] = {}
        spans: dict[IPFamily, list[tuple[int, int, _PoolState]]] = {V4: [], V6: []}
        for pool in sorted(pools, key=lambda p: p.order):
            if pool.name in by_name:
                raise ValueError(f"two pools are named {pool.name}")
            per_family: dict[IPFamily, list[tuple[int, int]]] = {}
            for first, last in pool.ranges:
                per_family.setdefault(IPFamily.of(first), []).append((int(first), int(last)))
            state = _PoolState(
                pool=pool,
                spaces={
                    family: FreeSpace(
                        ranges,
                        pool.avoid_buggy_ips and family is V4,
                        holders[family],
                        skip_anycast=family is not V4,
                    )
                    for family, ranges in per_family.items()
                },
                open_scope=not (
                    pool.namespaces or pool.namespace_selectors or pool.service_selectors
                ),
            )
            order.append(state)
            by_name[pool.name] = state
            for family, ranges in per_family.items():
                spans[family].extend((lo, hi, state) for lo, hi in ranges)
        firsts: dict[IPFamily, list[int]] = {}
        lasts: dict[IPFamily, list[tuple[int, _PoolState]]] = {}
        for family, family_spans in spans.items():
            family_spans.sort(key=lambda span: span[0])
            for (_, end, a), (start, _, b) in pairwise(family_spans):
                if start <= end:
                    where = _ip(family, start)
                    raise ValueError(f"pools {a.pool.name} and {b.pool.name} overlap at {where}")
            firsts[family] = [start for start, _, _ in family_spans]
            lasts[family] = [(end, state) for _, end, state in family_spans]

        self._order, self._pools = order, by_name
        self._firsts, self._spans = firsts, lasts
        self._holders = holders
        # What each Service holds, and what it asked for.
        self._assigned: dict[str, _Record] = {}
        self._requests: dict[str, ServiceRequest] = {}
        self._by_sharing_key: dict[str, set[Claim]] = {}

    def _pool_of(self, family: IPFamily, n: int) -> _PoolState | None:
        i = bisect_right(self._firsts[family], n) - 1
        if i < 0:
            return None
        last, state = self._spans[family][i]
        return state if n <= last else None

    # -- holding and releasing --------------------------------------------------------

    def _hold(self, request: ServiceRequest, state: _PoolState, claims: list[Claim]) -> Assigned:
        key, sharing_key = request.key, request.sharing_key
        ips, codes = [], []
        for family, n in claims:
            holders = self._holders[family]
            current = holders.get(n)
            if current is None:
                holders[n] = (key,)
                state.spaces[family].assigned += 1
            else:
                holders[n] = (*current, key)
            if sharing_key is not None:
                self._by_sharing_key.setdefault(sharing_key, set()).add((family, n))
            ips.append(_ip(family, n))
            codes.append(n if family is V4 else n | _V6_MARK)
        self._assigned[key] = (state.pool.name, tuple(codes))
        self._requests[key] = request
        return Assigned(key, tuple(ips), state.pool.name)

    def _unhold(self, key: str) -> tuple[IPAddress, ...]:
        record = self._assigned.pop(key, None)
        if record is None:
            return ()
        request = self._requests.pop(key)
        state = self._pools[record[0]]
        for code in record[1]:
            family, n = _decode(code)
            holders = self._holders[family]
            rest = tuple(k for k in holders[n] if k != key)
            if rest:
                holders[n] = rest
                continue
            del holders[n]
            space = state.spaces[family]
            space.assigned -= 1
            space.put_back(n)
            if request.sharing_key is not None:
                shared = self._by_sharing_key[request.sharing_key]
                shared.discard((family, n))
                if not shared:
                    del self._by_sharing_key[request.sharing_key]
        return _record_ips(record)

    def _conflict(
        self, request: ServiceRequest, family: IPFamily, n: int
    ) -> tuple[RefusalReason, str] | None:
        """Why `request` may not hold address n next to its current holders, if it may not."""
        for holder_key in self._holders[family].get(n, ()):
            if holder_key == request.key:
                continue
            refusal = sharing_refusal(request, self._requests[holder_key])
            if refusal is not None:
                return refusal
        return None

    # -- keeping what a Service holds -------------------------------------------------

    def _keep(
        self, request: ServiceRequest, ips: tuple[IPAddress, ...]
    ) -> tuple[_PoolState | None, list[Claim], list[Drop]]:
        """Which of `ips` `request` may keep (all in one pool), and why the others not."""
        wanted = request.families
        requested = set(request.requested_ips)
        state: _PoolState | None = None
        claims: list[Claim] = []
        drops: list[Drop] = []
        for ip in ips:
            family, n = IPFamily.of(ip), int(ip)
            where = self._pool_of(family, n)
            if requested and ip not in requested:
                drops.append((ip, ChangeReason.NOT_REQUESTED, f"{request.key} requests other IPs"))
            elif family not in wanted or any(f is family for f, _ in claims):
                drops.append(
                    (
                        ip,
                        ChangeReason.NOT_REQUESTED,
                        f"{request.key} wants {_families_text(wanted)}",
                    )
                )
            elif where is None:
                drops.append((ip, ChangeReason.POOL_GONE, f"{ip} lies in no pool any more"))
            elif request.requested_pool is not None and where.pool.name != request.requested_pool:
                drops.append(
                    (
                        ip,
                        ChangeReason.NOT_REQUESTED,
                        f"{ip} is in pool {where.pool.name}, {request.key} requests pool "
                        f"{request.requested_pool}",
                    )
                )
            elif not where.open_scope and (why := where.pool.scope_refusal(request)):
                drops.append((ip, ChangeReason.POOL_NOT_ALLOWED, why))
            elif where.spaces[family].is_buggy(n):
                drops.append((ip, ChangeReason.BUGGY_ADDRESS, _avoided(where.pool.name, ip)))
            elif state is not None and where is not state:
                drops.append(
                    (
                        ip,
                        ChangeReason.SPLIT_POOLS,
                        f"{ip} is in pool {where.pool.name}, the other IP in {state.pool.name}",
                    )
                )
            elif conflict := self._conflict(request, family, n):
                drops.append((ip, ChangeReason.CONFLICT, f"{ip}: {conflict[1]}"))
            else:
                state = where
                claims.append((family, n))
        return state, claims, drops

    def _settle(self, request: ServiceRequest, previous: tuple[IPAddress, ...]) -> Result:
        """Assign `request` (which holds nothing now), keeping what it can of `previous`."""
        state, claims, _ = self._keep(request, previous)
        if state is not None:
            if request.requested_ips:
                if len(claims) == len(request.requested_ips):
                    order = [IPFamily.of(ip) for ip in request.requested_ips]
                    claims.sort(key=lambda c: order.index(c[0]))
                    return self._hold(request, state, claims)
            else:
                have = {family for family, _ in claims}
                missing = [f for f in request.families if f not in have]
                got = self._draw_all(request, state, missing, require_all=False) or []
                if (
                    len(got) == len(missing)
                    or request.ip_family_policy is not IPFamilyPolicy.REQUIRE_DUAL_STACK
                ):
                    order = list(request.families)
                    both = sorted(claims + got, key=lambda c: order.index(c[0]))
                    return self._hold(request, state, both)
                for family, n in got:
                    state.spaces[family].put_back(n)
        return self._fresh(request)

    def _replay(self, items: list[tuple[ServiceRequest, tuple[IPAddress, ...]]]) -> list[Change]:
        """Hold what each Service may keep, then re-assign the rest (after a config change)."""
        items.sort(key=lambda item: item[0].key)
        pending: list[tuple[ServiceRequest, tuple[IPAddress, ...], list[Drop]]] = []
        for request, ips in items:
            state, claims, drops = self._keep(request, ips)
            if state is not None:
                self._hold(request, state, claims)
            if drops or not _complete(request, len(claims)):
                pending.append((request, ips, drops))
        changes = []
        for request, ips, drops in pending:
            self._unhold(request.key)
            result = self._settle(request, ips)
            if isinstance(result, Assigned) and result.ips == ips:
                continue
            if drops:
                _, reason, message = drops[0]
            elif isinstance(result, Assigned) and set(ips) < set(result.ips):
                reason = ChangeReason.FAMILY_ADDED
                message = f"{request.key} got {_families_text(request.families)}"
            else:
                reason = ChangeReason.INCOMPLETE
                message = f"{request.key} needs {_families_text(request.families)} from one pool"
            changes.append(Change(request.key, ips, result, reason, message))
        return changes

    # -- new addresses ----------------------------------------------------------------

    def _draw(self, request: ServiceRequest, state: _PoolState, family: IPFamily) -> int | None:
        """An address of `family` from `state` for `request`: a shareable one, else the lowest
        free one (off the free list: the caller holds it or puts it back)."""
        space = state.spaces.get(family)
        if space is None:
            return None
        if request.sharing_key is not None:
            for f, n in sorted(self._by_sharing_key.get(request.sharing_key, ())):
                if (
                    f is family
                    and self._pool_of(family, n) is state
                    and self._conflict(request, family, n) is None
                ):
                    return n
        return space.take()

    def _draw_all(
        self,
        request: ServiceRequest,
        state: _PoolState,
        families: Iterable[IPFamily],
        *,
        require_all: bool,
    ) -> list[Claim] | None:
        got: list[Claim] = []
        for family in families:
            n = self._draw(request, state, family)
            if n is not None:
                got.append((family, n))
            elif require_all:
                for f, m in got:
                    state.spaces[f].put_back(m)
                return None
        return got or None

    def _fresh(self, request: ServiceRequest) -> Result:
        if request.requested_ips:
            return self._fresh_requested(request)
        return self._fresh_auto(request)

    def _fresh_auto(self, request: ServiceRequest) -> Result:
        key, families = request.key, request.families
        need_all = request.ip_family_policy is not IPFamilyPolicy.PREFER_DUAL_STACK
        if request.requested_pool is not None:
            named = self._pools.get(request.requested_pool)
            if named is None:
                return Refused(
                    key,
                    RefusalReason.UNKNOWN_POOL,
                    f"{key} requests pool {request.requested_pool}, which does not exist",
                )
            why = named.pool.scope_refusal(request)
            if why is not None:
                return Refused(key, RefusalReason.POOL_NOT_ALLOWED, f"{key}: {why}")
            candidates = [named]
        else:
            candidates = [
                state
                for state in self._order
                if state.pool.auto_assign
                and (state.open_scope or state.pool.scope_refusal(request) is None)
            ]
        if need_all:
            candidates = [s for s in candidates if all(f in s.spaces for f in families)]
        else:
            candidates = [s for s in candidates if any(f in s.spaces for f in families)]
        if not candidates:
            return self._no_eligible_pool(request, need_all)
        for state in candidates:
            if need_all or all(f in state.spaces for f in families):
                got = self._draw_all(request, state, families, require_all=True)
                if got is not None:
                    return self._hold(request, state, got)
        if not need_all:
            for state in candidates:
                got = self._draw_all(request, state, families, require_all=False)
                if got is not None:
                    return self._hold(request, state, got)
        names = ", ".join(state.pool.name for state in candidates)
        return Refused(
            key,
            RefusalReason.NO_FREE_ADDRESS,
            f"{key}: no free {_families_text(families)} address in eligible pools ({names})",
        )

    def _no_eligible_pool(self, request: ServiceRequest, need_all: bool) -> Refused:
        """The refusal when no pool fits, with each pool's reason (the slow, rare path)."""
        families = request.families
        reasons = []
        for state in self._order:
            pool = state.pool
            if request.requested_pool is not None and pool.name != request.requested_pool:
                continue
            lacking = [f for f in families if f not in state.spaces]
            if lacking and (need_all or len(lacking) == len(families)):
                reasons.append(f"pool {pool.name} has no {_families_text(lacking)} addresses")
            elif not pool.auto_assign and request.requested_pool is None:
                reasons.append(f"pool {pool.name} has autoAssign off and was not requested")
            elif why := pool.scope_refusal(request):
                reasons.append(why)
        detail = "; ".join(reasons) if reasons else "no pools are configured"
        return Refused(
            request.key,
            RefusalReason.NO_ELIGIBLE_POOL,
            f"{request.key}: no pool can give {_families_text(families)} ({detail})",
        )

    def _fresh_requested(self, request: ServiceRequest) -> Result:
        key, ips = request.key, request.requested_ips
        families = [IPFamily.of(ip) for ip in ips]
        listed = ", ".join(str(ip) for ip in ips)
        if len(set(families)) != len(families):
            return Refused(
                key,
                RefusalReason.INVALID_REQUEST,
                f"{key} requests {listed}: at most one address per family",
            )
        policy = request.ip_family_policy
        if policy is IPFamilyPolicy.SINGLE_STACK and len(ips) > 1:
            return Refused(
                key, RefusalReason.INVALID_REQUEST, f"{key} is SingleStack but requests {listed}"
            )
        if policy is IPFamilyPolicy.REQUIRE_DUAL_STACK and len(ips) < 2:
            return Refused(
                key,
                RefusalReason.INVALID_REQUEST,
                f"{key} is RequireDualStack but requests only {listed}",
            )
        for ip, family in zip(ips, families, strict=True):
            if family not in request.families:
                return Refused(
                    key,
                    RefusalReason.FAMILY_MISMATCH,
                    f"{key} requests {ip} but its ipFamilies are "
                    f"{_families_text(request.families)}",
                )
        if request.requested_pool is not None and request.requested_pool not in self._pools:
            return Refused(
                key,
                RefusalReason.UNKNOWN_POOL,
                f"{key} requests pool {request.requested_pool}, which does not exist",
            )
        state: _PoolState | None = None
        claims: list[Claim] = []
        for ip, family in zip(ips, families, strict=True):
            n = int(ip)
            where = self._pool_of(family, n)
            if where is None:
                return Refused(key, RefusalReason.NOT_IN_ANY_POOL, f"{key}: {ip} is in no pool")
            pool = where.pool
            if request.requested_pool is not None and pool.name != request.requested_pool:
                return Refused(
                    key,
                    RefusalReason.NOT_IN_REQUESTED_POOL,
                    f"{key}: {ip} is in pool {pool.name}, not in the requested pool "
                    f"{request.requested_pool}",
                )
            why = pool.scope_refusal(request)
            if why is not None:
                return Refused(key, RefusalReason.POOL_NOT_ALLOWED, f"{key} requests {ip}: {why}")
            if where.spaces[family].is_buggy(n):
                return Refused(
                    key,
                    RefusalReason.BUGGY_ADDRESS,
                    f"{key} requests {ip}, but {_avoided(pool.name, ip)}",
                )
            if state is not None and where is not state:
                return Refused(
                    key,
                    RefusalReason.POOLS_DIFFER,
                    f"{key} requests {listed} from two pools ({state.pool.name}, {pool.name})",
                )
            conflict = self._conflict(request, family, n)
            if conflict is not None:
                reason, detail = conflict
                return Refused(
                    key, reason, f"{key} cannot have {ip} from pool {pool.name}: {detail}"
                )
            state = where
            claims.append((family, n))
        assert state is not None  # ips is not empty
        return self._hold(request, state, claims)


def _avoided(pool: str, ip: IPAddress) -> str:
    """Why pool `pool` never hands out `ip` (:meth:`FreeSpace.is_buggy`)."""
    if ip.version == 6:
        return (
            f"{ip} is the Subnet-Router anycast address of its /64 (RFC 4291 §2.6.1),"
            f" which pool {pool} never assigns"
        )
    return f"pool {pool} avoids buggy .0/.255 addresses ({ip})"
