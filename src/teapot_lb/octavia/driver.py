"""The teapot provider driver: octavia-lib's `ProviderDriver` over the management API.

Octavia's API calls each method synchronously, inside its database transaction. The
driver answers at once what it can decide alone: it finds the project's Tenant, reads the
load balancer's last tree from its TenantLoadBalancer, edits it with the call, and
refuses unsupported options (`UnsupportedOptionError`, naming the option) and what the
manager would refuse anyway (a member outside the tenant's node networks, a mode the
Tenant may not use). The rest runs after the call returns, one job at a time per load
balancer: write the TenantLoadBalancer, wait for the manager's answer, and report the
whole tree's statuses through `DriverLibrary` (a refused change is rolled back and its
object reported ERROR, the load balancer ACTIVE again).

`create_vip_port` is the exception: Octavia needs the VIP in its answer, so the driver
writes the request and waits for the manager's assigned address within the call.

This module and :mod:`.driver_runtime` (what every driver object of one Octavia process
shares) are the only ones that import octavia-lib and oslo.config (present in Octavia's
environment, installed with the `octavia` extra).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from octavia_lib.api.drivers import exceptions as lib_exceptions
from octavia_lib.api.drivers import provider_base
from pydantic import BaseModel

from teapot_lb import log
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.errors import KubeError
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.tenancy import Tenant, TenantMode
from teapot_lb.octavia import tree as t
from teapot_lb.octavia.driver_runtime import fault, runtime
from teapot_lb.octavia.flavor import SUPPORTED, FlavorError, flavor_mode
from teapot_lb.octavia.health import provisioning_only
from teapot_lb.octavia.l7 import (
    gateway_objects,
    gateway_refusals,
    l7_refusals,
    secret_names,
    tls_secrets,
)
from teapot_lb.octavia.management import ManagementError
from teapot_lb.octavia.mapping import (
    ANNOTATION_REPORTED,
    Answer,
    deleted_update,
    desired_request,
    failed_update,
    refusal_text,
    status_update,
    tree_of,
)
from teapot_lb.octavia.tls import certificate_refusals, container_names
from teapot_lb.octavia.unsupported import (
    ID_KEYS,
    ObjectKind,
    Unsupported,
    refusals,
    refusals_in_load_balancer,
    tree_refusals,
)
from teapot_lb.tenancy.vet import Rule, vet

_log = log.get("octavia")

# What the driver checks before the manager does (the rest: quotas, addresses, are the
# manager's to decide with its allocator).
_EARLY_RULES = frozenset({Rule.MODE_NOT_ALLOWED, Rule.BACKEND_NOT_ALLOWED, Rule.INVALID_REQUEST})

Update = dict[str, list[dict[str, str]]]
_REPORT_ATTEMPTS = 8  # ~10 s of backoff: the driver agent's database may be locked a while
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Certificates = Mapping[str, list[Mapping[str, Any]]]
"""TLS containers given with a call, per listener id (their PEM goes to Secrets only)."""


def _refuse(found: Iterable[Unsupported]) -> None:
    found = list(found)
    if found:
        text = "; ".join(str(u) for u in found)
        raise lib_exceptions.UnsupportedOptionError(
            user_fault_string=text, operator_fault_string=text
        )


# A graph create's listeners of these protocols get their L7 policies from the database.
_L7_PROTOCOLS = ("HTTP", "TERMINATED_HTTPS")


def _agent_silent(err: BaseException) -> bool:
    """Whether a DriverLibrary call failed because the driver agent did not answer (its
    socket missing or refusing, no answer in time), not because it answered an error:
    octavia-lib wraps the socket's error in its own exception."""
    if isinstance(err, lib_exceptions.DriverAgentTimeout):
        return True
    inner = err.__cause__ or err.__context__
    return isinstance(inner, (OSError, lib_exceptions.DriverAgentTimeout))


def _dict(obj: Any) -> dict[str, Any]:
    """A provider object (or dictionary) as a dictionary of the attributes it sets."""
    if isinstance(obj, Mapping):
        return dict(obj)
    result: dict[str, Any] = obj.to_dict(recurse=True, render_unsets=False)
    return result


def _with_certificate_hosts(
    lb: t.LoadBalancer, listener_id: str, containers: list[Mapping[str, Any]]
) -> t.LoadBalancer:
    """`lb` with the DNS names of a listener's certificates (which one serves a hostname by
    SNI), when all of them are given."""
    listener = lb.listener(listener_id)
    if listener is None or not containers or len(containers) != listener.certificates:
        return lb
    hosts = tuple(container_names(c) for c in containers)
    return t.put_listener(lb, listener.model_copy(update={"certificate_hosts": hosts}))


