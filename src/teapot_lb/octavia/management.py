"""The driver's side of the management API: the Tenant of a project, the
TenantLoadBalancer of a load balancer, and the manager's answer (adapter, asyncio).

The driver writes requests the way a tenant agent does (the manager vets and allocates
them the same way); it waits for the manager's answer by watching the one object, with a
deadline. :class:`LoopThread` runs these coroutines for Octavia's synchronous driver
calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from typing import Any, TypeVar

from teapot_lb import log
from teapot_lb.gateway.control.l7mirror import ANNOTATION_DIGEST, current_digest, digest
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import AlreadyExists, Conflict, NotFound
from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    GATEWAYS,
    HTTP_ROUTES,
    SECRETS,
    TENANT_LOAD_BALANCERS,
    TENANTS,
    KubeObject,
)
from teapot_lb.model.common import dump
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.octavia.l7 import LABEL_LOADBALANCER
from teapot_lb.octavia.mapping import (
    ANNOTATION_REPORTED,
    LABEL_PROJECT,
    Answer,
    answer_to,
    request_name,
)

T = TypeVar("T")

# The gateway's objects of a load balancer, in the order they are written (what a route
# refers to first); deleted in the reverse order.
GATEWAY_RESOURCES = (SECRETS, ENDPOINT_SLICES, GATEWAYS, HTTP_ROUTES)

_log = log.get("octavia")


class ManagementError(Exception):
    """A request the management side cannot serve; the message is for the Octavia user."""


def _parse_request(obj: KubeObject) -> TenantLoadBalancer:
    return TenantLoadBalancer.model_validate(obj)


class Management:
    """The verbs the driver needs on the management API, through one client."""

    def __init__(self, client: KubeClient, *, answer_within_s: float = 10.0) -> None:
        self.client = client
        self.answer_within_s = answer_within_s

    async def tenant_of_project(self, project_id: str) -> Tenant:
        """The one Tenant labelled with the project, or ManagementError saying why not."""
        found = await self.client.list(TENANTS, label_selector=f"{LABEL_PROJECT}={project_id}")
        tenants = sorted((Tenant.model_validate(obj) for obj in found.items), key=lambda t: t.name)
        if len(tenants) != 1:
            names = ", ".join(t.name for t in tenants)
            why = f"is claimed by Tenants {names}" if tenants else "belongs to no Tenant"
            raise ManagementError(
                f"project {project_id} {why}: the cloud operator labels exactly one Tenant "
                f"{LABEL_PROJECT}={project_id}"
            )
        return tenants[0]

    async def request(self, namespace: str, lb_id: str) -> TenantLoadBalancer | None:
        try:
            obj = await self.client.get(TENANT_LOAD_BALANCERS, request_name(lb_id), namespace)
        except NotFound:
            return None
        return _parse_request(obj)

    async def write(self, request: TenantLoadBalancer) -> TenantLoadBalancer:
        """Create the request, or replace its spec, labels and annotations; the stored
        object (with its generation) comes back."""
        body = dump(request.model_copy(update={"status": None}))
        namespace = request.namespace
        for _ in range(5):
            try:
                return _parse_request(await self.client.create(TENANT_LOAD_BALANCERS, body))
            except AlreadyExists:
                pass
            try:
                current = await self.client.get(TENANT_LOAD_BALANCERS, request.name, namespace)
            except NotFound:
                continue
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                return _parse_request(await self.client.replace(TENANT_LOAD_BALANCERS, body))
            except (Conflict, NotFound):
                continue
        raise ManagementError(f"TenantLoadBalancer {namespace}/{request.name} keeps changing")

    async def mark_reported(self, namespace: str, lb_id: str, generation: int) -> None:
        """Record that Octavia has the statuses of this generation of the request."""
        patch = {"metadata": {"annotations": {ANNOTATION_REPORTED: str(generation)}}}
        await self.client.patch(
            TENANT_LOAD_BALANCERS, request_name(lb_id), patch, namespace=namespace
        )

    async def delete(self, namespace: str, lb_id: str) -> bool:
        """Delete the load balancer's request; False when there was none."""
        try:
            await self.client.delete(TENANT_LOAD_BALANCERS, request_name(lb_id), namespace)
        except NotFound:
            return False
        return True

    async def write_gateway(
        self,
        namespace: str,
        lb_id: str,
        objects: Sequence[KubeObject],
        *,
        keep_secrets: Collection[str] = (),
    ) -> None:
        """Make the load balancer's gateway objects in `namespace` be `objects` (level-
        triggered: create, replace what changed, delete the rest, found by the label
        `octavia.lb.teapot.io/loadbalancer`). Secrets named in `keep_secrets` stay: their
        PEM comes only with the listener calls that carry it."""
        selector = f"{LABEL_LOADBALANCER}={lb_id}"
        current: dict[tuple[str, str], KubeObject] = {}
        for res in GATEWAY_RESOURCES:
            found = await self.client.list(res, namespace=namespace, label_selector=selector)
            for item in found.items:
                current[(res.kind, item["metadata"]["name"])] = item
        order = {res.kind: i for i, res in enumerate(GATEWAY_RESOURCES)}
        resources = {res.kind: res for res in GATEWAY_RESOURCES}
        wanted: set[tuple[str, str]] = set()
        for body in sorted(objects, key=lambda b: order[b["kind"]]):
            key = (body["kind"], body["metadata"]["name"])
            wanted.add(key)
            annotations = body["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION_DIGEST] = digest(body)
            old = current.get(key)
            if old is None:
                try:
                    await self.client.create(resources[body["kind"]], body)
                    continue
                except AlreadyExists:
                    old = await self.client.get(resources[body["kind"]], key[1], namespace)
            if current_digest(old) == annotations[ANNOTATION_DIGEST]:
                continue
            body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            await self.client.replace(resources[body["kind"]], body)
        for kind, name in sorted(current, key=lambda k: -order[k[0]]):
            if (kind, name) in wanted or (kind == SECRETS.kind and name in keep_secrets):
                continue
            with contextlib.suppress(NotFound):
                await self.client.delete(resources[kind], name, namespace)

    async def answer(self, written: TenantLoadBalancer) -> Answer:
        """The manager's answer to this generation of the request (its status conditions
        observed it), watched for at most `answer_within_s`."""
        generation = written.metadata.generation or 0
        name, namespace = written.name, written.namespace

        def current(request: TenantLoadBalancer) -> Answer | None:
            return answer_to(request, generation)

        try:
            async with asyncio.timeout(self.answer_within_s):
                while True:
                    obj = await self.client.get(TENANT_LOAD_BALANCERS, name, namespace)
                    found = current(_parse_request(obj))
                    if found is not None:
                        return found
                    events = self.client.watch(
                        TENANT_LOAD_BALANCERS,
                        namespace=namespace,
                        resource_version=obj["metadata"]["resourceVersion"],
                        field_selector=f"metadata.name={name}",
                        timeout_s=self.answer_within_s,
                        bookmarks=False,
                    )
                    async for event in events:
                        if event.type in ("ADDED", "MODIFIED"):
                            found = current(_parse_request(event.object))
                            if found is not None:
                                return found
        except TimeoutError:
            raise ManagementError(
                f"the teapot-lb manager did not answer TenantLoadBalancer "
                f"{namespace}/{name} (generation {generation}) within "
                f"{self.answer_within_s:g} s"
            ) from None


class LoopThread:
    """An asyncio loop in a daemon thread, for a synchronous caller (Octavia's API)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="teapot-octavia", daemon=True
        )
        self._thread.start()
        self._locks: dict[str, asyncio.Lock] = {}

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float) -> T:
        """Run `coro` on the loop and wait for its result (at most `timeout` seconds)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def submit(
        self, key: str, job: Callable[[], Awaitable[None]]
    ) -> concurrent.futures.Future[None]:
        """Run `job` on the loop after every job submitted earlier with the same key."""

        async def serialized() -> None:
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                try:
                    await job()
                except Exception as err:  # a job reports its own failures; this is the last net
                    _log.error("job failed", key=key, error=repr(err))
                    raise

        return asyncio.run_coroutine_threadsafe(serialized(), self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=5)


__all__ = ["LoopThread", "Management", "ManagementError"]
