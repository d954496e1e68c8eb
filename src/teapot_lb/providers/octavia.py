"""The ``octavia`` provider: a tenant's load balancer built by OpenStack Octavia (the
``ovn`` provider by default, on the cloud's OVN), through openstacksdk.

One Octavia project per Tenant (the config's ``tenants`` map: the reverse of the label
``octavia.lb.teapot.io/project`` the teapot driver reads, :mod:`teapot_lb.octavia.mapping`).
Everything built carries :func:`~teapot_lb.providers.base.owner_tag` of the request's uid
in Octavia's ``tags``: ensure finds the load balancer by it before making one, delete and
sweep delete by it. The tree is planned by :mod:`.octavia_plan` (pure); this module only
reads Octavia, makes the planned calls one after the other (each puts the load balancer in
PENDING_UPDATE) and turns what it saw into a :class:`ProviderStatus`. openstacksdk is
synchronous: every call runs in a thread (``asyncio.to_thread``); the waits between calls
are the event loop's. openstacksdk is imported only when a provider is loaded (the extra
``teapot-lb[openstack]``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.addresses import IPFamilyPolicy
from teapot_lb.model.tenancy import REASON_DEGRADED, Tenant, TenantLoadBalancer
from teapot_lb.providers.base import (
    TAG_PREFIX,
    LoadBalancerSpec,
    Phase,
    ProviderStatus,
    owner_tag,
)
from teapot_lb.providers.octavia_config import AuthType, OctaviaConfig, read
from teapot_lb.providers.octavia_plan import (
    OUT_OF_SERVICE,
    Existing,
    Step,
    Wanted,
    create,
    delete_load_balancer,
    existing,
    out_of_service,
    plan,
    wanted,
)

_log = log.get("providers.octavia")

NAME = "octavia"
POLL_S = 0.25  # between two looks at a load balancer that is PENDING_*


class OctaviaError(Exception):
    """Octavia could not be asked, or said no: `reason` is the condition's reason."""

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.status = status


