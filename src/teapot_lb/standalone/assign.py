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
from datetime import datetime

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView, Kind, object_key
from teapot_lb.cluster.changes import ChangeLog
from teapot_lb.controller import (
    AllocationState,
    ControllerOptions,
    ServiceOutcome,
    UnparsedPool,
    decided_by,
    forget_service,
    rebuild,
    reconcile_service,
)
from teapot_lb.controller.convert import held_ips
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
    done, outcomes = _from_scratch(view, options or ControllerOptions(), unparsed_pools)
    return _assignments(done.state, outcomes), frozenset(done.state.config.problems)


@dataclass
class _Done:
    """An assignment's state, and what the next one needs to build on it."""

    state: AllocationState
    settled: bool  # the first pass left nothing to try again
    newest: tuple[datetime, str, str] | None  # the newest Service's creation order
    # It showed IPs in its status: it got them before every other Service (rebuild).
    newest_held: bool
    options: ControllerOptions
    unparsed_pools: Mapping[str, UnparsedPool] | None
    changes: tuple[ChangeLog, int] | None  # where the view's Store stood


def _from_scratch(
    view: ClusterView,
    options: ControllerOptions,
    unparsed_pools: Mapping[str, UnparsedPool] | None,
) -> tuple[_Done, dict[str, ServiceOutcome]]:
    state = rebuild(view, options, unparsed_pools)
    outcomes: dict[str, ServiceOutcome] = {}

    def first_created(keys: Iterable[str]) -> list[str]:
        return sorted(keys, key=lambda k: creation_order(view.services[k]))

    pending = first_created(view.services)
    newest = creation_order(view.services[pending[-1]]) if pending else None
    newest_held = bool(pending) and bool(held_ips(view.services[pending[-1]]))
    settled = True
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
        settled = False
    done = _Done(state, settled, newest, newest_held, options, unparsed_pools, view.changes)
    return done, outcomes


def _assignments(
    state: AllocationState, outcomes: Mapping[str, ServiceOutcome]
) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for key, outcome in sorted(outcomes.items()):
        result = outcome.result
        if isinstance(result, ipam.Assigned):
            refused = state.vrid_refusals.get(key, ())
            out[key] = Assignment(key, result.ips, result.pool, None, outcome.vrids, refused)
        elif isinstance(result, ipam.Refused):
            out[key] = Assignment(key, (), None, result.message)
    return out


