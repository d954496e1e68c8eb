"""What a teapot provider driver call leaves to run after it returns: one job at a time per
load balancer on the process's loop (:mod:`.driver_runtime`). A change's job reads what
Octavia's database holds only once the call is committed (a graph create's L7 policies,
SNI certificates), writes the TenantLoadBalancer and the gateway's objects, waits for the
manager's answer (a refused change is rolled back) and reports the whole tree's statuses
through `DriverLibrary`, for as long as the driver agent does not answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from octavia_lib.api.drivers import exceptions as lib_exceptions

from teapot_lb import log
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.errors import KubeError
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.tenancy import Tenant
from teapot_lb.octavia import tree as t
from teapot_lb.octavia.driver_refusals import check
from teapot_lb.octavia.driver_runtime import Runtime, provider_dict
from teapot_lb.octavia.health import provisioning_only
from teapot_lb.octavia.l7 import gateway_objects, secret_names, tls_secrets
from teapot_lb.octavia.management import ManagementError
from teapot_lb.octavia.mapping import deleted_update, desired_request, failed_update, status_update
from teapot_lb.octavia.tls import certificate_refusals, container_names
from teapot_lb.octavia.unsupported import ObjectKind

_log = log.get("octavia")

Update = dict[str, list[dict[str, str]]]
_REPORT_ATTEMPTS = 8  # ~10 s of backoff: the driver agent's database may be locked a while
T = TypeVar("T")
Certificates = Mapping[str, list[Mapping[str, Any]]]
"""TLS containers given with a call, per listener id (their PEM goes to Secrets only)."""


def _agent_silent(err: BaseException) -> bool:
    """Whether a DriverLibrary call failed because the driver agent did not answer (its
    socket missing or refusing, no answer in time), not because it answered an error:
    octavia-lib wraps the socket's error in its own exception."""
    if isinstance(err, lib_exceptions.DriverAgentTimeout):
        return True
    inner = err.__cause__ or err.__context__
    return isinstance(inner, (OSError, lib_exceptions.DriverAgentTimeout))


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


@dataclass(frozen=True)
class Change:
    """One change of a load balancer's tree, `old` (None: nothing to roll back to) into
    `new`, reported on `subject`; `gone`: the objects it removes (reported DELETED)."""

    tenant: Tenant
    old: t.LoadBalancer | None
    new: t.LoadBalancer
    subject: tuple[ObjectKind, str]
    gone: list[tuple[ObjectKind, str]] = field(default_factory=list)


class Jobs:
    """The jobs of one driver object's calls (Octavia makes a driver object per call; the
    loop, the management client and the DriverLibrary are the process's, in `rt`)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def submit(
        self,
        change: Change,
        certificates: Certificates | None = None,
        l7_from_db: list[str] | None = None,
    ) -> None:
        """Apply the change after the call; `l7_from_db`: listeners whose L7 policies are
        read from Octavia's database first (a graph create)."""
        tenant, new, subject = change.tenant, change.new, change.subject
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
                await self._apply(replace(change, new=lb), secrets)

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
            policies = provider_dict(found).get("l7policies") or []
            lb = t.set_l7policies(lb, listener_id, [provider_dict(p) for p in policies if p])
        try:
            await asyncio.to_thread(check, tenant, lb)
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
            d = {"listener_id": listener_id, **(provider_dict(found) if found is not None else {})}
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

    async def _apply(self, change: Change, secrets: list[KubeObject]) -> None:
        tenant, old, new, subject = change.tenant, change.old, change.new, change.subject
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
        update = status_update(new, answer, gone=change.gone)
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

    def submit_delete(self, tenant: Tenant, lb_id: str, current: t.LoadBalancer) -> None:
        """Delete the load balancer's objects after the call, then report `current` DELETED
        (or the load balancer ERROR: the user deletes again)."""
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
