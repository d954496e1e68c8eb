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

This module holds the entry points, each an edit of the tree; what a call refuses at once
is :mod:`.driver_refusals`'s, what runs after it returns :mod:`.driver_jobs`'s. These,
and :mod:`.driver_runtime` (what every driver object of one Octavia process shares), are
the only modules that import octavia-lib and oslo.config (present in Octavia's
environment, installed with the `octavia` extra).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypeVar

from octavia_lib.api.drivers import exceptions as lib_exceptions
from octavia_lib.api.drivers import provider_base
from pydantic import BaseModel

from teapot_lb import log
from teapot_lb.model.tenancy import Tenant, TenantMode
from teapot_lb.octavia import tree as t
from teapot_lb.octavia.driver_jobs import Certificates, Change, Jobs
from teapot_lb.octavia.driver_refusals import check, check_tls, refuse
from teapot_lb.octavia.driver_runtime import fault, provider_dict, runtime
from teapot_lb.octavia.flavor import SUPPORTED, FlavorError, flavor_mode
from teapot_lb.octavia.management import ManagementError
from teapot_lb.octavia.mapping import ANNOTATION_REPORTED, Answer, desired_request, tree_of
from teapot_lb.octavia.unsupported import (
    ID_KEYS,
    ObjectKind,
    Unsupported,
    refusals,
    refusals_in_load_balancer,
)

_log = log.get("octavia")

M = TypeVar("M", bound=BaseModel)

# A graph create's listeners of these protocols get their L7 policies from the database.
_L7_PROTOCOLS = ("HTTP", "TERMINATED_HTTPS")


