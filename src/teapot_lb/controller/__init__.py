"""The controller: LoadBalancer Services get IPs from AddressPools.

The core is pure (no I/O, no clock, no asyncio) and reads only a
:class:`~teapot_lb.cluster.ClusterView`; an adapter fills the view and applies what the
core decides. Two adapters run the very same core: the Kubernetes runner
(:mod:`teapot_lb.controller.kube_runner`) and standalone mode (manifests on disk).

How an adapter drives it::

    state = rebuild(view, options)            # once the cache is filled (or on leadership)
    for key in view.services: enqueue(key)    # then every Service once
    ...
    outcome = reconcile_service(view, state, key)    # per Service key, any time, any order
    if outcome.status is not None:  write status.loadBalancer.ingress = outcome.status
    if outcome.annotate:            set (or remove, if None) annotation
                                    lb.teapot.io/allocated-from = outcome.allocated_from
    after the writes succeed:       record outcome.events on the Service
    for other in outcome.requeue:   enqueue(other)
    ...
    for pool in pool_statuses(view, state, now):     # debounced; after pool changes
        if pool.changed: write the pool's status = pool.status; record pool.events

`reconcile_service` also notices pool changes in the view (it calls :func:`sync_pools`),
so adapters need not order pool and Service events. Pools the adapter could not parse
are passed as `unparsed_pools` (`{pool key: UnparsedPool}`) to `rebuild`,
`reconcile_service` and `pool_statuses`, so they get an invalid condition and an Event
while the other pools keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from teapot_lb.cluster import ClusterView
from teapot_lb.controller.convert import held_ips, pool_of, request_of
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM, ControllerOptions
from teapot_lb.controller.pools import (
    CONDITION_VALID,
    REASON_INVALID,
    PoolConfig,
    PoolOutcome,
    UnparsedPool,
    pool_config,
    problems_text,
)
from teapot_lb.controller.pools import pool_statuses as _pool_statuses
from teapot_lb.controller.services import (
    REASON_ALLOCATED,
    REASON_CHANGED,
    REASON_FAILED,
    REASON_RELEASED,
    ServiceOutcome,
    decided_by,
    forget_service,
    reconcile_service,
)
from teapot_lb.controller.state import AllocationState, rebuild, sync_pools
from teapot_lb.model.event import Event, EventType


def pool_statuses(
    view: ClusterView,
    state: AllocationState,
    now: datetime,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> list[PoolOutcome]:
    """Every pool's desired status (usage per family, `Valid` condition) and Events."""
    sync_pools(view, state, unparsed_pools)
    return _pool_statuses(view, state.config, state.allocator.usage(), now, unparsed_pools)


__all__ = [
    "ANNOTATION_ALLOCATED_FROM",
    "CONDITION_VALID",
    "REASON_ALLOCATED",
    "REASON_CHANGED",
    "REASON_FAILED",
    "REASON_INVALID",
    "REASON_RELEASED",
    "AllocationState",
    "ControllerOptions",
    "Event",
    "EventType",
    "PoolConfig",
    "PoolOutcome",
    "ServiceOutcome",
    "UnparsedPool",
    "decided_by",
    "forget_service",
    "held_ips",
    "pool_config",
    "pool_of",
    "pool_statuses",
    "problems_text",
    "rebuild",
    "reconcile_service",
    "request_of",
    "sync_pools",
]
