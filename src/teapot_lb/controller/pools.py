"""Which AddressPools the allocator uses, and each pool's desired status (pure).

A pool is used when it parses and passes validation; an invalid pool is left out (as if
it did not exist) and reports why in its `Valid` condition and a Warning Event, while
every other pool keeps working. Two pools may not share a name (Services name pools by
name): the older one wins (`creationTimestamp`, then `namespace/name` order). Of two
overlapping pools, one that holds no Service IP yields to one that does, then the newer
to the older (:mod:`teapot_lb.validation.pools`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView, object_key
from teapot_lb.controller.convert import pool_of
from teapot_lb.model import (
    AddressPool,
    AddressPoolStatus,
    Condition,
    ConditionStatus,
    ObjectRef,
    Problem,
    dump,
)
from teapot_lb.model.common import creation_order
from teapot_lb.model.event import Event, EventType
from teapot_lb.validation import ConfigSet, validate

CONDITION_VALID = "Valid"
REASON_VALID = "Valid"
REASON_INVALID = "InvalidConfiguration"
_MAX_COUNT = 2**63 - 1  # status counts are int64 (a /64 holds 2^64 addresses)


@dataclass(frozen=True)
class UnparsedPool:
    """An AddressPool the adapter could not read into the model: why, and the conditions
    its stored status carries (so a condition already reported is not reported again)."""

    ref: ObjectRef
    problems: tuple[Problem, ...]
    conditions: tuple[Condition, ...] = ()
    generation: int | None = None


@dataclass(frozen=True)
class PoolConfig:
    """The pools the allocator uses (`pools`, by name) and the problems of the others
    (`problems`, by pool key `namespace/name`)."""

    pools: tuple[ipam.Pool, ...] = ()
    problems: Mapping[str, tuple[Problem, ...]] = field(default_factory=dict)
    keys: Mapping[str, str] = field(default_factory=dict)  # pool name -> key of the pool used

    def is_valid(self, key: str) -> bool:
        return key not in self.problems


def pool_config(
    view: ClusterView, unparsed: Mapping[str, UnparsedPool] | None = None
) -> PoolConfig:
    """Split the view's pools into usable ones and invalid ones (with their problems)."""
    problems: dict[str, list[Problem]] = {}
    for key, bad in (unparsed or {}).items():
        problems.setdefault(key, []).extend(bad.problems)
    candidates: dict[str, AddressPool] = {}
    keys: dict[str, str] = {}
    for key in sorted(view.pools, key=lambda k: creation_order(view.pools[k])):
        pool = view.pools[key]
        first = keys.get(pool.name)
        if first is not None:
            problems.setdefault(key, []).append(
                Problem(
                    pool.kind,
                    pool.name,
                    pool.metadata.namespace,
                    "metadata.name",
                    f"another AddressPool is named {pool.name!r} ({first}); Services name pools"
                    " by name, so pool names must be unique across namespaces",
                )
            )
            continue
        keys[pool.name] = key
        candidates[key] = pool
    key_of_ref = {pool.ref: key for key, pool in candidates.items()}
    # The Services are there for the overlap rule: a pool holding none yields its range.
    services = list(view.services.values())
    for found in validate(ConfigSet(pools=list(candidates.values()), services=services)):
        owner = key_of_ref.get(found.ref)
        if owner is not None:
            problems.setdefault(owner, []).append(found)
    usable = tuple(pool_of(pool) for key, pool in candidates.items() if key not in problems)
    return PoolConfig(
        pools=usable,
        problems={key: tuple(found) for key, found in problems.items()},
        keys={name: key for name, key in keys.items() if key not in problems},
    )


def problems_text(problems: Sequence[Problem]) -> str:
    """Problems of one object as one line: `field: message; field: message`."""
    return "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in problems)


@dataclass(frozen=True)
class PoolOutcome:
    """What one pool's status should be. `status` is the complete desired status (JSON);
    `changed` says whether it differs from the stored one; `events` go on the pool."""

    key: str
    ref: ObjectRef
    status: dict[str, Any]
    changed: bool
    events: tuple[Event, ...] = ()


def _valid_condition(
    problems: Sequence[Problem],
    previous: Sequence[Condition],
    now: datetime,
    generation: int | None,
) -> tuple[Condition, bool]:
    """The `Valid` condition, and whether it newly turned (or changed while) invalid."""
    if problems:
        status, reason, message = ConditionStatus.FALSE, REASON_INVALID, problems_text(problems)
    else:
        status, reason, message = ConditionStatus.TRUE, REASON_VALID, "the pool is in use"
    old = next((c for c in previous if c.type == CONDITION_VALID), None)
    since = old.last_transition_time if old is not None and old.status is status else now
    condition = Condition(
        type=CONDITION_VALID,
        status=status,
        reason=reason,
        message=message[:32768],
        last_transition_time=since,
        observed_generation=generation,
    )
    news = bool(problems) and (old is None or old.status is not status or old.message != message)
    return condition, news


def pool_statuses(
    view: ClusterView,
    config: PoolConfig,
    usage: Mapping[str, Mapping[ipam.IPFamily, ipam.FamilyUsage]],
    now: datetime,
    unparsed: Mapping[str, UnparsedPool] | None = None,
) -> list[PoolOutcome]:
    """The desired status of every pool in the view (and of every unparsed one).

    `usage` is `Allocator.usage()`; `now` stamps conditions that change.
    """
    outcomes: list[PoolOutcome] = []
    for key in sorted(view.pools):
        pool = view.pools[key]
        problems = config.problems.get(key, ())
        previous = pool.status.conditions if pool.status else []
        condition, news = _valid_condition(problems, previous, now, pool.metadata.generation)
        counts = usage.get(pool.name, {}) if not problems else {}
        v4 = counts.get(ipam.IPFamily.V4)
        v6 = counts.get(ipam.IPFamily.V6)
        status = AddressPoolStatus(
            assigned_ipv4=min(v4.assigned, _MAX_COUNT) if v4 else 0,
            available_ipv4=min(v4.available, _MAX_COUNT) if v4 else 0,
            assigned_ipv6=min(v6.assigned, _MAX_COUNT) if v6 else 0,
            available_ipv6=min(v6.available, _MAX_COUNT) if v6 else 0,
            conditions=[condition],
        )
        desired = dump(status)
        current = dump(pool.status) if pool.status else None
        events = (Event(EventType.WARNING, REASON_INVALID, condition.message),) if news else ()
        outcomes.append(PoolOutcome(key, pool.ref, desired, desired != current, events))
    for key, bad in sorted((unparsed or {}).items()):
        if key in view.pools:
            continue
        condition, news = _valid_condition(bad.problems, bad.conditions, now, bad.generation)
        desired = dump(AddressPoolStatus(conditions=[condition]))
        changed = news or list(bad.conditions) != [condition]
        events = (Event(EventType.WARNING, REASON_INVALID, condition.message),) if news else ()
        outcomes.append(PoolOutcome(key, bad.ref, desired, changed, events))
    return outcomes


def pool_key(pool: AddressPool) -> str:
    return object_key(pool.metadata.namespace, pool.name)
