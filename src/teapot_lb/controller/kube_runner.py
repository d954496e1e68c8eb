"""The controller against a Kubernetes API server: informers in, status writes out.

- Informers (Services, Namespaces and the lb.teapot.io kinds) fill a
  :class:`~teapot_lb.cluster.Store` and only enqueue keys; workers call the pure core
  (:mod:`teapot_lb.controller`) and apply the difference: the Service's status through
  the status subresource (a merge patch carrying the resourceVersion the decision was
  computed from, then read-modify-write with retries on 409), the
  `lb.teapot.io/allocated-from` annotation, pool statuses (debounced) and Events.
- Only the holder of the Lease writes. On taking the lease the allocator is rebuilt
  from the IPs Services hold and every Service is reconciled; on losing it the workers
  are cancelled at once (nothing more is written) and the replica campaigns again.
- Every replica keeps its cache warm and serves the webhook and probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from teapot_lb import ipam, log
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.controller import pool_statuses
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM, ControllerOptions, Event
from teapot_lb.controller.pools import UnparsedPool
from teapot_lb.controller.services import ServiceOutcome, reconcile_service
from teapot_lb.controller.state import AllocationState, rebuild, sync_pools
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import ApiStatusError, Conflict, KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.leader import LeaderElector, LeadershipLost, LeaseConfig
from teapot_lb.kube.resources import ADDRESS_POOLS, SERVICES, KubeObject, key_of, split_key
from teapot_lb.kube.status import patch_status, update_status
from teapot_lb.kube.workqueue import QueueShutDown, WorkQueue
from teapot_lb.model import AddressPoolStatus, ApiObject, ObjectRef, Service, parse_object
from teapot_lb.model.kinds import KINDS

POOLS_KEY = "@pools"  # re-read the pool configuration
POOL_STATUS_KEY = "@pool-status"  # write every pool's status
COMPONENT = "teapot-lb-controller"

# What the controller watches, from the kind registry.
_WATCHED = tuple(info for info in KINDS if info.controller)


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
        max_backoff_s: float = 30.0,
    ) -> None:
        self.client = client
        self.config = config or RunnerConfig()
        self.metrics = metrics or ControllerMetrics()
        self.store = Store()
        self.unparsed_pools: dict[str, UnparsedPool] = {}
        self.state: AllocationState | None = None
        self.queue: WorkQueue | None = None
        self.recorder = EventRecorder(
            client, COMPONENT, instance=self.config.lease.identity if self.config.lease else ""
        )
        self.elector = (
            LeaderElector(client, self.config.lease, on_change=self._on_leadership)
            if self.config.lease
            else None
        )
        self._events: asyncio.Queue[tuple[KubeObject, Event]] = asyncio.Queue()
        self._log = log.get("controller")
        self.informers: dict[Kind, Informer] = {}
        # The newest JSON of each object: the informers' events plus our own writes.
        self._raw: dict[Kind, dict[str, KubeObject]] = {info.kind: {} for info in _WATCHED}
        for info in _WATCHED:
            kind = info.kind
            namespace = self.config.config_namespace if info.config else None
            informer = Informer(
                client,
                info.resource,
                namespace=namespace,
                watch_timeout_s=watch_timeout_s,
                backoff=Backoff(0.2, max_backoff_s),
            )
            informer.add_handler(self._handler(kind))
            self.informers[kind] = informer

    # ------------------------------------------------------------------ probes

    @property
    def synced(self) -> bool:
        return all(informer.has_synced for informer in self.informers.values())

    @property
    def is_leader(self) -> bool:
        if self.elector is None:
            return True
        return self.elector.is_leader

    def readiness(self) -> list[str]:
        return [
            f"{inf.resource} not synced" for inf in self.informers.values() if not inf.has_synced
        ]

    def view(self) -> ClusterView:
        return self.store.view()

    def config_objects(self) -> list[ApiObject]:
        """The lb.teapot.io objects in the cache (what the webhook validates against)."""
        view = self.store.view()
        return [
            *view.pools.values(),
            *view.bgp_peers.values(),
            *view.bgp_advertisements.values(),
            *view.l2_advertisements.values(),
            *view.vip_advertisements.values(),
        ]

    # --------------------------------------------------------------- informers

    def _handler(self, kind: Kind) -> Callable[[EventType, str, KubeObject], None]:
        raw = self._raw[kind]

        def handle(event: EventType, key: str, obj: KubeObject) -> None:
            if event is EventType.DELETED:
                raw.pop(key, None)
                self.store.delete(kind, key)
                if kind is Kind.ADDRESS_POOL:
                    self.unparsed_pools.pop(key, None)
            else:
                current = raw.get(key)
                if current is not None and not _newer(obj, current):
                    # This version (or a newer one, our own write) is cached already; keep
                    # one copy of it in memory, the informer's.
                    if _same_version(obj, current):
                        raw[key] = obj
                    return
                raw[key] = obj
                self._put(kind, key, obj)
            self._enqueue_for(kind, key)

        return handle

    def _write_through(self, kind: Kind, key: str, based_on: KubeObject, obj: KubeObject) -> None:
        """Put what a write returned into the cache, unless the informer brought something
        newer meanwhile, so the next reconcile sees our own write and does not repeat it."""
        current = self._raw[kind].get(key)
        if current is not None and _same_version(current, based_on):
            self._raw[kind][key] = obj
            self._put(kind, key, obj)

    def _put(self, kind: Kind, key: str, obj: KubeObject) -> None:
        parsed, problems = parse_object(obj)
        if parsed is not None and not problems:
            self.store.put(kind, key, parsed)
            if kind is Kind.ADDRESS_POOL:
                self.unparsed_pools.pop(key, None)
            return
        self.store.delete(kind, key)
        meta = obj.get("metadata") or {}
        self._log.warning(
            "object does not parse; ignored",
            kind=kind.value,
            key=key,
            problems=[str(p) for p in problems],
        )
        if kind is Kind.ADDRESS_POOL:
            try:
                conditions = tuple(
                    AddressPoolStatus.model_validate(obj.get("status") or {}).conditions
                )
            except ValidationError:
                conditions = ()
            self.unparsed_pools[key] = UnparsedPool(
                ObjectRef(kind.value, meta.get("namespace"), str(meta.get("name", key))),
                tuple(problems),
                conditions,
                meta.get("generation"),
            )

    def _enqueue_for(self, kind: Kind, key: str) -> None:
        queue = self.queue
        if queue is None:
            return
        if kind is Kind.SERVICE:
            queue.add(key)
        elif kind is Kind.NAMESPACE:
            prefix = f"{key}/"
            for service_key in self.store.keys(Kind.SERVICE):
                if service_key.startswith(prefix):
                    queue.add(service_key)
        elif kind is Kind.ADDRESS_POOL:
            queue.add(POOLS_KEY)
            queue.add_after(POOL_STATUS_KEY, self.config.pool_status_delay_s)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until cancelled: informers always, the writing part while leader."""
        async with asyncio.TaskGroup() as group:
            for informer in self.informers.values():
                group.create_task(informer.run())
            group.create_task(self._campaign())

    async def _campaign(self) -> None:
        # A replica whose cache is not filled (API unreachable, CRDs missing) does not
        # take the lease from one that could work.
        for informer in self.informers.values():
            await informer.wait_synced()
        if self.elector is None:
            await self._lead()
            return
        while True:
            try:
                await self.elector.run(self._lead)
                return
            except LeadershipLost as lost:
                self._log.warning("leadership lost; campaigning again", reason=str(lost))

    def _on_leadership(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)

    async def _lead(self) -> None:
        """While leader: rebuild from what Services hold, reconcile everything, keep going."""
        self.metrics.leader.set(1)
        for informer in self.informers.values():
            await informer.wait_synced()
        await self._catch_up_services()
        queue = WorkQueue(base_delay_s=0.1, max_delay_s=30.0)
        self._events = asyncio.Queue()  # Events of an earlier term are not sent late
        self.state = rebuild(self.store.view(), self.config.options, self.unparsed_pools)
        self.queue = queue
        self._log.info(
            "leading: allocator rebuilt",
            services=len(self.store.view().services),
            assigned=len(self.state.allocator.assignments()),
            changes=len(self.state.changes),
        )
        for key in self.store.keys(Kind.SERVICE):
            queue.add(key)
        queue.add(POOLS_KEY)
        queue.add(POOL_STATUS_KEY)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.config.workers):
                    group.create_task(self._work(queue))
                for _ in range(self.config.event_senders):
                    group.create_task(self._send_events())
        finally:
            queue.shut_down()
            self.queue = None
            self.metrics.leader.set(0)

    async def _catch_up_services(self) -> None:
        """Read every Service once more before rebuilding, so that IPs the previous leader
        wrote just before it stopped are known even if our watch has not delivered them
        yet (otherwise such an IP could be handed out twice)."""
        while True:
            try:
                listed = await self.client.list(SERVICES)
                break
            except KubeError as err:
                self._api_error("list services", err)
                await asyncio.sleep(1.0)
        raw = self._raw[Kind.SERVICE]
        for obj in listed.items:
            key = key_of(obj)
            current = raw.get(key)
            if current is None or _newer(obj, current):
                raw[key] = obj
                self._put(Kind.SERVICE, key, obj)

    async def _work(self, queue: WorkQueue) -> None:
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            kind = "pools" if key.startswith("@") else "service"
            started = time.perf_counter()
            try:
                await self._reconcile(queue, key)
                queue.forget(key)
            except KubeError as err:
                self.metrics.reconcile_errors.labels(kind).inc()
                delay = queue.add_rate_limited(key)
                self._log.warning(
                    "reconcile failed; retrying", key=key, error=str(err), retry_in=delay
                )
            except Exception:
                self.metrics.reconcile_errors.labels(kind).inc()
                queue.add_rate_limited(key)
                self._log.exception("reconcile crashed; retrying", key=key)
            finally:
                queue.done(key)
                self.metrics.reconcile_duration.labels(kind).observe(time.perf_counter() - started)
                self.metrics.queue_depth.set(len(queue))

    async def _reconcile(self, queue: WorkQueue, key: str) -> None:
        state = self.state
        assert state is not None
        if key == POOLS_KEY:
            for other in sync_pools(self.store.view(), state, self.unparsed_pools):
                queue.add(other)
            queue.add_after(POOL_STATUS_KEY, self.config.pool_status_delay_s)
            return
        if key == POOL_STATUS_KEY:
            await self._write_pool_statuses(state)
            return
        outcome = reconcile_service(self.store.view(), state, key, self.unparsed_pools)
        for other in outcome.requeue:
            queue.add(other)
        await self._apply(outcome)
        if outcome.status is not None or outcome.released:
            queue.add_after(POOL_STATUS_KEY, self.config.pool_status_delay_s)

    # ------------------------------------------------------------------ writes

    def _count(self, outcome: ServiceOutcome) -> None:
        if isinstance(outcome.result, ipam.Refused):
            self.metrics.failures.labels(outcome.result.reason.value).inc()
        elif isinstance(outcome.result, ipam.Assigned) and outcome.status is not None:
            self.metrics.assignments.inc()
        if outcome.released and not isinstance(outcome.result, ipam.Assigned):
            self.metrics.releases.inc()

    async def _apply(self, outcome: ServiceOutcome) -> None:
        self._count(outcome)
        if not outcome.exists or not (outcome.writes or outcome.events):
            return
        if not self.is_leader:
            raise KubeError("not the leader any more; not writing")
        raw = self._raw[Kind.SERVICE].get(outcome.key)
        if raw is None:
            return  # deleted meanwhile; its DELETED event reconciles it again
        namespace, name = split_key(outcome.key)
        if outcome.status is not None:
            written = await self._write_service_status(
                raw, namespace, name, outcome.status, ours_only=outcome.result is not None
            )
            if written is None:
                return
            self._write_through(Kind.SERVICE, outcome.key, raw, written)
            raw = written
        if outcome.annotate:
            patch = {
                "metadata": {"annotations": {ANNOTATION_ALLOCATED_FROM: outcome.allocated_from}}
            }
            try:
                written = await self.client.patch(SERVICES, name, patch, namespace=namespace)
            except NotFound:
                return
            except KubeError as err:
                self._api_error("patch service", err)
                raise
            self._write_through(Kind.SERVICE, outcome.key, raw, written)
            raw = written
        for event in outcome.events:
            self._events.put_nowait((raw, event))

    async def _write_service_status(
        self,
        raw: KubeObject,
        namespace: str | None,
        name: str,
        ips: tuple[Any, ...],
        *,
        ours_only: bool,
    ) -> KubeObject | None:
        ingress = [{"ip": str(ip)} for ip in ips] or None
        rv = raw.get("metadata", {}).get("resourceVersion")
        patch = {
            "metadata": {"resourceVersion": rv},
            "status": {"loadBalancer": {"ingress": ingress}},
        }
        try:
            return await self.client.patch(SERVICES, name, patch, namespace=namespace, status=True)
        except NotFound:
            return None
        except Conflict as err:
            self._api_error("patch service status", err)
        except KubeError as err:
            self._api_error("patch service status", err)
            raise
        options = self.config.options

        def desired(current: KubeObject) -> dict[str, Any] | None:
            if ours_only:
                parsed, _ = parse_object(current)
                if not isinstance(parsed, Service) or not options.handles(parsed):
                    return None  # changed class meanwhile: not ours to write
            status = dict(current.get("status") or {})
            balancer = dict(status.get("loadBalancer") or {})
            if ingress:
                balancer["ingress"] = ingress
            else:
                balancer.pop("ingress", None)
            status["loadBalancer"] = balancer
            return status

        try:
            return await update_status(self.client, SERVICES, name, namespace, desired)
        except NotFound:
            return None
        except KubeError as err:
            self._api_error("update service status", err)
            raise

    async def _write_pool_statuses(self, state: AllocationState) -> None:
        view = self.store.view()
        outcomes = pool_statuses(view, state, datetime.now(UTC), self.unparsed_pools)
        self.metrics.set_pool_usage(state.allocator.usage(), len(state.config.problems))
        for outcome in outcomes:
            if not outcome.changed:
                continue
            if not self.is_leader:
                raise KubeError("not the leader any more; not writing")
            namespace, name = split_key(outcome.key)
            try:
                written = await patch_status(
                    self.client, ADDRESS_POOLS, name, namespace, outcome.status
                )
            except NotFound:
                continue
            except KubeError as err:
                self._api_error("patch pool status", err)
                raise
            for event in outcome.events:
                self._events.put_nowait((written, event))

    def _api_error(self, operation: str, err: KubeError) -> None:
        code = err.code if isinstance(err, ApiStatusError) else 0
        self.metrics.api_errors.labels(operation, str(code)).inc()

    async def _send_events(self) -> None:
        while True:
            involved, event = await self._events.get()
            if not self.is_leader:
                continue
            ok = await self.recorder.record(involved, event.type.value, event.reason, event.message)
            if not ok:
                self.metrics.api_errors.labels("create event", "0").inc()


def _newer(obj: KubeObject, than: KubeObject) -> bool:
    """Whether `obj` is a newer version than `than`. Resource versions are opaque, but
    API servers in practice serve etcd revisions (integers); when they are not integers,
    any other version counts as newer."""
    a = obj.get("metadata", {}).get("resourceVersion", "")
    b = than.get("metadata", {}).get("resourceVersion", "")
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b or not a


def _same_version(a: KubeObject, b: KubeObject) -> bool:
    version = a.get("metadata", {}).get("resourceVersion")
    return bool(version) and version == b.get("metadata", {}).get("resourceVersion")


@contextlib.asynccontextmanager
async def running(controller: KubeController) -> AsyncIterator[KubeController]:
    """Run a controller in a task for the duration of a `with` block (tests, bench)."""
    task = asyncio.create_task(controller.run())
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