def _vip_port_id(lb_id: str) -> str:
    """A stable id for the VIP "port" Octavia records (there is no Neutron port)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"teapot-lb:octavia:vip:{lb_id}"))


class TeapotProviderDriver(provider_base.ProviderDriver):  # type: ignore[misc]
    """teapot-lb as an Octavia provider (`octavia.api.drivers: teapot`)."""

    def __init__(self) -> None:
        super().__init__()
        self._rt = runtime()
        self._rt.maybe_sweep()  # Octavia makes a driver per API call

    # ---------------------------------------------------------------- plumbing

    def _tenant(self, project_id: str) -> Tenant:
        try:
            tenant: Tenant = self._rt.run(self._rt.management.tenant_of_project(project_id))
        except ManagementError as err:
            raise fault(str(err)) from None
        return tenant

    def _current(self, tenant: Tenant, lb_id: str) -> t.LoadBalancer:
        """The load balancer's last tree: from its TenantLoadBalancer, or (none there, as
        after a lost request) rebuilt from Octavia's database."""
        request = self._rt.run(self._rt.management.request(tenant.spec.namespace, lb_id))
        found = tree_of(request) if request is not None else None
        if found is not None:
            return found
        provider = self._rt.lib.get_loadbalancer(lb_id)
        if provider is None:
            raise fault(f"load balancer {lb_id} is not in Octavia's database")
        return t.load_balancer_from_provider(_dict(provider), t.Mode.ROUTE)

    def _project_of_pool(self, pool_id: str) -> tuple[str, str]:
        """(project id, load balancer id) of a pool, from Octavia's database."""
        return self._project_of(ObjectKind.POOL, pool_id, self._rt.lib.get_pool)

    def _project_of(
        self, kind: ObjectKind, ident: str, get: Callable[[str], Any]
    ) -> tuple[str, str]:
        """(project id, load balancer id) of a pool or listener, from Octavia's database."""
        found = get(ident)
        if found is None:
            raise fault(f"{kind.singular} {ident} is not in Octavia's database")
        d = _dict(found)
        lb_id = str(d["loadbalancer_id"])
        project = d.get("project_id")
        if not project:
            lb = self._rt.lib.get_loadbalancer(lb_id)
            project = _dict(lb).get("project_id") if lb is not None else None
        return str(project or ""), lb_id

    def _check(self, tenant: Tenant, lb: t.LoadBalancer) -> None:
        """Refuse now what cannot work: unsupported shapes, and what the manager would
        refuse for the Tenant (its modes, its node networks)."""
        _refuse([*tree_refusals(lb), *l7_refusals(lb)])
        request = desired_request(lb, tenant.spec.namespace)
        early = [
            refusal_text(request, r) for r in vet(request, tenant, {}) if r.rule in _EARLY_RULES
        ]
        early += gateway_refusals(lb, tenant)
        if early:
            text = "; ".join(early)
            raise fault(f"load balancer {lb.id}: refused for Tenant {tenant.name}: {text}")

    def _check_tls(self, tenant: Tenant, listeners: Iterable[Mapping[str, Any]]) -> None:
        """Refuse now a TERMINATED_HTTPS listener's certificate the Tenant cannot serve
        (outside its DNS domains, unparsable, expired), naming the option and reference."""
        found = [text for li in listeners for text in certificate_refusals(li, tenant)]
        if found:
            raise fault(f"refused for Tenant {tenant.name}: {'; '.join(found)}")

    def _change(
        self,
        project_id: str,
        lb_id: str,
        edit: Callable[[t.LoadBalancer], t.LoadBalancer],
        subject: tuple[ObjectKind, str],
        *,
        gone: Iterable[tuple[ObjectKind, str]] = (),
        checked: Iterable[Unsupported] = (),
        certificates: Certificates | None = None,
        tls: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        """One change of a load balancer: refuse now or apply after the call."""
        _refuse(checked)
        tenant = self._tenant(project_id)
        self._check_tls(tenant, tls)
        old = self._current(tenant, lb_id)
        new = edit(old)
        self._check(tenant, new)
        self._submit(tenant, old, new, subject, list(gone), certificates)

    def _submit(
        self,
        tenant: Tenant,
        old: t.LoadBalancer | None,
        new: t.LoadBalancer,
        subject: tuple[ObjectKind, str],
        gone: list[tuple[ObjectKind, str]],
        certificates: Certificates | None = None,
        l7_from_db: list[str] | None = None,
    ) -> None:
        """Apply `new` after the call; `l7_from_db`: listeners whose L7 policies are read
        from Octavia's database first (a graph create)."""
        namespace = tenant.spec.namespace
        for listener_id, containers in (certificates or {}).items():
            new = _with_certificate_hosts(new, listener_id, containers)
        secrets = [
            secret
            for listener_id, containers in (certificates or {}).items()
            for secret in tls_secrets(new, listener_id, containers, namespace)
        ]
        # Octavia's listener create gives the SNI references without their data: those
        # come from its database (through the driver agent) once the call is committed.
        fetch = [
            listener_id
            for listener_id, containers in (certificates or {}).items()
            if (li := new.listener(listener_id)) is not None and li.certificates > len(containers)
        ]

        async def job() -> None:
            lb: t.LoadBalancer | None = new
            if l7_from_db:
                lb = await self._fetch_l7policies(tenant, new, subject, l7_from_db)
            if fetch and lb is not None:
                lb = await self._fetch_certificates(tenant, lb, fetch, secrets)
            if lb is not None:
                await self._apply(tenant, old, lb, subject, gone, secrets)

        self._rt.loop.submit(new.id, job)

    async def _fetch_l7policies(
        self,
        tenant: Tenant,
        lb: t.LoadBalancer,
        subject: tuple[ObjectKind, str],
        listener_ids: list[str],
    ) -> t.LoadBalancer | None:
        """The listeners' L7 policies from Octavia's database, once committed: a graph
        create hands the driver its listeners without them (and Octavia sets a policy's
        redirect pool id in its database only). Checked as in a call; None when refused
        (the load balancer reported in ERROR)."""
        for listener_id in listener_ids:
            await self._committed(lb.id, (ObjectKind.LISTENER, listener_id))
            found = await self._answered("get", lb.id, self._rt.lib.get_listener, listener_id)
            if found is None:
                continue
            policies = _dict(found).get("l7policies") or []
            lb = t.set_l7policies(lb, listener_id, [_dict(p) for p in policies if p])
        try:
            await asyncio.to_thread(self._check, tenant, lb)
        except (lib_exceptions.UnsupportedOptionError, lib_exceptions.DriverError) as err:
            _log.warning("l7 policy refused", lb=lb.id, reason=str(err))
            await self._report(lb.id, subject, failed_update(lb.id, subject))
            return None
        return lb

    async def _fetch_certificates(
        self, tenant: Tenant, lb: t.LoadBalancer, listener_ids: list[str], secrets: list[KubeObject]
    ) -> t.LoadBalancer | None:
        """Add the listeners' Secrets from Octavia's database (their certificates checked as
        in a call) and their names to `lb`; None when one is refused (its listener reported
        in ERROR)."""
        for listener_id in listener_ids:
            subject = (ObjectKind.LISTENER, listener_id)
            await self._committed(lb.id, subject)
            found = await self._answered("get", lb.id, self._rt.lib.get_listener, listener_id)
            d = {"listener_id": listener_id, **(_dict(found) if found is not None else {})}
            refused = await asyncio.to_thread(certificate_refusals, d, tenant)
            containers = t.certificates_in(d)
            if not refused and len(containers) < t.certificate_count(d):
                refused = [f"listener {listener_id}: certificates not readable from Octavia"]
            if refused:
                _log.warning("certificate refused", lb=lb.id, reason="; ".join(refused))
                await self._report(lb.id, subject, failed_update(lb.id, subject))
                return None
            lb = await asyncio.to_thread(_with_certificate_hosts, lb, listener_id, containers)
            names = {s["metadata"]["name"] for s in secrets}
            namespace = tenant.spec.namespace
            secrets += [
                s
                for s in tls_secrets(lb, listener_id, containers, namespace)
                if s["metadata"]["name"] not in names
            ]
        return lb

    async def _apply(
        self,
        tenant: Tenant,
        old: t.LoadBalancer | None,
        new: t.LoadBalancer,
        subject: tuple[ObjectKind, str],
        gone: list[tuple[ObjectKind, str]],
        secrets: list[KubeObject],
    ) -> None:
        management = self._rt.management
        namespace = tenant.spec.namespace
        try:
            written = await management.write(desired_request(new, namespace))
            answer = await management.answer(written)
            if not answer.accepted:
                _log.warning("change refused", lb=new.id, reason=answer.message)
                if old is not None:
                    written = await management.write(desired_request(old, namespace))
            else:
                # The L7 listeners' objects, for the gateway's control plane to vet and
                # serve (its own refusals show there, as for a tenant's objects).
                objects = gateway_objects(new, namespace, tenant.spec.gateway_backends)
                await management.write_gateway(
                    namespace, new.id, [*secrets, *objects], keep_secrets=secret_names(new)
                )
        except (ManagementError, KubeError) as err:
            # Octavia shows the object in ERROR; a failover writes the request again.
            _log.warning("change not answered", lb=new.id, error=str(err))
            await self._report(new.id, subject, failed_update(new.id, subject))
            return
        reported = (namespace, written.metadata.generation or 0)
        if not answer.accepted:
            await self._report(new.id, subject, failed_update(new.id, subject), reported)
            return
        update = status_update(new, answer, gone=gone)
        # With the provider agent running, operating statuses are its (what is probed).
        update = provisioning_only(update) if self._rt.agent else update
        await self._report(new.id, subject, update, reported)

    async def _report(
        self,
        lb_id: str,
        subject: tuple[ObjectKind, str],
        update: Update,
        reported: tuple[str, int] | None = None,
    ) -> None:
        """Send a status update once Octavia has committed the call's transaction (the
        subject is readable through the driver agent). While the driver agent does not
        answer (down, restarting) the update waits for it, however long: an object left
        PENDING_* cannot be changed or deleted. An error the agent answers with is tried
        again a few times (a locked database), then logged. `reported`: the (namespace,
        generation) of the request whose statuses these are, recorded once they are sent
        (the provider agent re-sends a generation never recorded)."""
        await self._committed(lb_id, subject)
        backoff = Backoff(0.1, 2.0)
        attempt = 0
        while True:
            try:
                await self._answered("status update", lb_id,
                                     self._rt.lib.update_loadbalancer_status, update)  # fmt: skip
                break
            except Exception as err:  # the driver agent answered with an error
                attempt += 1
                _log.warning("status update failed", lb=lb_id, attempt=attempt, error=repr(err))
                if attempt >= _REPORT_ATTEMPTS:
                    _log.error("status update given up", lb=lb_id, attempts=attempt)
                    return
                await asyncio.sleep(backoff.next())
        if reported is not None:
            namespace, generation = reported
            try:
                await self._rt.management.mark_reported(namespace, lb_id, generation)
            except KubeError as err:  # the provider agent sends them again: harmless
                _log.warning("reported mark not written", lb=lb_id, error=str(err))

    async def _answered(self, what: str, lb_id: str, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` through the driver agent's sockets, made again (backing off to 5 s)
        for as long as the agent does not answer; an error it answers with is raised."""
        backoff = Backoff(0.1, 5.0)
        silent = False
        while True:
            try:
                result = await asyncio.to_thread(call, *args)
            except Exception as err:
                if not _agent_silent(err):
                    raise
                if not silent:
                    _log.warning("driver agent not answering", what=what, lb=lb_id,
                                 error=repr(err.__cause__ or err.__context__ or err))  # fmt: skip
                silent = True
                await asyncio.sleep(backoff.next())
                continue
            if silent:
                _log.info("driver agent answering again", what=what, lb=lb_id)
            return result

    async def _committed(self, lb_id: str, subject: tuple[ObjectKind, str]) -> None:
        kind, ident = subject
        getters = {
            ObjectKind.LOADBALANCER: self._rt.lib.get_loadbalancer,
            ObjectKind.LISTENER: self._rt.lib.get_listener,
            ObjectKind.POOL: self._rt.lib.get_pool,
            ObjectKind.MEMBER: self._rt.lib.get_member,
            ObjectKind.HEALTHMONITOR: self._rt.lib.get_healthmonitor,
            ObjectKind.L7POLICY: self._rt.lib.get_l7policy,
            ObjectKind.L7RULE: self._rt.lib.get_l7rule,
        }
        get = getters.get(kind)
        if get is None:
            return
        deadline = asyncio.get_running_loop().time() + self._rt.management.answer_within_s
        while True:
            try:
                found = await self._answered("get", lb_id, get, ident)
            except Exception as err:  # the agent answered with an error: report anyway
                _log.warning("object not readable in Octavia", lb=lb_id, id=ident,
                             error=repr(err))  # fmt: skip
                return
            if found is not None:
                return
            if asyncio.get_running_loop().time() > deadline:
                _log.warning("object not visible in Octavia", lb=lb_id, id=ident)
                return
            await asyncio.sleep(0.02)  # Octavia commits right after the call returns

    # ---------------------------------------------------------------- load balancer

    def create_vip_port(
        self,
        loadbalancer_id: str,
        project_id: str,
        vip_dictionary: dict[str, Any],
        additional_vip_dicts: list[dict[str, Any]],
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The VIP from the Tenant's allocation: write the request, wait for the manager's
        address (at most `answer_timeout`)."""
        found: list[Unsupported] = []
        if vip_dictionary.get("vip_port_id"):
            found.append(
                Unsupported(ObjectKind.LOADBALANCER, loadbalancer_id, "vip_port_id",
                            vip_dictionary["vip_port_id"],
                            "the VIP comes from the Tenant's teapot-lb allocation, not a "
                            "Neutron port")
            )  # fmt: skip
        if additional_vip_dicts:
            found.append(
                Unsupported(ObjectKind.LOADBALANCER, loadbalancer_id, "additional_vips",
                            len(additional_vip_dicts), "one VIP per load balancer for now")
            )  # fmt: skip
        for option in ("vip_qos_policy_id", "vip_sg_ids"):
            if vip_dictionary.get(option):
                found.append(
                    Unsupported(ObjectKind.LOADBALANCER, loadbalancer_id, option,
                                vip_dictionary[option], "the VIP is not a Neutron port")
                )  # fmt: skip
        _refuse(found)
        with self._rt.creating(loadbalancer_id):
            return self._create_vip_port(loadbalancer_id, project_id, vip_dictionary)

    def _create_vip_port(
        self, loadbalancer_id: str, project_id: str, vip_dictionary: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        tenant = self._tenant(project_id)
        # The flavor comes with loadbalancer_create; until then, the Tenant's first mode.
        mode = t.Mode.ROUTE if TenantMode.ROUTE in tenant.spec.modes else t.Mode.PROXY
        lb = t.LoadBalancer(
            id=loadbalancer_id,
            project_id=project_id,
            vip_address=vip_dictionary.get("vip_address") or None,
            mode=mode,
        )
        self._check(tenant, lb)
        management = self._rt.management

        # Nothing of this first write is Octavia's to hear: loadbalancer_create's change
        # reports the load balancer (the provider agent must not re-send it meanwhile).
        request = desired_request(lb, tenant.spec.namespace)
        annotations = {**(request.metadata.annotations or {}), ANNOTATION_REPORTED: "1"}
        meta = request.metadata.model_copy(update={"annotations": annotations})
        request = request.model_copy(update={"metadata": meta})

        async def allocate() -> Answer:
            written = await management.write(request)
            return await management.answer(written)

        try:
            answer: Answer = self._rt.run(allocate())
        except ManagementError as err:
            self._rt.run(management.delete(tenant.spec.namespace, loadbalancer_id))
            raise fault(str(err)) from None
        if not answer.accepted or not answer.addresses:
            self._rt.run(management.delete(tenant.spec.namespace, loadbalancer_id))
            raise fault(f"load balancer {loadbalancer_id}: no VIP: {answer.message}")
        vip = dict(vip_dictionary)
        vip.update(vip_address=answer.addresses[0], vip_port_id=_vip_port_id(loadbalancer_id))
        _log.info("vip assigned", lb=loadbalancer_id, vip=answer.addresses[0])
        return vip, []

    def loadbalancer_create(self, loadbalancer: Any) -> None:
        d = _dict(loadbalancer)
        with self._rt.creating(str(d["loadbalancer_id"])):
            self._loadbalancer_create(d)

    def _loadbalancer_create(self, d: dict[str, Any]) -> None:
        try:
            mode = flavor_mode(d.get("flavor"))
        except FlavorError as err:
            raise fault(str(err)) from None
        lb_id = str(d["loadbalancer_id"])
        tenant = self._tenant(str(d.get("project_id") or ""))
        lb = t.load_balancer_from_provider(d, mode)
        try:
            _refuse(refusals_in_load_balancer(d, mode))
            self._check(tenant, lb)
            self._check_tls(tenant, [li for li in d.get("listeners") or [] if li])
        except (lib_exceptions.UnsupportedOptionError, lib_exceptions.DriverError):
            # Octavia rolls the load balancer back: so goes the VIP's request.
            self._rt.run(self._rt.management.delete(tenant.spec.namespace, lb_id))
            raise
        old = t.LoadBalancer(
            id=lb_id, project_id=lb.project_id, vip_address=lb.vip_address, mode=lb.mode
        )
        certificates = {
            str(li["listener_id"]): t.certificates_in(li) for li in d.get("listeners") or [] if li
        }
        l7 = [
            str(li["listener_id"])
            for li in d.get("listeners") or []
            if li and li.get("protocol") in _L7_PROTOCOLS
        ]
        self._submit(
            tenant, old, lb, (ObjectKind.LOADBALANCER, lb_id), [], certificates, l7_from_db=l7
        )

    def loadbalancer_update(self, old_loadbalancer: Any, new_loadbalancer: Any) -> None:
        d = _dict(new_loadbalancer)
        lb_id = str(_dict(old_loadbalancer)["loadbalancer_id"])
        project = str(_dict(old_loadbalancer).get("project_id") or "")
        self._change(
            project,
            lb_id,
            lambda lb: t.merged(lb, d),
            (ObjectKind.LOADBALANCER, lb_id),
            checked=refusals(ObjectKind.LOADBALANCER, d, t.Mode.ROUTE),
        )

    def loadbalancer_delete(self, loadbalancer: Any, cascade: bool = False) -> None:
        d = _dict(loadbalancer)
        lb_id = str(d["loadbalancer_id"])
        tenant = self._tenant(str(d.get("project_id") or ""))
        current = self._current(tenant, lb_id)
        management = self._rt.management

        async def delete() -> None:
            subject = (ObjectKind.LOADBALANCER, lb_id)
            try:
                await management.write_gateway(tenant.spec.namespace, lb_id, [])
                await management.delete(tenant.spec.namespace, lb_id)
            except KubeError as err:  # the load balancer in ERROR: the user deletes again
                _log.warning("delete failed", lb=lb_id, error=str(err))
                await self._report(lb_id, subject, failed_update(lb_id, subject))
                return
            await self._report(lb_id, subject, deleted_update(current))

        self._rt.loop.submit(lb_id, delete)

    def loadbalancer_failover(self, loadbalancer_id: str) -> None:
        """Write the request again from Octavia's database (the level-triggered repair:
        a request lost or edited by hand comes back as Octavia has it)."""
        provider = self._rt.lib.get_loadbalancer(loadbalancer_id)
        if provider is None:
            raise fault(f"load balancer {loadbalancer_id} is not in Octavia's database")
        d = _dict(provider)
        tenant = self._tenant(str(d.get("project_id") or ""))
        request = self._rt.run(self._rt.management.request(tenant.spec.namespace, loadbalancer_id))
        kept = tree_of(request) if request is not None else None
        lb = t.load_balancer_from_provider(d, kept.mode if kept else t.Mode.ROUTE)
        lb = t.keep_certificates(lb, kept)
        self._check(tenant, lb)
        self._submit(tenant, kept, lb, (ObjectKind.LOADBALANCER, loadbalancer_id), [])

    # ---------------------------------------------------------------- listeners

    def _lb_child(
        self,
        kind: ObjectKind,
        d: dict[str, Any],
        edit: Callable[[t.LoadBalancer], t.LoadBalancer],
        **kwargs: Any,
    ) -> None:
        """A change of a listener or pool (their provider objects name the load balancer)."""
        ident = str(d[ID_KEYS[kind]])
        project, lb_id = str(d.get("project_id") or ""), str(d["loadbalancer_id"])
        self._change(project, lb_id, edit, (kind, ident), **kwargs)

    def listener_create(self, listener: Any) -> None:
        d = _dict(listener)
        new = t.listener_from_provider(d)
        checked = refusals(ObjectKind.LISTENER, d, t.Mode.ROUTE)
        certificates = {new.id: t.certificates_in(d)}
        self._lb_child(
            ObjectKind.LISTENER,
            d,
            lambda lb: t.put_listener(lb, new),
            checked=checked,
            certificates=certificates,
            tls=[d],
        )

    def _lb_child_update(
        self,
        kind: ObjectKind,
        old_obj: Any,
        new_obj: Any,
        find: Callable[[t.LoadBalancer, str], M | None],
        from_provider: Callable[[Mapping[str, Any]], M],
        put: Callable[[t.LoadBalancer, M], t.LoadBalancer],
    ) -> None:
        """An update of a listener or pool: the tree's object with the changed fields."""
        old, d = _dict(old_obj), _dict(new_obj)

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            current = find(lb, str(old[ID_KEYS[kind]])) or from_provider(old)
            return put(lb, t.merged(current, d))

        self._lb_child(kind, old, edit, checked=refusals(kind, {**old, **d}, t.Mode.ROUTE))

    def listener_update(self, old_listener: Any, new_listener: Any) -> None:
        old, d = _dict(old_listener), _dict(new_listener)
        ident = str(old["listener_id"])
        containers = t.certificates_in(d)

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            listener = t.merged(lb.listener(ident) or t.listener_from_provider(old), d)
            if containers:
                listener = listener.model_copy(update={"certificates": len(containers)})
            return t.put_listener(lb, listener)

        checked = refusals(ObjectKind.LISTENER, {**old, **d}, t.Mode.ROUTE)
        certificates = {ident: containers} if containers else None
        self._lb_child(
            ObjectKind.LISTENER, old, edit, checked=checked, certificates=certificates,
            tls=[{"listener_id": ident, **d}] if containers else [],
        )  # fmt: skip

    def listener_delete(self, listener: Any) -> None:
        d = _dict(listener)
        ident = str(d["listener_id"])
        gone = [(ObjectKind.LISTENER, ident)]
        self._lb_child(ObjectKind.LISTENER, d, lambda lb: t.drop_listener(lb, ident), gone=gone)

    # ---------------------------------------------------------------- pools

    def pool_create(self, pool: Any) -> None:
        d = _dict(pool)
        new = t.pool_from_provider(d)
        listener_id = d.get("listener_id")
        checked = refusals(ObjectKind.POOL, d, t.Mode.ROUTE)

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            return t.put_pool(lb, new, listener_id=listener_id)

        self._lb_child(ObjectKind.POOL, d, edit, checked=checked)

    def pool_update(self, old_pool: Any, new_pool: Any) -> None:
        self._lb_child_update(
            ObjectKind.POOL,
            old_pool,
            new_pool,
            t.LoadBalancer.pool,
            t.pool_from_provider,
            lambda lb, pool: t.put_pool(lb, pool),
        )

    def pool_delete(self, pool: Any) -> None:
        d = _dict(pool)
        ident = str(d["pool_id"])
        gone: list[tuple[ObjectKind, str]] = []

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            old = lb.pool(ident)
            if old is not None:
                gone.extend((ObjectKind.MEMBER, m.id) for m in old.members)
                if old.health_monitor is not None:
                    gone.append((ObjectKind.HEALTHMONITOR, old.health_monitor.id))
            gone.append((ObjectKind.POOL, ident))
            return t.drop_pool(lb, ident)

        self._lb_child(ObjectKind.POOL, d, edit, gone=gone)

    # ---------------------------------------------------------------- members

    def _pool_child(
        self,
        kind: ObjectKind,
        d: dict[str, Any],
        edit: Callable[[t.LoadBalancer], t.LoadBalancer],
        **kwargs: Any,
    ) -> None:
        """A change of a member or health monitor (their provider objects name the pool;
        the pool, already committed, names the load balancer)."""
        project, lb_id = self._project_of_pool(str(d["pool_id"]))
        project = str(d.get("project_id") or project)
        self._change(project, lb_id, edit, (kind, str(d[ID_KEYS[kind]])), **kwargs)

    def member_create(self, member: Any) -> None:
        d = _dict(member)
        new, pool_id = t.member_from_provider(d), str(d["pool_id"])
        checked = refusals(ObjectKind.MEMBER, d, t.Mode.ROUTE)
        edit = partial(t.put_member, pool_id=pool_id, member=new)
        self._pool_child(ObjectKind.MEMBER, d, edit, checked=checked)

    def member_update(self, old_member: Any, new_member: Any) -> None:
        old, d = _dict(old_member), _dict(new_member)
        ident, pool_id = str(old["member_id"]), str(old["pool_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            pool = lb.pool(pool_id)
            current = next((m for m in pool.members if m.id == ident), None) if pool else None
            return t.put_member(lb, pool_id, t.merged(current or t.member_from_provider(old), d))

        checked = refusals(ObjectKind.MEMBER, {**old, **d}, t.Mode.ROUTE)
        self._pool_child(ObjectKind.MEMBER, old, edit, checked=checked)

    def member_delete(self, member: Any) -> None:
        d = _dict(member)
        ident = str(d["member_id"])
        gone = [(ObjectKind.MEMBER, ident)]
        self._pool_child(ObjectKind.MEMBER, d, lambda lb: t.drop_member(lb, ident), gone=gone)

    def member_batch_update(self, pool_id: str, members: list[Any]) -> None:
        dicts = [_dict(m) for m in members]
        wanted = [t.member_from_provider(m) for m in dicts]
        project, lb_id = self._project_of_pool(pool_id)
        gone: list[tuple[ObjectKind, str]] = []
        keep = {m.id for m in wanted}

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            pool = lb.pool(pool_id)
            old = pool.members if pool else ()
            gone.extend((ObjectKind.MEMBER, m.id) for m in old if m.id not in keep)
            return t.set_members(lb, pool_id, wanted)

        checked = [u for m in dicts for u in refusals(ObjectKind.MEMBER, m, t.Mode.ROUTE)]
        self._change(project, lb_id, edit, (ObjectKind.POOL, pool_id), gone=gone, checked=checked)

    # ---------------------------------------------------------------- health monitors

    def health_monitor_create(self, healthmonitor: Any) -> None:
        d = _dict(healthmonitor)
        new, pool_id = t.health_monitor_from_provider(d), str(d["pool_id"])
        edit = partial(t.put_health_monitor, pool_id=pool_id, monitor=new)
        checked = refusals(ObjectKind.HEALTHMONITOR, d, t.Mode.ROUTE)
        self._pool_child(ObjectKind.HEALTHMONITOR, d, edit, checked=checked)

    def health_monitor_update(self, old_healthmonitor: Any, new_healthmonitor: Any) -> None:
        old, d = _dict(old_healthmonitor), _dict(new_healthmonitor)
        pool_id = str(old["pool_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            pool = lb.pool(pool_id)
            current = pool.health_monitor if pool else None
            monitor = t.merged(current or t.health_monitor_from_provider(old), d)
            return t.put_health_monitor(lb, pool_id, monitor)

        checked = refusals(ObjectKind.HEALTHMONITOR, {**old, **d}, t.Mode.ROUTE)
        self._pool_child(ObjectKind.HEALTHMONITOR, old, edit, checked=checked)

    def health_monitor_delete(self, healthmonitor: Any) -> None:
        d = _dict(healthmonitor)
        pool_id = str(d["pool_id"])
        gone = [(ObjectKind.HEALTHMONITOR, str(d["healthmonitor_id"]))]
        edit = partial(t.drop_health_monitor, pool_id=pool_id)
        self._pool_child(ObjectKind.HEALTHMONITOR, d, edit, gone=gone)

    # ---------------------------------------------------------------- L7 (the gateway's)

    def _listener_child(
        self,
        kind: ObjectKind,
        ident: str,
        listener_id: str,
        edit: Callable[[t.LoadBalancer], t.LoadBalancer],
        **kwargs: Any,
    ) -> None:
        """A change of an L7 policy or rule (the listener, already committed, names the
        load balancer and project)."""
        get = self._rt.lib.get_listener
        project, lb_id = self._project_of(ObjectKind.LISTENER, listener_id, get)
        self._change(project, lb_id, edit, (kind, ident), **kwargs)

    def _listener_of_policy(self, policy_id: str) -> str:
        policy = self._rt.lib.get_l7policy(policy_id)
        if policy is None:
            raise fault(f"L7 policy {policy_id} is not in Octavia's database")
        return str(_dict(policy)["listener_id"])

    def l7policy_create(self, l7policy: Any) -> None:
        d = _dict(l7policy)
        new, listener_id = t.l7policy_from_provider(d), str(d["listener_id"])
        edit = partial(t.put_l7policy, listener_id=listener_id, policy=new)
        self._listener_child(ObjectKind.L7POLICY, new.id, listener_id, edit)

    def l7policy_update(self, old_l7policy: Any, new_l7policy: Any) -> None:
        old, d = _dict(old_l7policy), _dict(new_l7policy)
        ident, listener_id = str(old["l7policy_id"]), str(old["listener_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            listener = lb.listener(listener_id)
            found = [p for p in listener.l7policies if p.id == ident] if listener else []
            current = found[0] if found else t.l7policy_from_provider(old)
            return t.put_l7policy(lb, listener_id, t.merged(current, d))

        self._listener_child(ObjectKind.L7POLICY, ident, listener_id, edit)

    def l7policy_delete(self, l7policy: Any) -> None:
        d = _dict(l7policy)
        ident, listener_id = str(d["l7policy_id"]), str(d["listener_id"])
        gone: list[tuple[ObjectKind, str]] = [(ObjectKind.L7POLICY, ident)]

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            listener = lb.listener_of_policy(ident)
            for policy in listener.l7policies if listener else ():
                if policy.id == ident:
                    gone.extend((ObjectKind.L7RULE, r.id) for r in policy.rules)
            return t.drop_l7policy(lb, ident)

        self._listener_child(ObjectKind.L7POLICY, ident, listener_id, edit, gone=gone)

    def l7rule_create(self, l7rule: Any) -> None:
        d = _dict(l7rule)
        new, policy_id = t.l7rule_from_provider(d), str(d["l7policy_id"])
        edit = partial(t.put_l7rule, policy_id=policy_id, rule=new)
        listener_id = self._listener_of_policy(policy_id)
        self._listener_child(ObjectKind.L7RULE, new.id, listener_id, edit)

    def l7rule_update(self, old_l7rule: Any, new_l7rule: Any) -> None:
        old, d = _dict(old_l7rule), _dict(new_l7rule)
        ident, policy_id = str(old["l7rule_id"]), str(old["l7policy_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            listener = lb.listener_of_policy(policy_id)
            rules = [r for p in (listener.l7policies if listener else ()) for r in p.rules]
            current = next((r for r in rules if r.id == ident), None)
            rule = t.merged(current or t.l7rule_from_provider(old), d)
            return t.put_l7rule(lb, policy_id, rule)

        listener_id = self._listener_of_policy(policy_id)
        self._listener_child(ObjectKind.L7RULE, ident, listener_id, edit)

    def l7rule_delete(self, l7rule: Any) -> None:
        d = _dict(l7rule)
        ident, policy_id = str(d["l7rule_id"]), str(d["l7policy_id"])
        edit = partial(t.drop_l7rule, policy_id=policy_id, rule_id=ident)
        listener_id = self._listener_of_policy(policy_id)
        gone = [(ObjectKind.L7RULE, ident)]
        self._listener_child(ObjectKind.L7RULE, ident, listener_id, edit, gone=gone)

    # ---------------------------------------------------------------- flavors, zones

    def get_supported_flavor_metadata(self) -> dict[str, str]:
        return dict(SUPPORTED)

    def validate_flavor(self, flavor_metadata: dict[str, Any]) -> None:
        try:
            flavor_mode(flavor_metadata)
        except FlavorError as err:
            raise lib_exceptions.UnsupportedOptionError(
                user_fault_string=str(err), operator_fault_string=str(err)
            ) from None

    def get_supported_availability_zone_metadata(self) -> dict[str, str]:
        return {}

    def validate_availability_zone(self, availability_zone_metadata: dict[str, Any]) -> None:
        if availability_zone_metadata:
            keys = ", ".join(sorted(availability_zone_metadata))
            raise lib_exceptions.UnsupportedOptionError(
                user_fault_string=f"availability zone metadata {keys}: teapot-lb has no zones",
                operator_fault_string=f"availability zone metadata {keys} refused",
            )


__all__ = ["TeapotProviderDriver"]
