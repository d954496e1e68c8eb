"""Reconcile one Service: which IPs it should show, what to annotate, what to report (pure).

Level-triggered: the outcome depends only on the view and the allocation state, so
reconciling a key again, at any time, is harmless. Services of other classes are never
touched, except to take back IPs this controller gave them before their class changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView
from teapot_lb.controller.convert import held_ips, request_of
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM
from teapot_lb.controller.pools import UnparsedPool
from teapot_lb.controller.state import AllocationState, sync_pools
from teapot_lb.model import IPAddress, Service
from teapot_lb.model.common import creation_order
from teapot_lb.model.event import Event, EventType
from teapot_lb.model.service import ANNOTATION_VRIDS
from teapot_lb.vrrp.vrid_book import annotated_vrids, format_vrids, needs

REASON_ALLOCATED = "IPAllocated"
REASON_CHANGED = "IPChanged"
REASON_FAILED = "AllocationFailed"
REASON_RELEASED = "IPReleased"
REASON_VRID_FAILED = "VRIDAllocationFailed"


@dataclass(frozen=True)
class ServiceOutcome:
    """What reconciling one Service decided.

    - `status`: the IPs `status.loadBalancer.ingress` must list (primary family first),
      or None when the stored status is already right (or the Service is not ours).
    - `annotate`: whether the `lb.teapot.io/allocated-from` annotation must be set to
      `allocated_from` (None: removed), and `lb.teapot.io/vrids` to `vrids` (VIP mode's
      virtual router IDs, :mod:`teapot_lb.vrrp.vrid_book`; None: removed).
    - `events`: to record on the Service once the writes succeeded.
    - `result`: the IPAM's answer (None when the Service is gone or not ours).
    - `released`: IPs given back by this reconcile.
    - `requeue`: other Services to reconcile now (a pool change moved them, or freed
      addresses may now satisfy a refused one).
    """

    key: str
    exists: bool
    status: tuple[IPAddress, ...] | None = None
    annotate: bool = False
    allocated_from: str | None = None
    vrids: str | None = None
    events: tuple[Event, ...] = ()
    result: ipam.Result | None = None
    released: tuple[IPAddress, ...] = ()
    requeue: tuple[str, ...] = ()

    @property
    def writes(self) -> bool:
        return self.status is not None or self.annotate


def _ips(ips: tuple[IPAddress, ...]) -> str:
    return ", ".join(str(ip) for ip in ips) or "no IP"


def forget_service(state: AllocationState, key: str) -> tuple[IPAddress, ...]:
    """Drop all the state holds for the Service `key` (its IPs, VRIDs, refusal); the IPs
    it released."""
    state.vrids.release(key)
    state.vrid_refusals.pop(key, None)
    released = state.allocator.release(key)
    state.changes.pop(key, None)
    state.refused.discard(key)
    state.short.discard(key)
    return released


def decided_by(
    view: ClusterView, state: AllocationState, key: str, svc: Service
) -> tuple[object, ...]:
    """All that :func:`~teapot_lb.controller.state.rebuild` and :func:`reconcile_service`
    read of the Service `svc` (`key`) to decide its IPs and VRIDs: its age, whether it is
    ours, the IPs its status shows, its IPAM request (or why it has none) and the VRIDs it
    is annotated with. Two versions of a Service with equal values
    get the same IPs and VRIDs on the same state and leave it the same for every other
    Service: an edit of anything else (a port's target, another annotation) decides
    nothing. Its labels count only when a pool selects Services by label. Whoever makes
    either function read more of a Service adds it here (the standalone Assigner's
    property test compares against assigning everything)."""
    asked: object
    try:
        request = request_of(svc, view.namespace_labels(svc.namespace), key)
    except ValueError as err:
        asked = str(err)
    else:
        by_label = any(pool.service_selectors for pool in state.config.pools)
        asked = request if by_label else replace(request, labels={})
    return (
        creation_order(svc),
        state.options.handles(svc),
        held_ips(svc),
        asked,  # (its traffic policy too, which decides whether it has a VRID of its own)
        svc.metadata.annotations.get(ANNOTATION_VRIDS),
    )


def reconcile_service(
    view: ClusterView,
    state: AllocationState,
    key: str,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> ServiceOutcome:
    """Decide what the Service `key` (`namespace/name`) should hold and show."""
    requeue = [k for k in sync_pools(view, state, unparsed_pools) if k != key]
    svc = view.services.get(key)
    if svc is None:
        released = forget_service(state, key)
        if released:
            requeue.extend(sorted(state.refused | state.short))
        return ServiceOutcome(key, exists=False, released=released, requeue=tuple(requeue))
    if not state.options.handles(svc):
        return _not_ours(svc, state, key, requeue)

    current = held_ips(svc)
    current_pool = svc.metadata.annotations.get(ANNOTATION_ALLOCATED_FROM)
    try:
        request = request_of(svc, view.namespace_labels(svc.namespace), key)
    except ValueError as err:
        released = state.allocator.release(key)
        result: ipam.Result = ipam.Refused(key, ipam.RefusalReason.INVALID_REQUEST, f"{key}: {err}")
    else:
        before = state.allocator.assignment(key)
        result = state.allocator.assign(request)
        released = tuple(
            ip
            for ip in (before.ips if before else ())
            if not isinstance(result, ipam.Assigned) or ip not in result.ips
        )
    change = state.changes.get(key)

    if isinstance(result, ipam.Assigned):
        state.refused.discard(key)
        if len(result.ips) < len(request.families):
            state.short.add(key)  # PreferDualStack with one family full
        else:
            state.short.discard(key)
        desired, pool = result.ips, result.pool
        events: tuple[Event, ...] = ()
        if desired != current:
            if current:
                why = f" ({change.reason}: {change.message})" if change is not None else ""
                events = (
                    Event(
                        EventType.NORMAL,
                        REASON_CHANGED,
                        f"IPs changed from {_ips(current)} to {_ips(desired)} (pool {pool}){why}",
                    ),
                )
            else:
                events = (
                    Event(
                        EventType.NORMAL,
                        REASON_ALLOCATED,
                        f"assigned {_ips(desired)} from pool {pool}",
                    ),
                )
    else:
        state.refused.add(key)
        state.short.discard(key)
        desired, pool = (), None
        lost = f"lost {_ips(current)}: " if current else ""
        events = (
            Event(EventType.WARNING, REASON_FAILED, f"{lost}{result.reason}: {result.message}"),
        )

    status = desired if desired != current else None
    vrids = state.vrids.assign(key, needs(view, key, svc, desired), annotated_vrids(svc))
    for why in vrids.refused:
        if why not in state.vrid_refusals.get(key, ()):
            events = (*events, Event(EventType.WARNING, REASON_VRID_FAILED, why))
    state.vrid_refusals[key] = vrids.refused
    vrid_text = format_vrids(vrids.vrids)
    annotate = current_pool != pool or svc.metadata.annotations.get(ANNOTATION_VRIDS) != vrid_text
    if status is None and change is not None:
        state.changes.pop(key, None)  # reported (or nothing to report) and written
    if released:
        requeue.extend(k for k in sorted(state.refused | state.short) if k != key)
    return ServiceOutcome(
        key,
        exists=True,
        status=status,
        annotate=annotate,
        allocated_from=pool,
        vrids=vrid_text,
        events=events,
        result=result,
        released=released,
        requeue=tuple(requeue),
    )


def _not_ours(svc: Service, state: AllocationState, key: str, requeue: list[str]) -> ServiceOutcome:
    """A Service we do not serve (any more): take back only what we gave it."""
    state.vrids.release(key)
    state.refused.discard(key)
    state.short.discard(key)
    state.changes.pop(key, None)
    released = state.allocator.release(key)
    if not released:
        return ServiceOutcome(key, exists=True, requeue=tuple(requeue))
    current = held_ips(svc)
    remaining = tuple(ip for ip in current if ip not in released)
    requeue.extend(sorted(state.refused | state.short))
    notes = svc.metadata.annotations
    annotated = ANNOTATION_ALLOCATED_FROM in notes or ANNOTATION_VRIDS in notes
    return ServiceOutcome(
        key,
        exists=True,
        status=remaining if remaining != current else None,
        annotate=annotated,
        allocated_from=None,
        events=(
            Event(
                EventType.NORMAL,
                REASON_RELEASED,
                f"released {_ips(released)}: the Service is no longer a LoadBalancer"
                f" of class {state.options.load_balancer_class}",
            ),
        ),
        released=released,
        requeue=tuple(requeue),
    )
