"""The tenant agent's Teapot ingress controller against two API servers: the tenant
cluster's Ingresses, Gateways and routes (with the EndpointSlices and TLS Secrets they
reference) mirrored into the tenant's management namespace, and status brought back.

One level-triggered key: any change on either side makes the mirror compute what the
management namespace should hold of this cluster (:func:`.l7mirror.desired_mirror`) and
apply the difference — create, replace (when the content digest differs), delete what
this cluster owns and no longer wants — then copy status back to the tenant's objects.
Deletions follow only what both caches say after they synced, never an error. A mirror
refused by the management cluster's webhook becomes an Event on the tenant's object.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.controller.kube_cache import newer
from teapot_lb.gateway.control.l7mirror import (
    MIRRORED,
    TENANT_RESOURCES,
    Served,
    TenantCluster,
    class_status,
    current_digest,
    desired_mirror,
    keep_ours,
    refusal_of,
    status_back,
)
from teapot_lb.gateway.control.l7status import denied_status
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import AlreadyExists, ApiStatusError, KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    GATEWAY_API_GROUP,
    GATEWAY_CLASSES,
    KubeObject,
    Resource,
    object_key,
    split_key,
)
from teapot_lb.kube.status import patch_status
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.tenancy.kube_denials import Denials
from teapot_lb.tenancy.refusal import refusal_of_denial
from teapot_lb.tenancy.request import (
    LABEL_CLUSTER,
    TENANT_CLUSTER_HINT,
    management_namespace_hint,
)

MIRROR_KEY = "mirror"


def _now() -> str:
    """A condition's timestamp (RFC 3339, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class L7Mirror:
    """`shared`: the agent's informers (Services, Nodes, EndpointSlices), run by the agent;
    `store`: the agent's typed cache of them."""

    def __init__(
        self,
        tenant: KubeClient,
        management: KubeClient,
        cluster: str,
        namespace: str,
        *,
        store: Store,
        shared: Sequence[Informer],
        recorder: EventRecorder,
        refusals: Denials | None = None,
        gateway_api: bool = True,
        watch_timeout_s: float = 300.0,
    ) -> None:
        self.tenant = tenant
        self.management = management
        self.cluster = cluster
        self.namespace = namespace
        self.store = store
        self.shared = list(shared)
        self.recorder = recorder
        self.refusals = refusals
        if refusals is not None:
            # The manager cleared a refusal (the Tenant changed): mirror it again.
            refusals.listeners.append(lambda refused: self.loop.queue.add(MIRROR_KEY))
        self._log = log.get("tenant-agent.l7").bind(cluster=cluster)

        def wanted(resource: Resource) -> bool:
            return gateway_api or resource.group != GATEWAY_API_GROUP

        self.sources = {
            r: Informer(tenant, r, watch_timeout_s=watch_timeout_s)
            for r in TENANT_RESOURCES
            if wanted(r)
        }
        self.mirrors = {
            r: Informer(
                management,
                r,
                namespace=namespace,
                label_selector=f"{LABEL_CLUSTER}={cluster}",
                watch_timeout_s=watch_timeout_s,
            )
            for r in MIRRORED
            if wanted(r)
        }
        self.loop: ReconcileLoop[str] = ReconcileLoop(
            "tenant-agent-l7",
            self._reconcile,
            workers=1,
            queue=WorkQueue(base_delay_s=0.2, max_delay_s=30.0),
        )
        for informer in [*self.sources.values(), *self.mirrors.values(), *self.shared]:
            informer.add_handler(self._changed)
        self._written: dict[tuple[Resource, str], KubeObject] = {}
        self._told: dict[tuple[Resource, str], tuple[str, str]] = {}

    def _changed(self, event: EventType, key: str, obj: KubeObject) -> None:
        self.loop.queue.add(MIRROR_KEY)

    def readiness(self) -> list[str]:
        """Why not ready, naming what was tried where and what sets it."""
        return unready(self.sources.values(), TENANT_CLUSTER_HINT) + unready(
            self.mirrors.values(), management_namespace_hint(self.namespace)
        )

    async def run(self) -> None:
        """Until cancelled: this mirror's informers; workers once every cache synced."""
        own = [*self.sources.values(), *self.mirrors.values()]
        tasks = [asyncio.create_task(i.run()) for i in own]
        try:
            waited = [*own, *self.shared, *([self.refusals.informer] if self.refusals else [])]
            await asyncio.gather(*(i.wait_synced() for i in waited))
            self.loop.queue.add(MIRROR_KEY)
            await asyncio.gather(*tasks, self.loop.work())
        finally:
            self.loop.queue.shut_down()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ reconcile

    def _tenant_cluster(self) -> TenantCluster:
        view = self.store.view()
        raw = {r: {k: o for k in i.list_keys() if (o := i.get(k)) is not None}
               for r, i in self.sources.items()}  # fmt: skip
        slices = next((i for i in self.shared if i.resource is ENDPOINT_SLICES), None)
        if slices is not None:
            raw[ENDPOINT_SLICES] = {
                k: o for k in slices.list_keys() if (o := slices.get(k)) is not None
            }
        return TenantCluster(raw, view.services, view.nodes)

    def _current(self, resource: Resource, name: str) -> KubeObject | None:
        cached = self.mirrors[resource].get(object_key(self.namespace, name))
        ours = self._written.get((resource, name))
        if ours is None:
            return cached
        if cached is not None and not newer(ours, cached):
            del self._written[(resource, name)]
            return cached
        return ours

    async def _reconcile(self, key: str) -> None:
        mirror = desired_mirror(self._tenant_cluster(), self.cluster, self.namespace)
        by_source = {(s.resource, s.mirror): s for s in mirror.served}
        failures: list[KubeError] = []
        order = {r: i for i, r in enumerate(MIRRORED)}
        for (resource, name), body in sorted(
            mirror.objects.items(), key=lambda item: (order[item[0][0]], item[0][1])
        ):
            if resource not in self.mirrors:
                continue
            current = self._current(resource, name)
            if current_digest(current) == current_digest(body):
                continue
            if self._refused_as_it_is(resource, name, body):
                continue  # nothing changed that could change the answer
            try:
                self._written[(resource, name)] = await self._put(resource, body, current)
                self._told.pop((resource, name), None)
                if self.refusals is not None:
                    await self.refusals.clear(resource.kind, name)
            except ApiStatusError as err:
                served = by_source.get((resource, name))
                refusal = refusal_of_denial(err.code, err.message, "Refused")
                if refusal is not None and served is not None:
                    await self._tell(served, *refusal)
                    await self._write_denied(served, *refusal)
                    if self.refusals is not None:
                        await self.refusals.deny(body, refusal)
                else:
                    failures.append(err)
            except KubeError as err:
                failures.append(err)
        await self._delete_unwanted(mirror.objects.keys())
        await self._forget_refusals(mirror.objects.keys())
        for served in mirror.served:
            await self._status_back(served)
        await self._class_statuses()
        if failures:
            raise failures[0]

    async def _put(
        self, resource: Resource, body: KubeObject, current: KubeObject | None
    ) -> KubeObject:
        if current is None:
            try:
                return await self.management.create(resource, body)
            except AlreadyExists:
                current = await self.management.get(
                    resource, body["metadata"]["name"], self.namespace
                )
            if current_digest(current) == current_digest(body):
                return current
        return await self.management.replace(resource, keep_ours(current, body))

    def _refused_as_it_is(self, resource: Resource, name: str, body: KubeObject) -> bool:
        """The API server refused this very mirror, and the Tenant has not changed since
        (the manager clears refusals when it does)."""
        held = self.refusals.held(resource.kind, name) if self.refusals else None
        return held is not None and current_digest(held) == current_digest(body)

    async def _forget_refusals(self, wanted: Iterable[tuple[Resource, str]]) -> None:
        """The recorded refusals of mirrors no longer wanted go (their object was deleted
        or is no longer ours to serve)."""
        if self.refusals is None:
            return
        kinds = {r.kind for r in MIRRORED}
        keep = {(r.kind, name) for r, name in wanted}
        for kind, name in sorted(self.refusals.recorded() | self.refusals.held_keys()):
            if kind in kinds and (kind, name) not in keep:
                await self.refusals.clear(kind, name)

    async def _delete_unwanted(self, wanted: Iterable[tuple[Resource, str]]) -> None:
        keep = set(wanted)
        for resource in reversed(MIRRORED):
            informer = self.mirrors.get(resource)
            if informer is None:
                continue
            for key in informer.list_keys():
                _, name = split_key(key)
                if (resource, name) in keep:
                    continue
                current = informer.get(key) or {}
                self._written.pop((resource, name), None)
                uid = current.get("metadata", {}).get("uid")
                with contextlib.suppress(NotFound):
                    await self.management.delete(resource, name, self.namespace, uid=uid)

    async def _status_back(self, served: Served) -> None:
        if served.resource not in self.mirrors:
            return
        mirror = self._current(served.resource, served.mirror)
        status = status_back(served, mirror)
        ns, name = split_key(served.key)
        if status is not None:
            with contextlib.suppress(NotFound):
                await patch_status(self.tenant, served.resource, name, ns, status)
        refusal = refusal_of(mirror)
        if refusal is not None:
            await self._tell(served, *refusal)
        elif mirror is not None:
            self._told.pop((served.resource, served.mirror), None)

    async def _write_denied(self, served: Served, reason: str, message: str) -> None:
        """A denied Gateway or route says so in its status too (Accepted=False)."""
        status = denied_status(served.resource.kind, served.raw, reason, message, _now())
        if status is None or all(
            (served.raw.get("status") or {}).get(k) == v for k, v in status.items()
        ):
            return
        ns, name = split_key(served.key)
        with contextlib.suppress(NotFound):
            await patch_status(self.tenant, served.resource, name, ns, status)

    async def _tell(self, served: Served, reason: str, message: str) -> None:
        told = (reason, message)
        if self._told.get((served.resource, served.mirror)) == told:
            return
        involved = {
            "apiVersion": served.resource.api_version,
            "kind": served.resource.kind,
            **served.raw,
        }
        self._log.info("refused", object=served.key, kind=served.resource.kind, reason=reason)
        if await self.recorder.record(involved, "Warning", reason, message):
            self._told[(served.resource, served.mirror)] = told

    async def _class_statuses(self) -> None:
        informer = self.sources.get(GATEWAY_CLASSES)
        if informer is None:
            return
        now = _now()
        for key in informer.list_keys():
            raw = informer.get(key)
            status = class_status(raw, now) if raw is not None else None
            if status is not None:
                with contextlib.suppress(NotFound):
                    await patch_status(self.tenant, GATEWAY_CLASSES, key, None, status)


__all__ = ["MIRROR_KEY", "L7Mirror"]