class Assigner:
    """:func:`assign_all` for one manifest directory, kept between its reloads.

    When the only change since the last call is Services added — each newer than every
    Service before, showing no IPs in its status, and the last call left nothing to try
    again — only those are reconciled, oldest first, on the state the last call left: the
    very order :func:`assign_all` would reconcile them in, after the same work, so the
    result is the same (the tests compare them). That is the usual edit (a new Service).
    So is the newest Service alone edited (keeping its creation time, showing no IPs) or
    removed: it is reconciled last by :func:`assign_all` too, so no other Service's
    assignment depends on it, and reconciling it again (or releasing what it held) on the
    kept state gives what assigning everything would. Any Service edited in nothing that
    decides IPs (:func:`~teapot_lb.controller.decided_by`: a label no pool selects by,
    another annotation, a port's target) changes no assignment, and one removed that
    held nothing (refused, or not ours) frees nothing for the others: neither is assigned
    again. EndpointSlices changing beside them change nothing here (the assignment reads
    none); anything else (another Service's request, status or age changed, or one
    holding IPs removed — the newer ones may move —, a pool, options, a Namespace, or a
    pool left out as overlapping, whose range a new Service's IP may win back) assigns
    everything again from scratch.
    """

    def __init__(self) -> None:
        self._done: _Done | None = None
        self._assignments: dict[str, Assignment] = {}
        self._keys: set[str] = set()  # the Services reconciled so far
        # The Services of the last call's view (what an edit is compared with; the view's
        # Store holds that mapping anyway until its next change).
        self._services: Mapping[str, Service] = {}
        self.reconciled = 0  # Services reconciled by the last call (for tests and logs)
        # The Services the last call reconciled alone, on the kept state (None: it
        # assigned everything): no other Service's assignment changed.
        self.added: tuple[str, ...] | None = None

    def assign(
        self,
        view: ClusterView,
        options: ControllerOptions | None = None,
        unparsed_pools: Mapping[str, UnparsedPool] | None = None,
    ) -> tuple[dict[str, Assignment], frozenset[str]]:
        options = options or ControllerOptions()
        added = self._added(view, options, unparsed_pools)
        done = self._done
        if added is None or done is None:
            done, outcomes = _from_scratch(view, options, unparsed_pools)
            self._done = done
            self._assignments = _assignments(done.state, outcomes)
            self._keys = set(outcomes)
            self.added = None
        else:
            outcomes = {}
            for key in added:
                if key in self._keys:
                    # The newest, edited or removed: assigned as if it had never been (as
                    # assign_all does, last), not from what it holds.
                    forget_service(done.state, key)
                outcome = outcomes[key] = reconcile_service(view, done.state, key, unparsed_pools)
                if outcome.requeue and key not in self._keys:
                    done.settled = False  # (the next change starts from scratch)
                # (The newest Service edited or removed: what it released was never free
                # when an older Service was refused, so nothing is to be tried again.)
            if added and added[-1] in view.services:
                done.newest = creation_order(view.services[added[-1]])
                done.newest_held = False  # (Services showing IPs are assigned from scratch)
            done.changes = view.changes
            self._keys.update(k for k in outcomes if k in view.services)
            self._keys.difference_update(k for k in added if k not in view.services)
            for key in outcomes:  # (gone, or no longer ours: no assignment now)
                self._assignments.pop(key, None)
            self._assignments.update(_assignments(done.state, outcomes))
            self.added = tuple(added)
        self.reconciled = len(outcomes)
        self._services = view.services
        return dict(self._assignments), frozenset(done.state.config.problems)

    def _added(
        self,
        view: ClusterView,
        options: ControllerOptions,
        unparsed_pools: Mapping[str, UnparsedPool] | None,
    ) -> list[str] | None:
        """The Services added since the last call, oldest first, when they are the only
        change and may be reconciled after the others; else None."""
        done = self._done
        if done is None or not done.settled or done.changes is None or view.changes is None:
            return None
        if options != done.options or unparsed_pools != done.unparsed_pools:
            return None
        if done.state.config.problems:
            # A pool left out (it overlaps one in use) may win its range back through a
            # new Service's IP: which pools count is decided from scratch.
            return None
        log, mark = view.changes
        if log is not done.changes[0]:
            return None
        changes = log.between(done.changes[1], mark)
        if changes is None:
            return None
        keys: set[str] = set()
        known: set[str] = set()
        for change in changes:
            if change.kind is Kind.ENDPOINT_SLICE:
                continue  # the assignment reads no EndpointSlice
            if change.kind is not Kind.SERVICE:
                return None  # another kind, or every key
            (known if change.key in self._keys else keys).add(change.key)
        if known:
            known = {k for k in known if not self._decides_nothing(view, k)}
            gone = sorted(k for k in known if k not in view.services and self._held_nothing(k))
            known.difference_update(gone)
            if known:
                again = self._newest_changed(view, known, keys)
            else:
                again = self._newer(view, keys) if keys else []
            # (What the removed ones held nothing of: they go first, alone.)
            return None if again is None else [*gone, *again]
        return self._newer(view, keys)

    def _newer(self, view: ClusterView, keys: set[str]) -> list[str] | None:
        """`keys`, Services not seen before, oldest first, when each is newer than every
        Service before and shows no IPs in its status; else None."""
        done = self._done
        assert done is not None
        if any(k not in view.services or held_ips(view.services[k]) for k in keys):
            return None
        added = sorted(keys, key=lambda k: creation_order(view.services[k]))
        if (
            added
            and done.newest is not None
            and creation_order(view.services[added[0]]) <= done.newest
        ):
            return None
        return added

    def _decides_nothing(self, view: ClusterView, key: str) -> bool:
        """The Service `key` was edited in nothing that decides IPs or VRIDs (a label no
        pool selects by, another annotation, a port's target): no Service's assignment
        changes, and `key` need not be reconciled again."""
        done, before, now = self._done, self._services.get(key), view.services.get(key)
        if done is None or before is None or now is None:
            return False
        return decided_by(view, done.state, key, before) == decided_by(view, done.state, key, now)

    def _held_nothing(self, key: str) -> bool:
        """The Service `key` holds no IP and no VRID (refused, or not ours): as the last
        call left nothing to try again, it never held any, so removing it changes no other
        Service's assignment."""
        state = self._done.state if self._done is not None else None
        return (
            state is not None
            and state.allocator.assignment(key) is None
            and key not in state.vrids.uses
        )

    def _newest_changed(
        self, view: ClusterView, known: set[str], added: set[str]
    ) -> list[str] | None:
        """The newest Service, alone edited (same creation time, no IPs in its status, then
        or now) or removed: it, to reconcile again; else None."""
        done = self._done
        if added or len(known) != 1 or done is None or done.newest is None or done.newest_held:
            return None
        (key,) = known
        _, namespace, name = done.newest
        if key != object_key(namespace, name):
            return None
        svc = view.services.get(key)
        if svc is not None and (held_ips(svc) or creation_order(svc) != done.newest):
            return None
        return [key]


Planned = dict[Kind, dict[str, ApiObject]]


def planned_objects(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
    assigner: Assigner | None = None,
) -> tuple[dict[str, Assignment], Planned]:
    """Every handled Service's assignment, and what the speaker plans from in place of the
    manifests' objects: the pools the controller core uses (:func:`planned_of`).
    `assigner`: one kept between reloads."""
    if assigner is not None:
        assignments, unused = assigner.assign(view, options, unparsed_pools)
    else:
        assignments, unused = assign_all(view, options, unparsed_pools)
    return assignments, planned_of(view, unused)


def planned_of(view: ClusterView, unused: frozenset[str]) -> Planned:
    """The pools the controller core uses (`unused`: those it left out as invalid). The
    Services stay the manifests' own: their assignments go beside them
    (:meth:`~teapot_lb.cluster.Store.replace_assigned`, read through
    :meth:`~teapot_lb.cluster.ClusterView.ingress_ips`), not into a copy of each."""
    pools: dict[str, ApiObject] = {k: p for k, p in view.pools.items() if k not in unused}
    return {Kind.ADDRESS_POOL: pools}


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
    view: ClusterView, assignments: Mapping[str, Assignment]
) -> dict[str, Service]:
    """Every Service of the view, those we handle carrying their assigned IPs in status, as
    the API server would show them (for one-shot readers: `explain`, `status`, the lab; a
    running speaker reads the assignments beside the Services instead)."""
    out: dict[str, Service] = {}
    for key, svc in view.services.items():
        a = assignments.get(key)
        out[key] = svc if a is None else with_status(svc, a.ips, a.vrids)
    return out
