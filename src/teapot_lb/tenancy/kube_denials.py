"""What the management cluster's API server refused to store for a tenant agent (a webhook
denial of a load-balancer request or of a gateway mirror), recorded as Warning Events in
the tenant's management namespace, about the object that was not stored.

The manager counts them in the Tenant's status (`REFUSED`), and deletes them when the
Tenant changes: an agent then writes those objects again (the Tenant may now allow them),
and not before, unless the object itself changes. One refusal per object: the latest.
Events about a load-balancer request and about a mirror are told apart by the involved
object's kind, and those of another cluster of the tenant by the reporting instance.
"""

from __future__ import annotations

from collections.abc import Callable

from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.events import EventRecorder
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.resources import EVENTS, KubeObject, object_key
from teapot_lb.tenancy.request import AGENT_COMPONENT


class Denials:
    """`informer`: Events of :data:`~teapot_lb.tenancy.request.DENIALS_SELECTOR` in
    `namespace` (run by the agent). Holds what was refused as it was asked, by (kind,
    name), until the object asks for something else or the manager clears its refusal;
    then `listeners` are called with what had been refused (to enqueue it again)."""

    def __init__(
        self, management: KubeClient, cluster: str, namespace: str, informer: Informer
    ) -> None:
        self.management = management
        self.cluster = cluster
        self.namespace = namespace
        self.informer = informer
        self.recorder = EventRecorder(management, AGENT_COMPONENT, instance=cluster)
        self.listeners: list[Callable[[KubeObject], None]] = []
        self._denied: dict[tuple[str, str], KubeObject] = {}
        self._clearing: set[str] = set()  # Events we delete ourselves (no retry)
        informer.add_handler(self._on_event)

    def held(self, kind: str, name: str) -> KubeObject | None:
        """What the API server refused for this object, while it is not to be written
        again as it was (None: nothing held)."""
        return self._denied.get((kind, name))

    def held_keys(self) -> set[tuple[str, str]]:
        return set(self._denied)

    def events(self, kind: str, name: str) -> list[KubeObject]:
        """This cluster's recorded refusals of the object `kind`/`name`."""
        return [
            e
            for e in self.informer.list_objects()
            if _about(e) == (kind, name) and e.get("reportingInstance") == self.cluster
        ]

    def recorded(self) -> set[tuple[str, str]]:
        """Every (kind, name) this cluster has a recorded refusal of."""
        return {
            _about(e)
            for e in self.informer.list_objects()
            if e.get("reportingInstance") == self.cluster
        }

    async def deny(self, body: KubeObject, refusal: tuple[str, str]) -> None:
        """The API server refused to store `body`: held, and recorded unless it is the
        refusal recorded (replacing an older one)."""
        kind, name = str(body.get("kind", "")), str(body["metadata"]["name"])
        self._denied[(kind, name)] = body
        if any((e.get("reason"), e.get("message")) == refusal for e in self.events(kind, name)):
            return
        await self._delete_events(kind, name)
        involved = {
            "apiVersion": body.get("apiVersion", ""),
            "kind": kind,
            "metadata": {"name": name, "namespace": self.namespace},
        }
        await self.recorder.record(involved, "Warning", *refusal)

    async def clear(self, kind: str, name: str) -> None:
        """The object is stored now, or no longer wanted: its refusal goes."""
        if self._denied.pop((kind, name), None) is not None or self.events(kind, name):
            await self._delete_events(kind, name)

    async def _delete_events(self, kind: str, name: str) -> None:
        for event in self.events(kind, name):
            meta = event["metadata"]
            key = object_key(meta["namespace"], meta["name"])
            self._clearing.add(key)
            try:
                await self.management.delete(EVENTS, meta["name"], meta["namespace"])
            except NotFound:
                self._clearing.discard(key)

    def _on_event(self, event: EventType, key: str, obj: KubeObject) -> None:
        """A refusal someone else deleted (the manager: the Tenant changed): what it
        refused may be written again."""
        if event is not EventType.DELETED:
            return
        if key in self._clearing:
            self._clearing.discard(key)
            return
        refused = self._denied.pop(_about(obj), None)
        if refused is not None:
            for listener in self.listeners:
                listener(refused)


def _about(event: KubeObject) -> tuple[str, str]:
    involved = event.get("involvedObject") or {}
    return str(involved.get("kind", "")), str(involved.get("name", ""))


__all__ = ["Denials"]
