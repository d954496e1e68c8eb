"""An in-memory external provider that keeps the contract of `teapot_lb.providers.base`
(find by tag before create, a build that takes a call to become Active, a delete that
takes two calls, a sweep by tag that never touches an untagged object), for the tests of
the manager's and the agent's side of it.

Its operator's messages name its management-side detail (:data:`ENDPOINT`, the tenant's
project, its own object ids), as a real provider's do; its tenant messages name only the
tenant's own addresses, nodes and ports.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from teapot_lb.model.service import Protocol
from teapot_lb.model.tenancy import REASON_DEGRADED, Tenant, TenantLoadBalancer
from teapot_lb.providers.base import (
    TAG_PREFIX,
    LoadBalancerSpec,
    Phase,
    ProviderStatus,
    owner_tag,
)

ENDPOINT = "https://memlb.mgmt.example:9876/v2"
"""Where the operator's memlb API is: no tenant may ever read it."""
UNREACHABLE = (
    "the load balancer could not be built yet: the operator's load-balancer service is "
    "unreachable; retrying"
)


def project(tenant: str) -> str:
    """The tenant's project in memlb (the operator's mapping, never told the tenant)."""
    return f"project-of-{tenant}"


@dataclass
class Built:
    tag: str | None
    spec: LoadBalancerSpec | None = None
    state: str = "PENDING_CREATE"


@dataclass
class MemoryLB:
    """An in-memory load-balancer API behind a provider that keeps the contract."""

    name: str = "memlb"
    objects: dict[str, Built] = field(default_factory=dict)
    down: bool = False  # the API answers with an error
    failing: frozenset[str] = frozenset()
    """Nodes whose members fail their health check (the load balancer is Degraded)."""
    ensured: list[LoadBalancerSpec] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    creates: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        return [
            f"spec.ports[{i}].protocol: UDP is not supported by memlb"
            for i, port in enumerate(request.spec.ports)
            if port.protocol is Protocol.UDP
        ]

    def _find(self, uid: str) -> str | None:
        return next((i for i, b in self.objects.items() if b.tag == owner_tag(uid)), None)

    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        self.ensured.append(spec)
        if self.down:
            return ProviderStatus(
                Phase.ERROR,
                "MemUnreachable",
                f"memlb API at {ENDPOINT} (project {project(spec.tenant)}): connection refused",
                retry_after=0.05,
                tenant_message=UNREACHABLE,
            )
        found = self._find(spec.uid)
        if found is None:
            found = f"lb-{next(self._ids)}"
            self.creates += 1
            self.objects[found] = Built(owner_tag(spec.uid), spec)
            return ProviderStatus(
                Phase.PROVISIONING, "Provisioning", f"{found} being created", retry_after=0.05
            )
        built = self.objects[found]
        built.spec, built.state = spec, "ACTIVE"
        ips = ", ".join(str(ip) for ip in spec.addresses)
        members = sorted({m for li in spec.listeners for m in li.members}, key=str)
        down = [m for m in members if m.node in self.failing]
        if down:
            named = ", ".join(f"{m.node} ({m.address} port {m.port}) ERROR" for m in down)
            told = ", ".join(f"{m.address}:{m.port} ({m.node})" for m in down)
            return ProviderStatus(
                Phase.ACTIVE,
                REASON_DEGRADED,
                f"memlb {found} at {ENDPOINT} serves {ips}; out of service: {named}",
                tenant_message=f"the load balancer serves {ips}; {len(down)} of "
                f"{len(members)} backends fail their health check: {told}",
            )
        return ProviderStatus(
            Phase.ACTIVE,
            "Active",
            f"memlb {found} serves {ips}",
            tenant_message=f"the load balancer serves {ips}",
        )

    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        self.deletes.append(uid)
        found = self._find(uid)
        if found is None:
            return None
        if self.objects[found].state != "PENDING_DELETE":
            self.objects[found].state = "PENDING_DELETE"
            return ProviderStatus(Phase.PROVISIONING, "Deleting", found, retry_after=0.05)
        del self.objects[found]
        return None

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        gone = [
            i
            for i, b in self.objects.items()
            if b.tag is not None
            and b.tag.startswith(TAG_PREFIX)
            and b.tag.removeprefix(TAG_PREFIX) not in wanted
        ]
        for i in gone:
            del self.objects[i]
        return gone
