"""The relay on a management cluster: Tenants, TenantNodes, AddressPools, BGPPeers and
Secrets from the API (the speaker's informers,
:class:`~teapot_lb.speaker.kube_source.KubeSource`, on these kinds only), and the relay's
events as Events on the Tenant.

Level-triggered: informers only wake the loop, which hands the whole consistent view to
:meth:`Relay.apply` (changes are coalesced while it runs).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.httpserve.server import Check
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.events import EventKind, EventRecorder
from teapot_lb.model.kinds import KINDS, Kind
from teapot_lb.speaker.kube_source import KubeSource
from teapot_lb.tenancy.request import RELAY_COMPONENT, node_event_ref

from .relay import Relay, RelayEvent

# What the relay reads, and nothing else (its RBAC grants just these: deploy/teapot/relay.yaml):
# Tenants and the TenantNodes their agents publish; AddressPools, BGPPeers and Secrets in the
# configuration namespace.
RELAY_KINDS = tuple(
    info
    for info in KINDS
    if info.kind in (Kind.TENANT, Kind.ADDRESS_POOL, Kind.BGP_PEER, Kind.SECRET) or info.relay
)


class TenantEvents:
    """A :class:`RelayEvent` as an Event on its Tenant (none for an address of no Tenant:
    that one is a log line and a metric); one about a tenant node's session also in the
    tenant's namespace (:func:`~teapot_lb.tenancy.request.node_event_ref`), where its
    agents read it and tell the tenant on that Node."""

    def __init__(self, recorder: EventRecorder, store: Store) -> None:
        self.recorder = recorder
        self.store = store
        self._tasks: set[asyncio.Task[bool]] = set()

    def __call__(self, event: RelayEvent) -> None:
        tenant = self.store.view().tenants.get(event.tenant) if event.tenant else None
        if tenant is None:
            return
        involved: dict[str, Any] = {
            "apiVersion": tenant.api_version,
            "kind": "Tenant",
            "metadata": {"name": tenant.name, "uid": tenant.metadata.uid or ""},
        }
        kind = EventKind.WARNING if event.warning else EventKind.NORMAL
        self._record(involved, kind, event)
        if event.address:
            self._record(node_event_ref(tenant.spec.namespace, event.address), kind, event)

    def _record(self, involved: dict[str, Any], kind: EventKind, event: RelayEvent) -> None:
        task = asyncio.get_running_loop().create_task(
            self.recorder.record(involved, kind, event.reason, event.message)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def follow_cluster(
    relay: Relay,
    client: KubeClient,
    *,
    config_namespace: str | None = None,
    readiness: list[Check] | None = None,
) -> None:
    """Keep ``relay`` on the cluster's view, and its events on the Tenants, until cancelled
    (`readiness`: where to add why the relay is not ready, its caches)."""
    store = Store()
    wake = asyncio.Event()
    source = KubeSource(
        client, store, wake.set, config_namespace=config_namespace, kinds=RELAY_KINDS
    )
    if readiness is not None:
        hint = (
            f"the relay reads AddressPools and BGPPeers in namespace {config_namespace!r}"
            " (--config-namespace) and Tenants, through --kubeconfig or the pod's ServiceAccount"
        )
        readiness.append(partial(source.readiness, hint))
    relay.on_event = TenantEvents(EventRecorder(client, RELAY_COMPONENT), store)
    logger = log.get("teapot_lb.relay")
    async with asyncio.TaskGroup() as group:
        group.create_task(source.run(), name="relay-informers")
        while True:
            await wake.wait()
            wake.clear()
            await relay.apply(store.view())
            for text in relay.problems:
                logger.warning("relay configuration problem", problem=text)