def _vip_port_id(lb_id: str) -> str:
    """A stable id for the VIP "port" Octavia records (there is no Neutron port)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"teapot-lb:octavia:vip:{lb_id}"))


class TeapotProviderDriver(provider_base.ProviderDriver):  # type: ignore[misc]
    """teapot-lb as an Octavia provider (`octavia.api.drivers: teapot`)."""

    def __init__(self) -> None:
        super().__init__()
        self._rt = runtime()
        self._rt.maybe_sweep()  # Octavia makes a driver per API call
        self._jobs = Jobs(self._rt)

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
        return t.load_balancer_from_provider(provider_dict(provider), t.Mode.ROUTE)

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
        d = provider_dict(found)
        lb_id = str(d["loadbalancer_id"])
        project = d.get("project_id")
        if not project:
            lb = self._rt.lib.get_loadbalancer(lb_id)
            project = provider_dict(lb).get("project_id") if lb is not None else None
        return str(project or ""), lb_id

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
        refuse(checked)
        tenant = self._tenant(project_id)
        check_tls(tenant, tls)
        old = self._current(tenant, lb_id)
        new = edit(old)
        check(tenant, new)
        self._jobs.submit(Change(tenant, old, new, subject, list(gone)), certificates)

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
        refuse(found)
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
        check(tenant, lb)
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
        d = provider_dict(loadbalancer)
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
            refuse(refusals_in_load_balancer(d, mode))
            check(tenant, lb)
            check_tls(tenant, [li for li in d.get("listeners") or [] if li])
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
        change = Change(tenant, old, lb, (ObjectKind.LOADBALANCER, lb_id))
        self._jobs.submit(change, certificates, l7_from_db=l7)

    def loadbalancer_update(self, old_loadbalancer: Any, new_loadbalancer: Any) -> None:
        d = provider_dict(new_loadbalancer)
        lb_id = str(provider_dict(old_loadbalancer)["loadbalancer_id"])
        project = str(provider_dict(old_loadbalancer).get("project_id") or "")
        self._change(
            project,
            lb_id,
            lambda lb: t.merged(lb, d),
            (ObjectKind.LOADBALANCER, lb_id),
            checked=refusals(ObjectKind.LOADBALANCER, d, t.Mode.ROUTE),
        )

    def loadbalancer_delete(self, loadbalancer: Any, cascade: bool = False) -> None:
        d = provider_dict(loadbalancer)
        lb_id = str(d["loadbalancer_id"])
        tenant = self._tenant(str(d.get("project_id") or ""))
        self._jobs.submit_delete(tenant, lb_id, self._current(tenant, lb_id))

    def loadbalancer_failover(self, loadbalancer_id: str) -> None:
        """Write the request again from Octavia's database (the level-triggered repair:
        a request lost or edited by hand comes back as Octavia has it)."""
        provider = self._rt.lib.get_loadbalancer(loadbalancer_id)
        if provider is None:
            raise fault(f"load balancer {loadbalancer_id} is not in Octavia's database")
        d = provider_dict(provider)
        tenant = self._tenant(str(d.get("project_id") or ""))
        request = self._rt.run(self._rt.management.request(tenant.spec.namespace, loadbalancer_id))
        kept = tree_of(request) if request is not None else None
        lb = t.load_balancer_from_provider(d, kept.mode if kept else t.Mode.ROUTE)
        lb = t.keep_certificates(lb, kept)
        check(tenant, lb)
        self._jobs.submit(Change(tenant, kept, lb, (ObjectKind.LOADBALANCER, loadbalancer_id)))

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
        d = provider_dict(listener)
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
        old, d = provider_dict(old_obj), provider_dict(new_obj)

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            current = find(lb, str(old[ID_KEYS[kind]])) or from_provider(old)
            return put(lb, t.merged(current, d))

        self._lb_child(kind, old, edit, checked=refusals(kind, {**old, **d}, t.Mode.ROUTE))

    def listener_update(self, old_listener: Any, new_listener: Any) -> None:
        old, d = provider_dict(old_listener), provider_dict(new_listener)
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
        d = provider_dict(listener)
        ident = str(d["listener_id"])
        gone = [(ObjectKind.LISTENER, ident)]
        self._lb_child(ObjectKind.LISTENER, d, lambda lb: t.drop_listener(lb, ident), gone=gone)

    # ---------------------------------------------------------------- pools

    def pool_create(self, pool: Any) -> None:
        d = provider_dict(pool)
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
        d = provider_dict(pool)
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
        d = provider_dict(member)
        new, pool_id = t.member_from_provider(d), str(d["pool_id"])
        checked = refusals(ObjectKind.MEMBER, d, t.Mode.ROUTE)
        edit = partial(t.put_member, pool_id=pool_id, member=new)
        self._pool_child(ObjectKind.MEMBER, d, edit, checked=checked)

    def member_update(self, old_member: Any, new_member: Any) -> None:
        old, d = provider_dict(old_member), provider_dict(new_member)
        ident, pool_id = str(old["member_id"]), str(old["pool_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            pool = lb.pool(pool_id)
            current = next((m for m in pool.members if m.id == ident), None) if pool else None
            return t.put_member(lb, pool_id, t.merged(current or t.member_from_provider(old), d))

        checked = refusals(ObjectKind.MEMBER, {**old, **d}, t.Mode.ROUTE)
        self._pool_child(ObjectKind.MEMBER, old, edit, checked=checked)

    def member_delete(self, member: Any) -> None:
        d = provider_dict(member)
        ident = str(d["member_id"])
        gone = [(ObjectKind.MEMBER, ident)]
        self._pool_child(ObjectKind.MEMBER, d, lambda lb: t.drop_member(lb, ident), gone=gone)

    def member_batch_update(self, pool_id: str, members: list[Any]) -> None:
        dicts = [provider_dict(m) for m in members]
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
        d = provider_dict(healthmonitor)
        new, pool_id = t.health_monitor_from_provider(d), str(d["pool_id"])
        edit = partial(t.put_health_monitor, pool_id=pool_id, monitor=new)
        checked = refusals(ObjectKind.HEALTHMONITOR, d, t.Mode.ROUTE)
        self._pool_child(ObjectKind.HEALTHMONITOR, d, edit, checked=checked)

    def health_monitor_update(self, old_healthmonitor: Any, new_healthmonitor: Any) -> None:
        old, d = provider_dict(old_healthmonitor), provider_dict(new_healthmonitor)
        pool_id = str(old["pool_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            pool = lb.pool(pool_id)
            current = pool.health_monitor if pool else None
            monitor = t.merged(current or t.health_monitor_from_provider(old), d)
            return t.put_health_monitor(lb, pool_id, monitor)

        checked = refusals(ObjectKind.HEALTHMONITOR, {**old, **d}, t.Mode.ROUTE)
        self._pool_child(ObjectKind.HEALTHMONITOR, old, edit, checked=checked)

    def health_monitor_delete(self, healthmonitor: Any) -> None:
        d = provider_dict(healthmonitor)
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
        return str(provider_dict(policy)["listener_id"])

    def l7policy_create(self, l7policy: Any) -> None:
        d = provider_dict(l7policy)
        new, listener_id = t.l7policy_from_provider(d), str(d["listener_id"])
        edit = partial(t.put_l7policy, listener_id=listener_id, policy=new)
        self._listener_child(ObjectKind.L7POLICY, new.id, listener_id, edit)

    def l7policy_update(self, old_l7policy: Any, new_l7policy: Any) -> None:
        old, d = provider_dict(old_l7policy), provider_dict(new_l7policy)
        ident, listener_id = str(old["l7policy_id"]), str(old["listener_id"])

        def edit(lb: t.LoadBalancer) -> t.LoadBalancer:
            listener = lb.listener(listener_id)
            found = [p for p in listener.l7policies if p.id == ident] if listener else []
            current = found[0] if found else t.l7policy_from_provider(old)
            return t.put_l7policy(lb, listener_id, t.merged(current, d))

        self._listener_child(ObjectKind.L7POLICY, ident, listener_id, edit)

    def l7policy_delete(self, l7policy: Any) -> None:
        d = provider_dict(l7policy)
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
        d = provider_dict(l7rule)
        new, policy_id = t.l7rule_from_provider(d), str(d["l7policy_id"])
        edit = partial(t.put_l7rule, policy_id=policy_id, rule=new)
        listener_id = self._listener_of_policy(policy_id)
        self._listener_child(ObjectKind.L7RULE, new.id, listener_id, edit)

    def l7rule_update(self, old_l7rule: Any, new_l7rule: Any) -> None:
        old, d = provider_dict(old_l7rule), provider_dict(new_l7rule)
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
        d = provider_dict(l7rule)
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
