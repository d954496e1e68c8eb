"""The controller against a Kubernetes API server: informers in, status writes out.

Three parts, one module each:

- :class:`~teapot_lb.controller.kube_cache.ControllerCache` — informers fill the cache
  (Services, Namespaces, the lb.teapot.io kinds) and only enqueue keys;
- this module — the one reconcile loop of :mod:`teapot_lb.kube.reconciler`, with one key
  type per kind of work (:mod:`teapot_lb.controller.keys`): a Service, the pool
  configuration, the pool statuses. Each reconcile calls the pure core
  (:mod:`teapot_lb.controller`) and hands its decision to the writer;
- :class:`~teapot_lb.controller.kube_writer.KubeWriter` — the Service's status and
  annotation, pool statuses and Events.

Only the holder of the Lease writes. On taking the lease the allocator is rebuilt from the
IPs Services hold and every Service is reconciled; on losing it the workers are cancelled
at once (nothing more is written) and the replica campaigns again. Every replica keeps its
cache warm and serves the webhook and probes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from teapot_lb import ipam, log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.controller.keys import (
    POOL_STATUS,
    POOLS,
    ControllerKey,
    PoolsKey,
    PoolStatusKey,
    ServiceKey,
    metric_kind,
)
from teapot_lb.controller.kube_cache import ControllerCache
from teapot_lb.controller.kube_writer import COMPONENT, KubeWriter
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.controller.pools import UnparsedPool
from teapot_lb.controller.services import ServiceOutcome, reconcile_service
from teapot_lb.controller.state import AllocationState, rebuild, sync_pools
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import Informer
from teapot_lb.kube.leader import LeaderElector, LeaseConfig, lead_when_elected
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.model import ApiObject
from teapot_lb.model.kinds import KINDS

__all__ = ["COMPONENT", "KubeController", "RunnerConfig", "running"]


@dataclass(frozen=True)
class RunnerConfig:
    """`config_namespace`: where the lb.teapot.io objects live (None: every namespace).
    `lease`: leader election (None: this replica always writes; for a single replica)."""

    options: ControllerOptions = field(default_factory=ControllerOptions)
    config_namespace: str | None = None
    lease: LeaseConfig | None = None
    workers: int = 16
    pool_status_delay_s: float = 1.0
    event_senders: int = 4


class KubeController:
    def __init__(
        self,
        client: KubeClient,
        config: RunnerConfig | None = None,
        *,
        metrics: ControllerMetrics | None = None,
        watch_timeout_s: float = 300.0,
        max_backoff_s: float = 1.0,
    ) -> None:
        self.client = client
        self.config = config or RunnerConfig()
        self.metrics = metrics or ControllerMetrics()
        self.cache = ControllerCache(
            client,
            self.metrics,
            config_namespace=self.config.config_namespace,
            on_change=self._enqueue_for,
            on_synced=self._resume,
            watch_timeout_s=watch_timeout_s,
            max_backoff_s=max_backoff_s,
        )
        self.writer = KubeWriter(
            client,
            self.cache,
            self.metrics,
            self.config.options,
            is_leader=lambda: self.is_leader,
            instance=self.config.lease.identity if self.config.lease else "",
        )
        self.elector = (
            LeaderElector(client, self.config.lease, on_change=self._on_leadership)
            if self.config.lease
            else None
        )
        self.state: AllocationState | None = None
        self.loop: ReconcileLoop[ControllerKey] | None = None  # while leading
        # Keys that came up while the cache was not current; reconciled once it is.
        self._parked: set[ControllerKey] = set()
        self._log = log.get("controller")

    # ------------------------------------------------------------------ probes

    @property
    def store(self) -> Store:
        return self.cache.store

    @property
    def informers(self) -> dict[Kind, Informer]:
        return self.cache.informers

    @property
    def unparsed_pools(self) -> dict[str, UnparsedPool]:
        return self.cache.unparsed_pools

    @property
    def recorder(self) -> EventRecorder:
        return self.writer.recorder

    @property
    def queue(self) -> WorkQueue[ControllerKey] | None:
        """The work queue of the current term (None while not leading)."""
        return self.loop.queue if self.loop is not None else None

    @property
    def synced(self) -> bool:
        return self.cache.synced

    @property
    def is_leader(self) -> bool:
        if self.elector is None:
            return True
        return self.elector.is_leader

    def readiness(self) -> list[str]:
        return self.cache.readiness()

    def view(self) -> ClusterView:
        return self.store.view()

    def config_objects(self) -> list[ApiObject]:
        """The lb.teapot.io objects in the cache (what the webhook validates against)."""
        view = self.store.view()
        out: list[ApiObject] = []
        for info in KINDS:
            if info.config and info.controller:
                out.extend(o for o in view.of_kind(info.kind).values() if isinstance(o, ApiObject))
        return out

    # ------------------------------------------------------------- keys

    def _enqueue_for(self, kind: Kind, key: str) -> None:
        """An object changed: the keys to reconcile (never any work here)."""
        queue = self.queue
        if queue is None:
            return
        if kind is Kind.SERVICE:
            queue.add(ServiceKey(key))
        elif kind is Kind.NAMESPACE:
            prefix = f"{key}/"
            for service_key in self.store.keys(Kind.SERVICE):
                if service_key.startswith(prefix):
                    queue.add(ServiceKey(service_key))
        elif kind is Kind.ADDRESS_POOL:
            queue.add(POOLS)
            queue.add_after(POOL_STATUS, self.config.pool_status_delay_s)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until cancelled: informers always, the writing part while leader."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.cache.run())
            group.create_task(self._campaign())

    async def _campaign(self) -> None:
        # A replica whose cache is not filled (API unreachable, CRDs missing) does not
        # take the lease from one that could work.
        await self.cache.wait_synced()
        await lead_when_elected(self.elector, self._lead)

    def _on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)

    async def _lead(self) -> None:
        """While leader: rebuild from what Services hold, reconcile everything, keep going."""
        self.metrics.leader.set(1)
        await self.cache.wait_synced()
        await self.cache.catch_up_services()
        loop: ReconcileLoop[ControllerKey] = ReconcileLoop(
            "controller",
            self._reconcile,
            workers=self.config.workers,
            queue=WorkQueue(base_delay_s=0.1, max_delay_s=30.0),
            on_result=self._on_result,
        )
        self.writer.forget_events()
        self.state = rebuild(self.store.view(), self.config.options, self.unparsed_pools)
        self.loop = loop
        self._log.info(
            "leading: allocator rebuilt",
            services=len(self.store.view().services),
            assigned=len(self.state.allocator.assignments()),
            changes=len(self.state.changes),
        )
        for key in self.store.keys(Kind.SERVICE):
            loop.queue.add(ServiceKey(key))
        loop.queue.add(POOLS)
        loop.queue.add(POOL_STATUS)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(loop.work())
                for _ in range(self.config.event_senders):
                    group.create_task(self.writer.send_events())
        finally:
            loop.queue.shut_down()
            self.loop = None
            self.metrics.leader.set(0)

    def _on_result(self, key: ControllerKey, seconds: float, error: BaseException | None) -> None:
        kind = metric_kind(key)
        if error is not None:
            self.metrics.reconcile_errors.labels(kind).inc()
        self.metrics.reconcile_duration.labels(kind).observe(seconds)
        queue = self.queue
        self.metrics.queue_depth.set(len(queue) if queue is not None else 0)

    # ------------------------------------------------------------------ reconcile

    def _resume(self) -> None:
        """Every kind is current again: reconcile what waited."""
        queue, parked = self.queue, self._parked
        self._parked = set()
        if queue is not None:
            for key in parked:
                queue.add(key)

    async def _reconcile(self, key: ControllerKey) -> None:
        state, loop = self.state, self.loop
        assert state is not None and loop is not None
        if not self.cache.synced:
            # A kind is being re-listed (after an outage): acting now could assign or
            # release from a half-recovered view. `_resume` brings the key back.
            self._parked.add(key)
            return
        queue = loop.queue
        match key:
            case PoolsKey():
                for other in sync_pools(self.store.view(), state, self.unparsed_pools):
                    queue.add(ServiceKey(other))
                queue.add_after(POOL_STATUS, self.config.pool_status_delay_s)
            case PoolStatusKey():
                await self.writer.write_pool_statuses(state)
            case ServiceKey(key=service_key):
                outcome = reconcile_service(
                    self.cache.live_view(), state, service_key, self.unparsed_pools
                )
                for other in outcome.requeue:
                    queue.add(ServiceKey(other))
                self._count(outcome)
                await self.writer.apply(outcome)
                if outcome.status is not None or outcome.released:
                    queue.add_after(POOL_STATUS, self.config.pool_status_delay_s)

    def _count(self, outcome: ServiceOutcome) -> None:
        if self.state is not None:
            self.metrics.services_without_ip.set(len(self.state.refused))
        if isinstance(outcome.result, ipam.Refused):
            self.metrics.failures.labels(outcome.result.reason.value).inc()
        elif isinstance(outcome.result, ipam.Assigned) and outcome.status is not None:
            self.metrics.assignments.inc()
        if outcome.released and not isinstance(outcome.result, ipam.Assigned):
            self.metrics.releases.inc()


class _Runs(Protocol):
    async def run(self) -> None: ...


R = TypeVar("R", bound=_Runs)


@contextlib.asynccontextmanager
async def running(component: R) -> AsyncIterator[R]:
    """Run a component (controller, manager, tenant agent) in a task for the duration of
    a `with` block (tests, bench)."""
    task = asyncio.create_task(component.run())
    try:
        yield component
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
