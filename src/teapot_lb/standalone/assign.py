"""IP assignment in standalone mode: the controller's core, run so every node agrees (pure).

Several `teapot-lb run` processes (one per node) read one manifest directory and do not
talk to each other. They agree on every Service's IPs because the assignment is a pure
function of the manifests: each reload starts from a fresh allocator rebuilt from the
IPs the manifests already show (`status.loadBalancer.ingress`) and reconciles every
Service, oldest first, with the very same :func:`~teapot_lb.controller.reconcile_service`
the Kubernetes controller uses. Same manifests in, same IPs out, on every node, after
every restart. The price: an IP assigned automatically may move when an older Service is
removed; pin IPs that must never move (the `lb.teapot.io/ips` annotation, or a
status in the manifest).

"Oldest" is `metadata.creationTimestamp`; the manifest source stamps an object that has
none with the first time this node saw it (:mod:`.first_seen`, kept in the state
directory, so a restart decides as before). When two Services request one IP, the older
keeps it; equal times fall back to `namespace/name` order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView, Kind
from teapot_lb.controller import (
    ControllerOptions,
    ServiceOutcome,
    UnparsedPool,
    rebuild,
    reconcile_service,
)
from teapot_lb.model import ApiObject, IPAddress, Service
from teapot_lb.model.common import creation_order
from teapot_lb.model.service import (
    ANNOTATION_VRIDS,
    LoadBalancerIngress,
    LoadBalancerStatus,
    ServiceStatus,
)


@dataclass(frozen=True)
class Assignment:
    """What one Service got: IPs and pool, or why not (`refused`)."""

    key: str
    ips: tuple[IPAddress, ...]
    pool: str | None = None
    refused: str | None = None
    vrids: str | None = None  # the `lb.teapot.io/vrids` annotation the controller writes
    vrid_refused: tuple[str, ...] = ()


def assign(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> dict[str, Assignment]:
    """Every handled Service's assignment, deterministically (see the module docstring)."""
    return assign_all(view, options, unparsed_pools)[0]


def assign_all(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> tuple[dict[str, Assignment], frozenset[str]]:
    """:func:`assign`, and the keys of the pools the controller core left out as invalid
    (an overlapping newcomer): the speaker must not see them either, or it would take an
    IP of the pool in use for one of theirs."""
    options = options or ControllerOptions()
    state = rebuild(view, options, unparsed_pools)
    outcomes: dict[str, ServiceOutcome] = {}

    def first_created(keys: Iterable[str]) -> list[str]:
        return sorted(keys, key=lambda k: creation_order(view.services[k]))

    pending = first_created(view.services)
    # Requeues (a freed address may satisfy a refused Service) converge quickly; bounded.
    for _ in range(3):
        requeue: set[str] = set()
        for key in pending:
            outcome = reconcile_service(view, state, key, unparsed_pools)
            outcomes[key] = outcome
            requeue.update(outcome.requeue)
        pending = first_created(k for k in requeue if k in view.services)
        if not pending:
            break
    out: dict[str, Assignment] = {}
    for key, outcome in sorted(outcomes.items()):
        result = outcome.result
        if isinstance(result, ipam.Assigned):
            refused = state.vrid_refusals.get(key, ())
            out[key] = Assignment(key, result.ips, result.pool, None, outcome.vrids, refused)
        elif isinstance(result, ipam.Refused):
            out[key] = Assignment(key, (), None, result.message)
    return out, frozenset(state.config.problems)


Planned = dict[Kind, dict[str, ApiObject]]


def planned_objects(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
    memo: Assigned | None = None,
) -> tuple[dict[str, Assignment], Planned]:
    """What a node's speaker plans from: every Service with its assigned IPs in status,
    and the pools the controller core uses (the objects of those two kinds only).
    `memo`: see :func:`assigned_services`."""
    assignments, unused = assign_all(view, options, unparsed_pools)
    pools: dict[str, ApiObject] = {k: p for k, p in view.pools.items() if k not in unused}
    services: dict[str, ApiObject] = dict(assigned_services(view, assignments, memo))
    return assignments, {Kind.SERVICE: services, Kind.ADDRESS_POOL: pools}


# Service key → the Service last given its status, that status, and the copy made.
Assigned = dict[str, tuple[Service, "Assignment", Service]]


def with_status(service: Service, ips: tuple[IPAddress, ...], vrids: str | None = None) -> Service:
    """The Service as the API server would show it once the controller wrote its status
    (and its VRID annotation)."""
    status = ServiceStatus(
        load_balancer=LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=str(ip)) for ip in ips])
    )
    update: dict[str, object] = {"status": status}
    notes = service.metadata.annotations
    if notes.get(ANNOTATION_VRIDS) != vrids:
        notes = {k: v for k, v in notes.items() if k != ANNOTATION_VRIDS}
        if vrids is not None:
            notes[ANNOTATION_VRIDS] = vrids
        update["metadata"] = service.metadata.model_copy(update={"annotations": notes})
    return service.model_copy(update=update)


def assigned_services(
    view: ClusterView, assignments: Mapping[str, Assignment], memo: Assigned | None = None
) -> dict[str, Service]:
    """Every Service of the view, those we handle carrying their assigned IPs in status.

    `memo` (kept by the caller between calls; updated): a Service that comes again as the
    same object with an equal assignment gets the copy made last time, so that an
    unchanged Service stays the same object from one reload to the next (the speaker's
    Store and plan cache then see that it did not change)."""
    out: dict[str, Service] = {}
    for key, svc in view.services.items():
        a = assignments.get(key)
        if a is None:
            out[key] = svc
            continue
        hit = memo.get(key) if memo is not None else None
        if hit is not None and hit[0] is svc and hit[1] == a:
            out[key] = hit[2]
            continue
        out[key] = with_status(svc, a.ips, a.vrids)
        if memo is not None:
            memo[key] = (svc, a, out[key])
    if memo is not None and len(memo) > len(out):
        for gone in [key for key in memo if key not in out]:
            del memo[gone]
    return out
