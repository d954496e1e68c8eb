"""The free addresses of one family in one pool, found without scanning the pool.

Addresses are ints. Allocation always hands out the lowest free address, in amortized
O(log n): a cursor walks the ranges once, upwards, and every address freed below it goes
into a heap of holes. Nothing here enumerates a range, so a /64 costs the same as a /24.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Container, Sequence


def _count_low_byte(first: int, last: int, value: int) -> int:
    """How many ints in first..last end in the byte `value`."""
    return (last - value) // 256 - (first - 1 - value) // 256


_IID = (1 << 64) - 1  # an IPv6 address's 64-bit interface identifier


def _count_iid_zero(first: int, last: int) -> int:
    """How many ints in first..last have an all-zeros interface identifier."""
    return last // (1 << 64) - (first - 1) // (1 << 64)


class FreeSpace:
    """One family of one pool.

    `held` is a view of who holds what (owned by the allocator): an address is free when it
    is not in `held`. `assigned` counts distinct held addresses in this space; the allocator
    keeps it up to date as addresses become held and free.
    """

    __slots__ = (
        "_cursor",
        "_firsts",
        "_held",
        "_holes",
        "_range",
        "_single",
        "assigned",
        "avoid_buggy",
        "ranges",
        "size",
        "skip_anycast",
    )

    def __init__(
        self,
        ranges: Sequence[tuple[int, int]],
        avoid_buggy: bool,
        held: Container[int],
        skip_anycast: bool = False,
    ) -> None:
        self.ranges = sorted(ranges)
        self._firsts = [first for first, _ in self.ranges]
        self.avoid_buggy = avoid_buggy
        self.skip_anycast = skip_anycast
        # A range of one address is an address listed on purpose: used as it is.
        self._single = frozenset(first for first, last in self.ranges if first == last)
        self._held = held
        self._holes: list[int] = []
        self._range = 0
        self._cursor = self.ranges[0][0]
        self.assigned = 0
        size = sum(last - first + 1 for first, last in self.ranges)
        if avoid_buggy:
            size -= sum(
                _count_low_byte(f, last, 0) + _count_low_byte(f, last, 255)
                for f, last in self.ranges
            )
        if skip_anycast:
            size -= sum(_count_iid_zero(f, last) for f, last in self.ranges if f != last)
        self.size = size

    @property
    def available(self) -> int:
        return self.size - self.assigned

    def contains(self, ip: int) -> bool:
        """`ip` lies in one of the ranges (buggy or not)."""
        i = bisect_right(self._firsts, ip) - 1
        return i >= 0 and ip <= self.ranges[i][1]

    def is_buggy(self, ip: int) -> bool:
        """An address never handed out: x.x.x.0 and x.x.x.255, which some old clients and
        routers mishandle (IPv4, with avoidBuggyIPs), and an IPv6 address whose interface
        identifier is all zeros, the Subnet-Router anycast address of its /64 (RFC 4291
        §2.6.1: routers on that link answer it) unless it is a range of its own."""
        if self.skip_anycast:
            return ip & _IID == 0 and ip not in self._single
        return self.avoid_buggy and (ip & 0xFF) in (0, 255)

    def take(self) -> int | None:
        """The lowest free address, now off the free list; the caller holds it or puts it back."""
        holes, held = self._holes, self._held
        while holes:
            ip = heapq.heappop(holes)
            if ip not in held:
                return ip
        ranges = self.ranges
        while self._range < len(ranges):
            last = ranges[self._range][1]
            ip = self._cursor
            while ip <= last:
                if ip not in held and not self.is_buggy(ip):
                    self._cursor = ip + 1
                    return ip
                ip += 1
            self._range += 1
            self._cursor = ranges[self._range][0] if self._range < len(ranges) else last + 1
        return None

    def put_back(self, ip: int) -> None:
        """`ip` is free again (released, or taken and not used)."""
        if ip < self._cursor:
            heapq.heappush(self._holes, ip)
