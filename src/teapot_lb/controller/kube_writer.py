"""The controller's writes to the API: what a reconcile decided, applied as a difference.

- A Service's status through the status subresource: a merge patch carrying the
  resourceVersion the decision was computed from, then read-modify-write with retries on
  409 Conflict; then the `lb.teapot.io/allocated-from` annotation. Each write goes back
  into the cache (:meth:`ControllerCache.write_through`), so the next reconcile sees it.
- Every pool's status (usage, conditions), where it changed.
- Events, sent by a few tasks so that a slow Event write never delays an assignment.

Only the leader writes: every write first checks `is_leader` and fails (the key is retried,
by the next leader if need be) when this replica lost the lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from teapot_lb.addresses import IPAddress
from teapot_lb.cluster import Kind
from teapot_lb.controller import pool_statuses
from teapot_lb.controller.kube_cache import ControllerCache
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM, ControllerOptions
from teapot_lb.controller.services import ServiceOutcome
from teapot_lb.controller.state import AllocationState
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import Conflict, KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.resources import ADDRESS_POOLS, SERVICES, KubeObject, split_key
from teapot_lb.kube.status import patch_status, update_status
from teapot_lb.model import Service, parse_object
from teapot_lb.model.event import Event
from teapot_lb.model.service import ANNOTATION_VRIDS

COMPONENT = "teapot-lb-controller"


class KubeWriter:
    def __init__(
        self,
        client: KubeClient,
        cache: ControllerCache,
        metrics: ControllerMetrics,
        options: ControllerOptions,
        *,
        is_leader: Callable[[], bool],
        instance: str = "",
    ) -> None:
        self.client = client
        self.cache = cache
        self.metrics = metrics
        self.options = options
        self.is_leader = is_leader
        self.recorder = EventRecorder(client, COMPONENT, instance=instance)
        self._events: asyncio.Queue[tuple[KubeObject, Event]] = asyncio.Queue()

    def _check_leader(self) -> None:
        if not self.is_leader():
            raise KubeError("not the leader any more; not writing")

    async def apply(self, outcome: ServiceOutcome) -> None:
        """Write a Service's new status and annotation, and queue its Events."""
        if not outcome.exists or not (outcome.writes or outcome.events):
            return
        self._check_leader()
        raw = self.cache.reference(Kind.SERVICE, outcome.key)
        if raw is None:
            return  # deleted meanwhile; its DELETED event reconciles it again
        namespace, name = split_key(outcome.key)
        if outcome.status is not None:
            written = await self._write_service_status(
                raw, namespace, name, outcome.status, ours_only=outcome.result is not None
            )
            if written is None:
                return
            self.cache.write_through(Kind.SERVICE, outcome.key, raw, written)
            raw = written
        if outcome.annotate:
            notes = {
                ANNOTATION_ALLOCATED_FROM: outcome.allocated_from,
                ANNOTATION_VRIDS: outcome.vrids,
            }
            patch = {"metadata": {"annotations": notes}}
            try:
                written = await self.client.patch(SERVICES, name, patch, namespace=namespace)
            except NotFound:
                return
            except KubeError as err:
                self.metrics.api_error("patch service", err)
                raise
            self.cache.write_through(Kind.SERVICE, outcome.key, raw, written)
            raw = written
        for event in outcome.events:
            self._events.put_nowait((raw, event))

    async def _write_service_status(
        self,
        raw: KubeObject,
        namespace: str | None,
        name: str,
        ips: tuple[IPAddress, ...],
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
            self.metrics.api_error("patch service status", err)
        except KubeError as err:
            self.metrics.api_error("patch service status", err)
            raise
        options = self.options

        def desired(current: KubeObject) -> KubeObject | None:
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
            self.metrics.api_error("update service status", err)
            raise

    async def write_pool_statuses(self, state: AllocationState) -> None:
        """Every pool's status where it changed, and the pools' Events."""
        view = self.cache.store.view()
        outcomes = pool_statuses(view, state, datetime.now(UTC), self.cache.unparsed_pools)
        self.metrics.set_pool_usage(state.allocator.usage(), len(state.config.problems))
        for outcome in outcomes:
            if not outcome.changed:
                continue
            self._check_leader()
            namespace, name = split_key(outcome.key)
            try:
                written = await patch_status(
                    self.client, ADDRESS_POOLS, name, namespace, outcome.status
                )
            except NotFound:
                continue
            except KubeError as err:
                self.metrics.api_error("patch pool status", err)
                raise
            for event in outcome.events:
                self._events.put_nowait((written, event))

    def forget_events(self) -> None:
        """Drop the Events not sent yet (those of an earlier term are not sent late)."""
        self._events = asyncio.Queue()

    async def send_events(self) -> None:
        """Send queued Events until cancelled (a few of these run while leading)."""
        while True:
            involved, event = await self._events.get()
            if not self.is_leader():
                continue
            ok = await self.recorder.record(involved, event.type.value, event.reason, event.message)
            if not ok:
                self.metrics.api_errors.labels("create event", "0").inc()