def _fault(response: Any) -> str:
    """Octavia's own words in an error answer (its ``faultstring``), else the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("faultstring", "description", "message"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return (response.text or response.reason or "").strip()[:300]


class OctaviaAPI:
    """Octavia's REST API through an openstacksdk connection (synchronous: call it from
    a thread). Every failure is an :class:`OctaviaError`."""

    def __init__(self, config: OctaviaConfig) -> None:
        self.config = config
        self._proxy: Any = None

    def _connect(self) -> Any:
        import openstack  # the extra teapot-lb[openstack]
        import openstack.connection

        timeout = self.config.timeouts.request
        options: dict[str, Any] = {"api_timeout": timeout}
        auth = self.config.auth
        if auth is None:
            conn = openstack.connect(cloud=self.config.cloud, **options)
        elif auth.type is AuthType.NOAUTH:
            conn = openstack.connection.Connection(
                auth_type="none",
                auth={"endpoint": auth.endpoint},
                load_balancer_endpoint_override=auth.endpoint,
                **options,
            )
        else:
            if auth.endpoint:
                options["load_balancer_endpoint_override"] = auth.endpoint
            if auth.region:
                options["region_name"] = auth.region
            conn = openstack.connection.Connection(
                auth_type="password",
                auth={
                    "auth_url": auth.auth_url,
                    "username": auth.username,
                    "password": auth.password,
                    "project_name": auth.project_name,
                    "user_domain_name": auth.user_domain_name,
                    "project_domain_name": auth.project_domain_name,
                },
                **options,
            )
        return conn.load_balancer

    def _where(self) -> str:
        auth = self.config.auth
        if auth is None:
            return f"cloud {self.config.cloud}"
        return auth.endpoint or auth.auth_url or "?"

    def request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:  # fmt: skip
        """The answer's JSON (None for an empty one); 404 on a DELETE is no error."""
        from keystoneauth1 import exceptions as ks

        try:
            if self._proxy is None:
                self._proxy = self._connect()
            response = self._proxy.request(path, method, json=body, params=params,
                                           raise_exc=False)  # fmt: skip
        except (ks.ConnectionError, ks.DiscoveryFailure, ks.EndpointNotFound) as err:
            self._proxy = None  # (discovery is made again on the next call)
            where = self._where()
            raise OctaviaError(
                "OctaviaUnreachable", f"Octavia at {where} cannot be reached: {err}"
            ) from None
        except ks.ClientException as err:
            self._proxy = None
            raise OctaviaError("OctaviaUnreachable",
                               f"Octavia at {self._where()}: {err}") from None  # fmt: skip
        status = response.status_code
        if status == 404 and method == "DELETE":
            return None
        if status >= 500:
            raise OctaviaError("OctaviaUnavailable",
                               f"Octavia answered {status} to {method} {path}: {_fault(response)}",
                               status)  # fmt: skip
        if status == 409:
            raise OctaviaError("OctaviaBusy", f"Octavia: {_fault(response)}", status)
        if status >= 400:
            raise OctaviaError("OctaviaRefused",
                               f"Octavia refused {method} {path} ({status}): {_fault(response)}",
                               status)  # fmt: skip
        if status == 204 or not response.content:
            return None
        return response.json()

    def listing(self, path: str, key: str, params: Mapping[str, str] | None = None) -> list[Any]:
        """Every item of a listing, page after page."""
        found: list[Any] = []
        query = dict(params or {})
        while True:
            page = self.request("GET", path, params=query) or {}
            items = page.get(key) or []
            found.extend(items)
            nexts = [link for link in page.get(f"{key}_links") or [] if link.get("rel") == "next"]
            if not nexts or not items:
                return found
            query = dict(params or {}) | {"marker": items[-1]["id"]}

    def tagged(self, tag: str) -> list[dict[str, Any]]:
        """The load balancers carrying `tag`, oldest first."""
        lbs = self.listing("/lbaas/loadbalancers", "loadbalancers", {"tags": tag})
        return sorted(lbs, key=lambda lb: (lb.get("created_at") or "", lb["id"]))

    def tree(self, lb: Mapping[str, Any], tag: str) -> Existing:
        """`lb` with its listeners, pools, members and our health monitors."""
        lb_id = lb["id"]
        listeners = self.listing("/lbaas/listeners", "listeners", {"loadbalancer_id": lb_id})
        pools = self.listing("/lbaas/pools", "pools", {"loadbalancer_id": lb_id})
        members = {p["id"]: self.listing(f"/lbaas/pools/{p['id']}/members", "members")
                   for p in pools}  # fmt: skip
        monitors = []
        if any(p.get("healthmonitor_id") for p in pools):
            monitors = self.listing("/lbaas/healthmonitors", "healthmonitors", {"tags": tag})
        return existing(lb, listeners, pools, members, monitors)

    def call(self, step: Step) -> Any:
        return self.request(step.method, step.path, step.body)


@dataclass(frozen=True)
class _Seen:
    """What one look at Octavia found for a uid."""

    lb: dict[str, Any] | None
    """The oldest load balancer with the tag, as Octavia listed it."""
    extra: tuple[str, ...]
    """Further load balancers with the same tag (a create answered late): deleted."""


