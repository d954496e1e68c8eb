"""What the IPAM answers: typed results, never exceptions, for anything a user can cause."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from teapot_lb.ipam.request import IPAddress


@dataclass(frozen=True, slots=True)
class Assigned:
    """`key` holds `ips` (primary family first), all drawn from `pool`."""

    key: str
    ips: tuple[IPAddress, ...]
    pool: str


class RefusalReason(StrEnum):
    """Why a Service got no IP. Values are CamelCase for Events and status conditions."""

    INVALID_REQUEST = "InvalidRequest"  # e.g. two IPv4 addresses requested
    FAMILY_MISMATCH = "FamilyMismatch"  # requested IP's family not in the Service's families
    UNKNOWN_POOL = "UnknownPool"  # the requested pool does not exist
    POOL_NOT_ALLOWED = "PoolNotAllowed"  # the pool's scope excludes the Service
    NOT_IN_ANY_POOL = "NotInAnyPool"  # a requested IP lies in no pool
    NOT_IN_REQUESTED_POOL = "NotInRequestedPool"  # a requested IP lies outside the named pool
    POOLS_DIFFER = "PoolsDiffer"  # requested IPs lie in different pools
    BUGGY_ADDRESS = "BuggyAddress"  # requested x.x.x.0/255 from an avoidBuggyIPs pool
    NO_ELIGIBLE_POOL = "NoEligiblePool"  # no pool of the right family admits the Service
    NO_FREE_ADDRESS = "NoFreeAddress"  # eligible pools are full
    IP_IN_USE = "IPInUse"  # held by a Service with no or another sharing key
    PORT_CONFLICT = "PortConflict"  # same sharing key, but a port/protocol clashes
    TRAFFIC_POLICY_MISMATCH = "TrafficPolicyMismatch"  # same key, Cluster vs Local
    SELECTOR_MISMATCH = "SelectorMismatch"  # same key, both Local, different pod selectors


@dataclass(frozen=True, slots=True)
class Refused:
    """`key` got nothing; `message` names the Service, the pool and why."""

    key: str
    reason: RefusalReason
    message: str


Result = Assigned | Refused


class ChangeReason(StrEnum):
    """Why a Service's IPs changed when the configuration or the rebuilt state said so."""

    POOL_GONE = "PoolGone"  # the IP lies in no pool any more
    POOL_NOT_ALLOWED = "PoolNotAllowed"  # the pool's scope no longer admits the Service
    BUGGY_ADDRESS = "BuggyAddress"  # avoidBuggyIPs now excludes the IP
    NOT_REQUESTED = "NotRequested"  # the Service now asks for other IPs, pool or families
    SPLIT_POOLS = "SplitPools"  # its IPs now lie in different pools
    CONFLICT = "Conflict"  # another Service holds the IP and may not share it
    FAMILY_ADDED = "FamilyAdded"  # a dual-stack Service got the family it lacked
    INCOMPLETE = "Incomplete"  # RequireDualStack could not get both families from one pool


@dataclass(frozen=True, slots=True)
class Change:
    """`key` held `previous` and now holds what `result` says, because of `reason`."""

    key: str
    previous: tuple[IPAddress, ...]
    result: Result
    reason: ChangeReason
    message: str


@dataclass(frozen=True, slots=True)
class FamilyUsage:
    """Addresses of one family in one pool (exact counts, also for /64s)."""

    assigned: int
    available: int
