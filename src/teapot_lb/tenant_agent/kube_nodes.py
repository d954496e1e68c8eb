"""The tenant agent's node registration: its cluster's Nodes (InternalIPs) published as one
``TenantNodes`` in the tenant's management namespace (:func:`~.nodes.desired_tenant_nodes`),
which the BGP relay takes the tenant's sessions and next hops from.

Level-triggered, one key: any Node event (or a change of the published object, such as
someone deleting it) publishes the whole list again if it differs. Written with the
agent's own management credentials, which allow the tenant's namespace only; the manager
vets what is published against the Tenant's nodeNetworks.
"""

from __future__ import annotations

import asyncio

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.controller.kube_cache import newer
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import AlreadyExists
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.resources import TENANT_NODES, KubeObject, object_key
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.tenancy.nodes import desired_tenant_nodes
from teapot_lb.tenancy.request import LABEL_CLUSTER, management_namespace_hint

KEY = "nodes"


class NodePublisher:
    """`nodes`: the agent's Node informer (run by the agent); `store`: its typed cache."""

    def __init__(
        self,
        management: KubeClient,
        cluster: str,
        namespace: str,
        *,
        store: Store,
        nodes: Informer,
        watch_timeout_s: float = 300.0,
    ) -> None:
        self.management = management
        self.cluster = cluster
        self.namespace = namespace
        self.store = store
        self.nodes = nodes
        self.remote = Informer(
            management,
            TENANT_NODES,
            namespace=namespace,
            label_selector=f"{LABEL_CLUSTER}={cluster}",
            watch_timeout_s=watch_timeout_s,
        )
        self.loop: ReconcileLoop[str] = ReconcileLoop(
            "tenant-agent-nodes",
            self._reconcile,
            workers=1,
            queue=WorkQueue(base_delay_s=0.2, max_delay_s=30.0),
        )
        for informer in (self.nodes, self.remote):
            informer.add_handler(self._changed)
        self._written: KubeObject | None = None
        self._log = log.get("tenant-agent.nodes").bind(cluster=cluster)

    def _changed(self, event: EventType, key: str, obj: KubeObject) -> None:
        self.loop.queue.add(KEY)

    def readiness(self) -> list[str]:
        """Why not ready, naming what was tried where and what sets it."""
        return unready([self.remote], management_namespace_hint(self.namespace))

    async def run(self) -> None:
        """Until cancelled: the published object's informer; the worker once both caches
        synced (a Node list half read would deregister the rest)."""
        task = asyncio.create_task(self.remote.run())
        try:
            await asyncio.gather(self.remote.wait_synced(), self.nodes.wait_synced())
            self.loop.queue.add(KEY)
            await asyncio.gather(task, self.loop.work())
        finally:
            self.loop.queue.shut_down()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _current(self) -> KubeObject | None:
        """The newer of the informer's copy and our own last write."""
        cached = self.remote.get(object_key(self.namespace, self.cluster))
        ours = self._written
        if ours is None or (cached is not None and not newer(ours, cached)):
            self._written = None
            return cached
        return ours

    async def _reconcile(self, key: str) -> None:
        desired = desired_tenant_nodes(self.store.view().nodes, self.cluster, self.namespace)
        current = self._current()
        if current is None:
            try:
                self._written = await self.management.create(TENANT_NODES, desired)
                self._published(desired)
                return
            except AlreadyExists:
                current = await self.management.get(TENANT_NODES, self.cluster, self.namespace)
        labels = current.get("metadata", {}).get("labels") or {}
        if current.get("spec") == desired["spec"] and labels.get(LABEL_CLUSTER) == self.cluster:
            return
        meta = {**current["metadata"], "labels": {**labels, LABEL_CLUSTER: self.cluster}}
        body = {**current, "metadata": meta, "spec": desired["spec"]}
        self._written = await self.management.replace(TENANT_NODES, body)
        self._published(desired)

    def _published(self, desired: KubeObject) -> None:
        nodes = desired["spec"]["nodes"]
        self._log.info(
            "tenant nodes published",
            nodes=len(nodes),
            addresses=sum(len(n["addresses"]) for n in nodes),
        )


__all__ = ["NodePublisher"]