class OctaviaProvider:
    """Builds a request on Octavia (see the module's doc and docs/octavia.md)."""

    name = NAME

    def __init__(self, config: OctaviaConfig, api: OctaviaAPI | None = None) -> None:
        self.config = config
        self.api = api or OctaviaAPI(config)
        if config.vip_subnet is not None:
            self._vip = {"vip_subnet_id": config.vip_subnet}
        else:
            self._vip = {"vip_network_id": str(config.vip_network)}

    # -- refusals (pure) ------------------------------------------------------------
    def refuse(self, request: TenantLoadBalancer, tenant: Tenant) -> list[str]:
        spec = request.spec
        out = []
        if self.config.project_of(tenant.metadata.name) is None:
            out.append(f"Tenant {tenant.metadata.name} has no Octavia project in the octavia "
                       f"provider's config (tenants.{tenant.metadata.name}.project)")  # fmt: skip
        if len(spec.ip_families) > 1 or spec.ip_family_policy is IPFamilyPolicy.REQUIRE_DUAL_STACK:
            out.append("spec.ipFamilies: the octavia provider builds one address family per "
                       "load balancer (one VIP subnet); ask for SingleStack")  # fmt: skip
        if spec.sharing_key is not None:
            out.append("spec.sharingKey: Octavia gives every load balancer a VIP port of "
                       "its own; two load balancers cannot share an address")  # fmt: skip
        if spec.load_balancer_source_ranges:
            out.append("spec.loadBalancerSourceRanges: the octavia provider does not set "
                       "listeners' allowed_cidrs (the OVN provider refuses them), and the "
                       "tenant's kube-proxy filters only traffic addressed to the load "
                       "balancer's IP, not what Octavia delivers to the nodePort; remove "
                       "loadBalancerSourceRanges or use provider route")  # fmt: skip
        return out

    # -- ensure -----------------------------------------------------------------------
    async def ensure(self, spec: LoadBalancerSpec) -> ProviderStatus:
        project = self.config.project_of(spec.tenant)
        if project is None:
            return ProviderStatus(Phase.ERROR, "NoOctaviaProject",
                                  f"Tenant {spec.tenant} has no Octavia project in the octavia "
                                  f"provider's config (tenants.{spec.tenant}.project)",
                                  tenant_message=_TENANT_NOT_SET_UP)  # fmt: skip
        if not spec.addresses:
            return ProviderStatus(Phase.ERROR, "NoAddress", "no address assigned yet",
                                  self.config.timeouts.error,
                                  "the load balancer has no address yet; retrying")  # fmt: skip
        want = wanted(spec, project, self.config.health_monitor)
        try:
            return await self._converge(spec, want)
        except OctaviaError as err:
            return self._failed(spec.key, err)

    async def _converge(self, spec: LoadBalancerSpec, want: Wanted) -> ProviderStatus:
        timeouts = self.config.timeouts
        deadline = time.monotonic() + timeouts.settle
        monitor = self.config.health_monitor
        subnet = self._member_subnet(spec.tenant)
        steps_made = 0
        while True:
            seen = await asyncio.to_thread(self._look, want.tag)
            for extra in seen.extra:  # the oldest is kept
                await asyncio.to_thread(self.api.call, delete_load_balancer(extra, "a duplicate"))
                _log.warning("octavia duplicate deleted", request=spec.key, lb=extra)
            if seen.lb is None:
                step = create(want, self.config.provider, self._vip, subnet, monitor)
                await asyncio.to_thread(self.api.call, step)
                _log.info("octavia step", request=spec.key, step=step.what)
                steps_made += 1
                continue
            lb = existing(seen.lb)
            if lb.pending:
                if time.monotonic() >= deadline:
                    return self._provisioning(lb, steps_made)
                await asyncio.sleep(POLL_S)
                continue
            if lb.provisioning_status == "ERROR":
                await asyncio.to_thread(self.api.call, delete_load_balancer(lb.id, "in ERROR"))
                return ProviderStatus(Phase.ERROR, "OctaviaError",
                                      f"Octavia load balancer {lb.id} went to provisioning status "
                                      f"ERROR (operating status {lb.operating_status}); it is "
                                      "deleted and built again on the next try",
                                      timeouts.error, _TENANT_REBUILT)  # fmt: skip
            full = await asyncio.to_thread(self.api.tree, seen.lb, want.tag)
            steps = plan(want, full, subnet, monitor)
            if not steps:
                return self._active(full, want, spec)
            if time.monotonic() >= deadline:
                return self._provisioning(lb, steps_made)
            await asyncio.to_thread(self.api.call, steps[0])
            _log.info("octavia step", request=spec.key, lb=lb.id, step=steps[0].what)
            steps_made += 1

    def _look(self, tag: str) -> _Seen:
        found = self.api.tagged(tag)
        if not found:
            return _Seen(None, ())
        return _Seen(found[0], tuple(other["id"] for other in found[1:]))

    def _member_subnet(self, tenant: str) -> str | None:
        entry = self.config.tenants.get(tenant)
        if entry is not None and entry.member_subnet is not None:
            return entry.member_subnet
        return self.config.vip_subnet

    def _provisioning(self, lb: Existing, steps: int) -> ProviderStatus:
        return ProviderStatus(Phase.PROVISIONING, "Provisioning",
                              f"Octavia load balancer {lb.id} is {lb.provisioning_status} "
                              f"({steps} changes sent in this round)",
                              self.config.timeouts.pending)  # fmt: skip

    def _active(self, lb: Existing, want: Wanted, spec: LoadBalancerSpec) -> ProviderStatus:
        notes = _notes(lb, want, spec, self.config.health_monitor.enabled)
        members = sum(len(li.members) for li in want.listeners)
        message = (f"Octavia load balancer {lb.id} ({self.config.provider}) is ACTIVE at "
                   f"{lb.vip_address}: {len(want.listeners)} listeners, {members} members, "
                   f"operating status {lb.operating_status}")  # fmt: skip
        ports = ", ".join(f"{li.port}/{li.protocol}" for li in want.listeners) or "no ports"
        told = f"the load balancer serves {want.vip_address} ({ports})"
        down = out_of_service(lb)
        return ProviderStatus(Phase.ACTIVE, REASON_DEGRADED if down else "Active",
                              "; ".join([message, *(ours for ours, _ in notes)]),
                              tenant_message="; ".join([told, *(its for _, its in notes)]),
                              )  # fmt: skip

    def _failed(self, key: str, err: OctaviaError) -> ProviderStatus:
        _log.warning("octavia error", request=key, reason=err.reason, error=err.message)
        if err.reason == "OctaviaBusy":  # (a change raced another: look again soon)
            return ProviderStatus(Phase.PROVISIONING, "Provisioning", err.message,
                                  self.config.timeouts.pending)  # fmt: skip
        return ProviderStatus(Phase.ERROR, err.reason,
                              f"{err.message}; tried again in a while",
                              self.config.timeouts.error, _tenant_error(err))  # fmt: skip

    # -- delete and sweep -------------------------------------------------------------
    async def delete(self, key: str, uid: str) -> ProviderStatus | None:
        tag = owner_tag(uid)
        deadline = time.monotonic() + self.config.timeouts.settle
        try:
            while True:
                found = await asyncio.to_thread(self.api.tagged, tag)
                if not found:
                    return None
                for lb in found:
                    status = lb.get("provisioning_status") or ""
                    if not status.startswith("PENDING_"):
                        step = delete_load_balancer(lb["id"], f"request {key} deleted")
                        await asyncio.to_thread(self.api.call, step)
                if time.monotonic() >= deadline:
                    return ProviderStatus(Phase.PROVISIONING, "Deleting",
                                          f"Octavia is deleting {len(found)} load balancers of "
                                          f"{key}", self.config.timeouts.pending)  # fmt: skip
                await asyncio.sleep(POLL_S)
        except OctaviaError as err:
            return self._failed(key, err)

    async def sweep(self, wanted: Mapping[str, str]) -> list[str]:
        try:
            lbs = await asyncio.to_thread(self.api.listing, "/lbaas/loadbalancers", "loadbalancers")
        except OctaviaError as err:
            _log.warning("octavia sweep failed", reason=err.reason, error=err.message)
            return []
        deleted = []
        for lb in lbs:
            uids = [t.removeprefix(TAG_PREFIX) for t in lb.get("tags") or []
                    if t.startswith(TAG_PREFIX)]  # fmt: skip
            if not uids or any(uid in wanted for uid in uids):
                continue
            if (lb.get("provisioning_status") or "").startswith("PENDING_"):
                continue  # (being deleted already, or still being made: the next sweep)
            step = delete_load_balancer(lb["id"], f"owner {uids[0]} wanted by no request")
            try:
                await asyncio.to_thread(self.api.call, step)
            except OctaviaError as err:
                _log.warning("octavia sweep failed", lb=lb["id"], reason=err.reason,
                             error=err.message)  # fmt: skip
                continue
            _log.info("octavia swept", lb=lb["id"], owner=uids[0])
            deleted.append(f"{lb['id']} ({uids[0]})")
        return deleted


