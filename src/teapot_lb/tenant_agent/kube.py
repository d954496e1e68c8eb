"""`teapot-lb tenant-agent` (cloud-provider-teapot): a tenant cluster's LoadBalancer
Services, fulfilled through the management cluster.

Two API servers: the tenant cluster's (Services, Nodes, EndpointSlices in; Service status,
finalizers and Events out) and the management cluster's, through credentials that allow
only the tenant's namespace there (TenantLoadBalancers of this cluster in and out; its
Nodes published as its TenantNodes, :mod:`.kube_nodes`, for the BGP relay).

One level-triggered reconcile per Service key: the Service, its nodes and ready endpoints
become a TenantLoadBalancer (:mod:`.request`); its assigned IPs come back into
`status.loadBalancer.ingress`; a refusal becomes a Warning Event on the Service (and on
each Node it names as the cause), once per refusal, whichever side decided it: the
manager (the request's `Accepted=False`) or the API server (the manager's webhook
denying the write, or the CRD's schema). What became of an accepted request (its
`Programmed`: no address, an external provider's build failed, degraded, serving) is told
too, where the manager wrote words for the tenant (the condition ProgrammedForTenant,
never Programmed's operator's message): a Warning, or a Normal once it serves, once per change.
A request the API server refused is not written again until the Service, its nodes or
endpoints change, or the manager clears the refusal the agent recorded in the management
namespace (the Tenant changed). A finalizer on the Service makes its deletion wait until
the remote request is gone. Every remote
request of this cluster is a key too, so an orphan (its Service gone while the agent was
down) is deleted once the Service cache has synced: deletions follow only what the tenant
API server said, never an error or a timeout (an unreachable server retries with backoff).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from teapot_lb import log
from teapot_lb.cluster import Kind, Store
from teapot_lb.controller.kube_cache import newer
from teapot_lb.gateway.control.kube_l7mirror import L7Mirror
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import AlreadyExists, ApiStatusError, KubeError, NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer, unready
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    EVENTS,
    NODES,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    KubeObject,
    Resource,
    object_key,
)
from teapot_lb.kube.status import patch_status
from teapot_lb.kube.workqueue import WorkQueue
from teapot_lb.model import parse_object
from teapot_lb.model.service import SERVICE_NAME_LABEL, Service
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.speaker.kube_source import put
from teapot_lb.tenancy.kube_denials import Denials
from teapot_lb.tenancy.programmed import is_programmed
from teapot_lb.tenancy.refusal import refusal_of_denial
from teapot_lb.tenancy.request import (
    AGENT_COMPONENT,
    DENIALS_SELECTOR,
    FINALIZER,
    LABEL_CLUSTER,
    LABEL_SERVICE_NAME,
    LABEL_SERVICE_NAMESPACE,
    RELAY_SELECTOR,
    REQUEST_KIND,
    TEAPOT_CLOUD_CLASS,
    TENANT_CLUSTER_HINT,
    desired_request,
    ingress_of,
    management_namespace_hint,
    nodes_refused,
    programmed_of,
    refusal_of,
    request_name,
    session_name,
)
from teapot_lb.tenancy.vet import Rule
from teapot_lb.tenant_agent.kube_nodes import NodePublisher

COMPONENT = AGENT_COMPONENT
# A key of the agent's loop that is a relay Event (in the management namespace), not a
# Service: no Service key has a colon.
RELAY_EVENT = "relay-event:"


@dataclass(frozen=True)
class AgentConfig:
    """`cluster`: this tenant cluster's name (unique within the tenant); `namespace`: the
    tenant's namespace in the management cluster; `unclassed`: also serve LoadBalancer
    Services without a class (when installed as the cluster's only LB provider);
    `gateway`: also be the Teapot ingress controller (:mod:`.kube_l7mirror`: Ingresses,
    and with `gateway_api` Gateway API objects, mirrored for the shared gateway)."""

    cluster: str
    namespace: str
    load_balancer_class: str = TEAPOT_CLOUD_CLASS
    unclassed: bool = False
    workers: int = 8
    gateway: bool = False
    gateway_api: bool = True


class TenantAgent:
    def __init__(
        self,
        tenant: KubeClient,
        management: KubeClient,
        config: AgentConfig,
        *,
        watch_timeout_s: float = 300.0,
    ) -> None:
        self.tenant = tenant
        self.management = management
        self.config = config
        self.store = Store()
        self.recorder = EventRecorder(tenant, COMPONENT, instance=config.cluster)
        # What each Service was last told: (its generation, reason, message).
        self._told: dict[str, tuple[object, ...]] = {}
        # What each Service was last told of its request's Programmed: (type, reason,
        # message); kept while there is nothing to tell (being built), so the same word
        # after it is not told twice.
        self._told_programmed: dict[str, tuple[object, ...]] = {}
        self._told_nodes: dict[str, tuple[str, str]] = {}
        self._told_sessions: dict[str, tuple[object, ...]] = {}  # relay Events told, by Node
        # Services as our own last write returned them, until the informer catches up:
        # a reconcile right after a write must not patch again from a stale version.
        self._written: dict[str, KubeObject] = {}
        self._written_remote: dict[str, KubeObject] = {}  # the same for our requests
        self._log = log.get("tenant-agent").bind(cluster=config.cluster)
        self.loop: ReconcileLoop[str] = ReconcileLoop(
            "tenant-agent",
            self._reconcile,
            workers=config.workers,
            queue=WorkQueue(base_delay_s=0.2, max_delay_s=30.0),
        )
        self.services = self._tenant_informer(SERVICES, Kind.SERVICE, watch_timeout_s)
        self.nodes = self._tenant_informer(NODES, Kind.NODE, watch_timeout_s)
        self.slices = self._tenant_informer(ENDPOINT_SLICES, Kind.ENDPOINT_SLICE, watch_timeout_s)
        self.remote = Informer(
            management,
            TENANT_LOAD_BALANCERS,
            namespace=config.namespace,
            label_selector=f"{LABEL_CLUSTER}={config.cluster}",
            watch_timeout_s=watch_timeout_s,
        )
        self.loop.watch(self.services)
        self.loop.watch(self.nodes, self._every_service)
        self.loop.watch(self.slices, self._service_of_slice)
        self.loop.watch(self.remote, self._service_of_request)
        # Events in the management namespace: the refusals the agent recorded there, and
        # the relay's word about this tenant's nodes' sessions.
        self.denials, self.relay_events = (
            Informer(
                management,
                EVENTS,
                namespace=config.namespace,
                field_selector=selector,
                watch_timeout_s=watch_timeout_s,
            )
            for selector in (DENIALS_SELECTOR, RELAY_SELECTOR)
        )
        # Refusals the API server gave (the webhook's), recorded in the management
        # namespace for the manager to count (RBAC: the tenant's namespace only, so only
        # its own count); a request refused is not written again as it was until the
        # manager clears its refusal (the Tenant changed).
        self.refusals = Denials(management, config.cluster, config.namespace, self.denials)
        self.refusals.listeners.append(self._ask_again)
        self.loop.watch(self.denials, lambda event, key, obj: [])  # (keys: _ask_again)
        self.loop.watch(
            self.relay_events,
            lambda event, key, obj: [] if event is EventType.DELETED else [RELAY_EVENT + key],
        )
        self.published_nodes = NodePublisher(
            management,
            config.cluster,
            config.namespace,
            store=self.store,
            nodes=self.nodes,
            watch_timeout_s=watch_timeout_s,
        )
        self.l7 = (
            L7Mirror(
                tenant,
                management,
                config.cluster,
                config.namespace,
                store=self.store,
                shared=(self.services, self.nodes, self.slices),
                recorder=self.recorder,
                refusals=self.refusals,
                gateway_api=config.gateway_api,
                watch_timeout_s=watch_timeout_s,
            )
            if config.gateway
            else None
        )

    def _tenant_informer(self, resource: Resource, kind: Kind, watch_timeout_s: float) -> Informer:
        informer = Informer(self.tenant, resource, watch_timeout_s=watch_timeout_s)

        def handle(event: EventType, key: str, obj: KubeObject) -> None:
            if event is EventType.DELETED:
                self.store.delete(kind, key)
            else:
                put(self.store, kind, key, obj)

        informer.add_handler(handle)
        return informer

    # ------------------------------------------------------------------ keys

    def _every_service(self, event: EventType, key: str, obj: KubeObject) -> Iterable[str]:
        return self.services.list_keys()

    def _service_of_slice(self, event: EventType, key: str, obj: KubeObject) -> Iterable[str]:
        meta = obj.get("metadata", {})
        service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        return [object_key(meta.get("namespace"), service)] if service else []

    def _ask_again(self, refused: KubeObject) -> None:
        """A refusal the manager cleared (the Tenant changed): the Service of a request
        refused writes it again (a mirror's refusal is the gateway mirror's)."""
        if refused.get("kind") == REQUEST_KIND:
            for key in self._service_of_request(EventType.MODIFIED, "", refused):
                self.loop.queue.add(key)

    def _service_of_request(self, event: EventType, key: str, obj: KubeObject) -> Iterable[str]:
        labels = obj.get("metadata", {}).get("labels") or {}
        ns, name = labels.get(LABEL_SERVICE_NAMESPACE), labels.get(LABEL_SERVICE_NAME)
        return [object_key(ns, name)] if ns and name else []

    # ------------------------------------------------------------------ running

    def readiness(self) -> list[str]:
        """Why the agent is not ready, naming what it tried and what sets it."""
        tenant = unready(
            (self.services, self.nodes, self.slices),
            TENANT_CLUSTER_HINT,
        )
        management = unready(
            (self.remote, self.denials, self.relay_events),
            management_namespace_hint(self.config.namespace),
        )
        published = self.published_nodes.readiness()
        return (
            tenant + management + published + (self.l7.readiness() if self.l7 is not None else [])
        )

    async def run(self) -> None:
        """Until cancelled. Workers start once every cache has synced, so the first keys
        (every Service and every remote request of this cluster) clean up orphans."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.loop.run())
            group.create_task(self.published_nodes.run())
            if self.l7 is not None:
                group.create_task(self.l7.run())

    # ------------------------------------------------------------------ reconcile

    def _handles(self, service: Service) -> bool:
        return service.is_handled(self.config.load_balancer_class, self.config.unclassed)

    async def _reconcile(self, key: str) -> None:
        if key.startswith(RELAY_EVENT):
            await self._tell_session(key.removeprefix(RELAY_EVENT))
            return
        try:
            await self._sync(key)
        except NotFound as err:
            ns, _, name = key.partition("/")
            self._written.pop(key, None)
            self._written_remote.pop(request_name(self.config.cluster, ns, name), None)
            # An object went away under us (a Service deleted while we patched it, a
            # request deleted by someone else): look again, from the informers' copies.
            self._log.debug("gone while reconciling", key=key, error=str(err))
            self.loop.queue.add_after(key, 0.1)

    async def _sync(self, key: str) -> None:
        ns, _, name = key.partition("/")
        remote_name = request_name(self.config.cluster, ns, name)
        remote_raw = self._latest(
            self._written_remote, remote_name, self.remote.get(object_key(
                self.config.namespace, remote_name))
        )  # fmt: skip
        raw = self.services.get(key)
        if raw is None:
            self._written.pop(key, None)  # the tenant API server said it is gone
        raw = self._latest(self._written, key, raw)
        service = self.store.view().services.get(key)
        if raw is None or service is None:
            # The tenant API server said the Service is gone: an orphan.
            await self._delete_remote(remote_name, remote_raw)
            await self._forget_refusal(key, remote_name)
            return
        meta = raw.get("metadata", {})
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") or not self._handles(service):
            await self._delete_remote(remote_name, remote_raw)
            if FINALIZER in finalizers:
                if not meta.get("deletionTimestamp") and service.status.load_balancer.ingress:
                    await patch_status(self.tenant, SERVICES, name, ns, {"loadBalancer": {}})
                finalizers.remove(FINALIZER)
                await self._set_finalizers(raw, finalizers)
            await self._forget_refusal(key, remote_name)
            return
        if FINALIZER not in finalizers:
            raw = await self._set_finalizers(raw, [*finalizers, FINALIZER])
        try:
            desired = desired_request(
                service, self.store.view(), self.config.cluster, self.config.namespace
            )
        except ValueError as err:
            await self._tell(key, raw, ("InvalidRequest", str(err)))
            return
        denied = self.refusals.held(REQUEST_KIND, remote_name)
        if denied is not None and _same_request(denied, desired):
            return  # refused as it is: nothing changed that could change the answer
        try:
            remote = await self._write_remote(desired, remote_raw)
        except ApiStatusError as err:
            refusal = refusal_of_denial(err.code, err.message, Rule.INVALID_REQUEST.value)
            if refusal is None:
                raise  # not the request's fault: retried with backoff
            await self._tell(key, raw, refusal, desired)
            await self.refusals.deny(desired, refusal)
            return
        await self.refusals.clear(REQUEST_KIND, remote_name)
        parsed, _ = parse_object(remote)
        request = parsed if isinstance(parsed, TenantLoadBalancer) else None
        ingress = ingress_of(request)
        current = (raw.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        if [{"ip": e.get("ip")} for e in current] != ingress:
            self._written[key] = await patch_status(
                self.tenant, SERVICES, name, ns, {"loadBalancer": {"ingress": ingress}}
            )
        refusal = refusal_of(request)
        if refusal is not None:
            await self._tell(key, raw, refusal, desired)
            return
        self._told.pop(key, None)
        programmed = programmed_of(request)
        if programmed is not None:
            await self._say(self._told_programmed, key, raw, programmed, *programmed)
        elif request is not None and is_programmed(request):
            self._told_programmed.pop(key, None)  # served, nothing to say: a Warning again is new

    async def _tell(
        self,
        key: str,
        service: KubeObject,
        refusal: tuple[str, str],
        desired: KubeObject | None = None,
    ) -> None:
        """A Warning Event on the Service, and on each Node the refusal names as its cause;
        once per refusal and change of the Service (not per retry)."""
        told = (service.get("metadata", {}).get("generation"), *refusal)
        self._told_programmed.pop(key, None)  # served again after it: told again
        await self._say(self._told, key, service, told, "Warning", *refusal)
        for node in nodes_refused(refusal[1], desired or {}):
            node_raw = self.nodes.get(node)
            if node_raw is None or self._told_nodes.get(node) == refusal:
                continue
            involved = {"apiVersion": "v1", "kind": "Node", **node_raw}
            if await self.recorder.record(involved, "Warning", *refusal):
                self._told_nodes[node] = refusal

    async def _say(
        self,
        told: dict[str, tuple[object, ...]],
        key: str,
        service: KubeObject,
        state: tuple[object, ...],
        kind: str,
        reason: str,
        message: str,
    ) -> None:
        """An Event on the Service unless `told` has `state` for it already (or, the first
        time after a restart, the Service's last Event from an agent says the same)."""
        if key not in told and await self._said_before(service, kind, reason, message):
            told[key] = state  # by this agent before it restarted
        if told.get(key) != state:
            involved = {"apiVersion": "v1", "kind": "Service", **service}
            if await self.recorder.record(involved, kind, reason, message):
                told[key] = state

    async def _said_before(self, service: KubeObject, kind: str, reason: str, message: str) -> bool:
        """Whether the last thing an agent told the Service (its latest Events) is this:
        read the first time this agent tells the Service, so that a restart does not repeat
        it, and a change that happened while no agent ran is still told."""
        meta = service.get("metadata", {})
        try:
            found = await self.tenant.list(
                EVENTS,
                namespace=meta.get("namespace"),
                field_selector=f"involvedObject.uid={meta.get('uid')}",
            )
        except KubeError:
            return False  # told again rather than not at all
        ours = [
            e
            for e in found.items
            if (e.get("involvedObject") or {}).get("uid") == meta.get("uid")
            and e.get("reportingComponent") == COMPONENT
        ]
        if not ours:
            return False
        latest = ours[0]
        for event in ours[1:]:  # timestamps are whole seconds: the last written of a second
            when, then = str(event.get("lastTimestamp")), str(latest.get("lastTimestamp"))
            if when > then or (when == then and newer(event, latest)):
                latest = event
        return (latest.get("type"), latest.get("reason"), latest.get("message")) == (
            kind,
            reason,
            message,
        )

    async def _tell_session(self, event_key: str) -> None:
        """The relay's word about a node's BGP session (refused, over its prefix limit), on
        the Node with that address."""
        event = self.relay_events.get(event_key)
        if event is None:
            return
        name = (event.get("involvedObject") or {}).get("name")
        said = (str(event.get("reason", "")), str(event.get("message", "")))
        view = self.store.view()
        for node_name in sorted(view.nodes):
            node_raw = self.nodes.get(node_name)
            addresses = {session_name(str(a)) for a in view.nodes[node_name].addresses()}
            if node_raw is None or name not in addresses:
                continue
            told = (event_key, event.get("count"))
            if self._told_sessions.get(node_name) == told:
                continue
            involved = {"apiVersion": "v1", "kind": "Node", **node_raw}
            kind = str(event.get("type") or "Warning")
            if await self.recorder.record(involved, kind, *said):
                self._told_sessions[node_name] = told

    async def _forget_refusal(self, key: str, remote_name: str) -> None:
        self._told.pop(key, None)
        self._told_programmed.pop(key, None)
        await self.refusals.clear(REQUEST_KIND, remote_name)

    async def _set_finalizers(self, raw: KubeObject, finalizers: list[str]) -> KubeObject:
        meta = raw["metadata"]
        patch = {
            "metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}
        }
        written = await self.tenant.patch(
            SERVICES, meta["name"], patch, namespace=meta["namespace"]
        )
        self._written[object_key(meta["namespace"], meta["name"])] = written
        return written

    @staticmethod
    def _latest(
        written: dict[str, KubeObject], key: str, cached: KubeObject | None
    ) -> KubeObject | None:
        """The newer of the informer's copy and our own last write (dropped once the
        informer has caught up). An object the informer has not seen is taken from our
        write: a request we just created must not be created again; should it be gone
        after all, the next write says NotFound and the key is looked at again."""
        ours = written.get(key)
        if ours is None:
            return cached
        if cached is not None and not newer(ours, cached):
            del written[key]
            return cached
        return ours

    async def _write_remote(self, desired: KubeObject, current: KubeObject | None) -> KubeObject:
        written = await self._put_remote(desired, current)
        self._written_remote[desired["metadata"]["name"]] = written
        return written

    async def _put_remote(self, desired: KubeObject, current: KubeObject | None) -> KubeObject:
        if current is None:
            try:
                return await self.management.create(TENANT_LOAD_BALANCERS, desired)
            except AlreadyExists:
                current = await self.management.get(
                    TENANT_LOAD_BALANCERS, desired["metadata"]["name"], self.config.namespace
                )
        same_labels = current.get("metadata", {}).get("labels") == desired["metadata"]["labels"]
        if current.get("spec") == desired["spec"] and same_labels:
            return current
        meta = {
            **current["metadata"],
            "labels": desired["metadata"]["labels"],
        }
        body = {**current, "metadata": meta, "spec": desired["spec"]}
        return await self.management.replace(TENANT_LOAD_BALANCERS, body)

    async def _delete_remote(self, name: str, current: KubeObject | None) -> None:
        self._written_remote.pop(name, None)
        if current is None:
            return
        uid = current.get("metadata", {}).get("uid")
        with contextlib.suppress(NotFound):
            await self.management.delete(
                TENANT_LOAD_BALANCERS, name, self.config.namespace, uid=uid
            )


def _same_request(a: KubeObject, b: KubeObject) -> bool:
    return bool(a["spec"] == b["spec"] and a["metadata"]["labels"] == b["metadata"]["labels"])


__all__ = ["AgentConfig", "TenantAgent"]
