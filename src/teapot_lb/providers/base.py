"""The contract of a provider (see docs/teapot.md, "Providers").

The manager vets a request and assigns its addresses (:mod:`teapot_lb.tenancy.book`); the
request's provider then builds the load balancer from a :class:`LoadBalancerSpec` and says
how far it got in a :class:`ProviderStatus`, which the manager writes into the request's
`Programmed` condition. The rules a provider keeps:

- **Pure refusals first.** :meth:`Provider.refuse` says, without I/O, what of a request the
  provider cannot build (a protocol, a policy, an option), naming the field; the manager
  refuses the request at vetting with those words, before any address is taken.
- **Idempotent and level-triggered.** :meth:`Provider.ensure` is called with the whole
  wanted state, again and again (on every change, after an error, on a restart): it
  converges what exists onto it and creates nothing twice. It finds its objects by the
  ownership tag before creating one, so an answer that came late or a manager killed
  mid-call never leaves a duplicate.
- **Ownership by tag.** Every object a provider creates carries :func:`owner_tag` of the
  request's uid; :meth:`Provider.sweep` deletes the objects carrying a tag of this
  manager whose uid no request wants, and never an object without one.
- **Errors are statuses.** A provider that cannot reach its API, or is answered with an
  error, returns a status with `phase` ERROR, the operator's message, a message for the
  tenant, and `retry_after`; it raises only for bugs.
- **Two audiences.** A status's `message` is the operator's (it may name the provider's
  endpoint, its object ids, the cloud's project): it goes where no tenant reads, an Event
  on the cluster-scoped Tenant. Its `tenant_message` is the request's `Programmed`
  message (the request is in the tenant's namespace, which the tenant's agent reads) and
  is relayed to the tenant's Service: what happened to *their* load balancer and what
  they can do, naming only what is the tenant's own (its addresses, its nodes' addresses
  and ports). A status without one shows the tenant the plain sentence of its phase
  (:func:`tenant_words`), never the operator's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol as TypingProtocol

from teapot_lb.addresses import IPAddress
from teapot_lb.model.service import Protocol
from teapot_lb.model.tenancy import REASON_DEGRADED, Tenant, TenantLoadBalancer

TAG_PREFIX = "teapot-lb:"


def owner_tag(uid: str) -> str:
    """The tag every object built for the request of `uid` carries."""
    return f"{TAG_PREFIX}{uid}"


@dataclass(frozen=True)
class Member:
    """One backend of a listener: a tenant node at a port."""

    node: str
    address: IPAddress
    port: int
    """The Service's nodePort (or the pod's port where pods are routed)."""


@dataclass(frozen=True)
class Listener:
    """One port of the load balancer and where its traffic goes."""

    protocol: Protocol
    port: int
    members: tuple[Member, ...]
    """With `externalTrafficPolicy: Local`, only the nodes holding a ready endpoint."""
    health_check_port: int | None = None
    """`externalTrafficPolicy: Local`: the Service's healthCheckNodePort (HTTP /healthz)."""


@dataclass(frozen=True)
class LoadBalancerSpec:
    """What one vetted request wants built."""

    key: str
    """The TenantLoadBalancer's "namespace/name"."""
    uid: str
    """Its metadata.uid: the ownership tag of everything built for it."""
    tenant: str
    addresses: tuple[IPAddress, ...]
    """The addresses the manager assigned (primary family first): the VIPs."""
    listeners: tuple[Listener, ...]


class Phase(StrEnum):
    PROVISIONING = "Provisioning"
    """Being built or changed: ask again after `retry_after`."""
    ACTIVE = "Active"
    """Built as wanted and serving."""
    ERROR = "Error"
    """Could not be built now (API unreachable, an error answer): retried after `retry_after`."""


@dataclass(frozen=True)
class ProviderStatus:
    """How far a provider got: the request's `Programmed` condition."""

    phase: Phase
    reason: str
    """The condition's reason, CamelCase (e.g. "Provisioning", "OctaviaUnreachable")."""
    message: str
    """What the operator reads (an Event on the Tenant, when the request's `Programmed`
    changes; the manager's log at every error): what happened, what is tried next, with
    the provider's own detail."""
    retry_after: float | None = None
    """Call ensure again after this many seconds (None: when something changes)."""
    tenant_message: str | None = None
    """The request's `Programmed` message and what the tenant's Service is told (see the
    module's doc): never an endpoint, URL,
    project or object id, token, a row of the provider's own, nor anything of another
    tenant. None: the plain sentence of the phase (:func:`tenant_words`)."""


def tenant_words(status: ProviderStatus) -> str | None:
    """What the tenant is told of `status`: its `tenant_message`, else the sentence of its
    phase; None while it is being built (the Service has its address already, and
    nothing went wrong to tell)."""
    if status.phase is Phase.PROVISIONING:
        return None
    if status.tenant_message:
        return status.tenant_message
    if status.phase is Phase.ERROR:
        return (
            f"the load balancer could not be built yet: the operator's provider reported "
            f"{status.reason}; it is retried, ask the operator if this lasts"
        )
    if status.reason == REASON_DEGRADED:
        return "the load balancer serves, but some of its backends are out of service"
    return "the load balancer is built and serves"


class Provider(TypingProtocol):
    """A kind of load balancer the manager can have a request built on."""

    name: str
    """The name Tenants list and requests ask for (e.g. "octavia")."""

    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        """What of `request` this provider cannot build, each naming the field (pure)."""
        ...

    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        """Converge what exists for `spec.uid` onto `spec` (idempotent)."""
        ...

    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        """Remove everything built for `uid`; None once nothing is left (idempotent)."""
        ...

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        """Delete this provider's objects whose owner uid is not in `wanted` (uid → key);
        what was deleted, for the log. Never touches an object without an owner tag."""
        ...