# What the tenant's Service is told (ProviderStatus.tenant_message): its own load
# balancer, addresses, nodes and ports only; never Octavia's endpoint, ids or project.
_TENANT_NOT_SET_UP = (
    "the load balancer cannot be built: the operator has not set this tenant up for the "
    "octavia provider yet; ask the operator, or use another provider "
    "(annotation lb.teapot.io/provider)"
)
_TENANT_REBUILT = (
    "the operator's load-balancer service failed to build the load balancer; it is "
    "built again, retrying"
)
_TENANT_ERRORS = {
    "OctaviaUnreachable": "the operator's load-balancer service is unreachable",
    "OctaviaUnavailable": "the operator's load-balancer service answered with an error",
    "OctaviaRefused": "the operator's load-balancer service refused a change",
}


def _tenant_error(err: OctaviaError) -> str:
    """Octavia's failure as the tenant reads it (its text names Octavia's endpoint and ids:
    only the kind of failure and the HTTP status are told)."""
    what = _TENANT_ERRORS.get(err.reason, "the operator's load-balancer service failed")
    if err.status is not None:
        what += f" (HTTP {err.status})"
    return (
        f"the load balancer could not be built or changed yet: {what}; retrying, "
        "ask the operator if this lasts"
    )


def _notes(
    lb: Existing, want: Wanted, spec: LoadBalancerSpec, monitored: bool
) -> list[tuple[str, str]]:
    """What is worth saying of an Active load balancer: (the operator's words, the
    tenant's), the tenant's naming only its own backends (node address:nodePort)."""
    notes = []
    down = out_of_service(lb)
    if down:
        backends = sorted({(str(m.address), m.port, m.node) for li in want.listeners
                           for m in li.members})  # fmt: skip
        failed = {(m.address, m.port) for pool in lb.pools for m in pool.members
                  if m.operating_status in OUT_OF_SERVICE}  # fmt: skip
        failing = [f"{address}:{port} ({node})" for address, port, node in backends
                   if (address, port) in failed]  # fmt: skip
        told = "some backends fail their health check and get no new connections"
        if failing:  # (else members left from an earlier spec)
            told = (f"{len(failing)} of {len(backends)} backends fail their health check and "
                    f"get no new connections: {', '.join(failing)}; look at the Service's "
                    "pods on those nodes")  # fmt: skip
        notes.append((f"out of service (their health monitor's probes fail): {', '.join(down)}",
                      told))  # fmt: skip
    if len(spec.addresses) > 1:
        notes.append((f"only {want.vip_address} is its VIP (one address family per Octavia "
                       "load balancer here)",
                       f"only {want.vip_address} is served: this provider builds one address "
                       "family per load balancer"))  # fmt: skip
    if want.left_out:
        left_out = ", ".join(want.left_out)
        notes.append((f"members of another address family left out (OVN does not mix them): "
                       f"{left_out}",
                       f"backends of another address family are left out: {left_out}"))  # fmt: skip
    checked = sorted({li.health_check_port for li in spec.listeners if li.health_check_port})
    if checked and monitored:
        ports = ", ".join(map(str, checked))
        notes.append((f"healthCheckNodePort {ports} is not probed (Octavia's monitor probes "
                      "each member's own port; with externalTrafficPolicy Local the members "
                      "are the nodes with a ready endpoint)",
                      f"healthCheckNodePort {ports} is not probed: each backend's own "
                      "nodePort is"))  # fmt: skip
    return notes


def load(path_or_mapping: Path | str | Mapping[str, Any]) -> OctaviaProvider:
    """The provider from its config file (or mapping); :class:`ConfigError` names what is
    wrong with it."""
    return OctaviaProvider(read(path_or_mapping))


__all__ = ["NAME", "OctaviaAPI", "OctaviaError", "OctaviaProvider", "load"]
