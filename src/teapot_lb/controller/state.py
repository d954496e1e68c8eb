"""What the controller core keeps between reconciles, all rebuildable from the cluster.

:class:`AllocationState` wraps the IPAM :class:`~teapot_lb.ipam.Allocator` with the pool
configuration it was built from, the Changes a pool change or a rebuild caused (to be
reported on the Services concerned) and the Services currently refused or short of a
family (to try again when addresses are freed or pools change). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView
from teapot_lb.controller.convert import held_ips, request_of
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.controller.pools import PoolConfig, UnparsedPool, pool_config
from teapot_lb.model import AddressPool
from teapot_lb.model.common import creation_order
from teapot_lb.vrrp.vrid_book import VridBook, annotated_vrids, needs


@dataclass
class AllocationState:
    options: ControllerOptions = field(default_factory=ControllerOptions)
    allocator: ipam.Allocator = field(default_factory=ipam.Allocator)
    config: PoolConfig = field(default_factory=PoolConfig)
    changes: dict[str, ipam.Change] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    # PreferDualStack Services holding fewer families than they want (one was full): tried
    # again, like the refused ones, when addresses are freed.
    short: set[str] = field(default_factory=set)
    vrids: VridBook = field(default_factory=VridBook)  # VIP mode's virtual router IDs
    vrid_refusals: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reported
    # The pool objects `config` was computed from (compared by identity: the cache keeps
    # an object until it changes, so an unchanged pool set costs no re-validation).
    _seen_pools: tuple[tuple[str, AddressPool], ...] = ()
    _seen_unparsed: tuple[tuple[str, UnparsedPool], ...] = ()


def _same(a: tuple[tuple[str, object], ...], b: tuple[tuple[str, object], ...]) -> bool:
    return len(a) == len(b) and all(
        x[0] == y[0] and x[1] is y[1] for x, y in zip(a, b, strict=True)
    )


def rebuild(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> AllocationState:
    """A fresh state from the IPs Services already hold (IP stability across restarts).

    Every Service we handle that has IPs in its status keeps them when they are still
    valid; the others are re-assigned, and each such change is kept in `changes` to be
    reported when the Service is reconciled. Reconcile every Service afterwards.
    """
    options = options or ControllerOptions()
    config = pool_config(view, unparsed_pools)
    state = AllocationState(options=options, allocator=ipam.Allocator(config.pools), config=config)
    state._seen_pools = tuple(sorted(view.pools.items()))
    state._seen_unparsed = tuple(sorted((unparsed_pools or {}).items()))
    holdings = []
    # Older Services first: of two holding one IP, the one created first keeps it.
    for key in sorted(view.services, key=lambda k: creation_order(view.services[k])):
        svc = view.services[key]
        ips = held_ips(svc)
        if not ips or not options.handles(svc):
            continue
        try:
            request = request_of(svc, view.namespace_labels(svc.namespace), key)
        except ValueError:
            continue  # its reconcile refuses it and clears its status
        holdings.append(ipam.Holding(request, ips))
    state.changes = {change.key: change for change in state.allocator.rebuild(holdings)}
    # VRIDs as Services show them, oldest first: of two claiming one, the older keeps it.
    for holding in holdings:
        key = holding.request.key
        svc = view.services[key]
        state.vrids.assign(key, needs(view, key, svc), annotated_vrids(svc))
    return state


def sync_pools(
    view: ClusterView,
    state: AllocationState,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> list[str]:
    """Bring the allocator to the view's pool configuration.

    Returns the keys of the Services to reconcile again: those whose IPs changed (each
    Change is kept in `state.changes` for its Event) and those refused so far, which may
    now fit. Cheap when the pools did not change.
    """
    seen = tuple(sorted(view.pools.items()))
    seen_unparsed = tuple(sorted((unparsed_pools or {}).items()))
    if _same(seen, state._seen_pools) and _same(seen_unparsed, state._seen_unparsed):
        return []
    state._seen_pools, state._seen_unparsed = seen, seen_unparsed
    config = pool_config(view, unparsed_pools)
    old, state.config = state.config, config
    if config.pools == old.pools:
        return []
    changes = state.allocator.reconfigure(config.pools)
    for change in changes:
        state.changes[change.key] = change
    return sorted({change.key for change in changes} | state.refused)
