"""Octavia load balancer → TenantLoadBalancer, and the manager's answer → Octavia's
statuses (pure).

One Octavia load balancer is one TenantLoadBalancer in the namespace of the project's
Tenant (the Tenant labelled ``octavia.lb.teapot.io/project=<project id>``):

- the VIP is the request's address (`requestedIPs` when the user asked for one);
- each listener is a port (TCP, UDP, SCTP; HTTPS, TLS passed through, is a TCP port);
- the members of the listeners' default pools are the backends, ready while they, their
  pool, listener and load balancer are administratively up and their weight is not 0;
  `externalTrafficPolicy: Local`, so only ready members receive traffic;
- the flavor's mode is the request's mode (route → Route, proxy → Gateway).

The tree itself rides along as an annotation, so each driver call edits the last tree
rather than reading Octavia's database mid-transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import ip_address

from teapot_lb.addresses import IPFamily
from teapot_lb.model.common import ConditionStatus, ObjectMeta
from teapot_lb.model.service import ExternalTrafficPolicy, Protocol
from teapot_lb.model.tenancy import (
    ACCEPTED,
    PROGRAMMED,
    SourceService,
    TenantBackend,
    TenantLoadBalancer,
    TenantLoadBalancerSpec,
    TenantLoadBalancerStatus,
    TenantMode,
    TenantPort,
)
from teapot_lb.octavia.l7 import LABEL_LOADBALANCER, SOURCE_CLUSTER, gateway_pools, is_l7
from teapot_lb.octavia.monitor import probed
from teapot_lb.octavia.tree import LoadBalancer, Member, Mode, Pool
from teapot_lb.octavia.unsupported import ObjectKind
from teapot_lb.tenancy.refusal import Refusal
from teapot_lb.tenancy.vet import Rule

LABEL_PROJECT = "octavia.lb.teapot.io/project"
"""On a Tenant: the OpenStack project (id) whose load balancers it holds."""
ANNOTATION_TREE = "octavia.lb.teapot.io/tree"
"""On a TenantLoadBalancer: the Octavia tree it was mapped from (JSON)."""
ANNOTATION_REPORTED = "octavia.lb.teapot.io/reported"
"""On a TenantLoadBalancer: the generation whose statuses Octavia has been sent, or needs
none (the VIP's first write: loadbalancer_create's change reports it). Written once the
driver agent took them; a write of the request drops it. A generation accepted and not
reported is re-sent by the provider agent."""

MODES = {Mode.ROUTE: TenantMode.ROUTE, Mode.PROXY: TenantMode.GATEWAY}


VIP_AS = {"HTTPS": "TCP"}
"""An Octavia HTTPS listener passes TLS through unopened: on the VIP it is a TCP port."""


def request_name(lb_id: str) -> str:
    return f"octavia-{lb_id}"


def _ready(lb: LoadBalancer, listener_up: bool, pool: Pool, member: Member) -> bool:
    up = lb.admin_state_up and listener_up and pool.admin_state_up and member.admin_state_up
    return up and member.weight > 0


def serving_pools(lb: LoadBalancer) -> list[tuple[Pool, bool]]:
    """The L4 listeners' default pools, each once, with whether a listener using it is up
    (L7 listeners' pools are the gateway's: :func:`gateway_pools`)."""
    out: dict[str, tuple[Pool, bool]] = {}
    for listener in lb.listeners:
        if is_l7(listener):
            continue
        pool = lb.pool(listener.default_pool_id) if listener.default_pool_id else None
        if pool is not None:
            up = out.get(pool.id, (pool, False))[1] or listener.admin_state_up
            out[pool.id] = (pool, up)
    return list(out.values())


def desired_request(lb: LoadBalancer, namespace: str) -> TenantLoadBalancer:
    """The TenantLoadBalancer for a load balancer of a project whose Tenant's namespace
    is `namespace`."""
    ports = []
    l4 = [li for li in lb.listeners if not is_l7(li)]
    for listener in sorted(l4, key=lambda li: (li.protocol_port, li.protocol)):
        pool = lb.pool(listener.default_pool_id) if listener.default_pool_id else None
        node_port = None
        if lb.mode is Mode.PROXY and pool is not None and pool.members:
            node_port = pool.members[0].protocol_port
        ports.append(
            TenantPort(
                name=listener.id,
                protocol=Protocol(VIP_AS.get(listener.protocol, listener.protocol)),
                port=listener.protocol_port,
                node_port=node_port,
            )
        )
    backends: dict[str, TenantBackend] = {}
    for pool, listener_up in serving_pools(lb):
        for member in pool.members:
            ready = _ready(lb, listener_up, pool, member)
            old = backends.get(member.id)
            backends[member.id] = TenantBackend(
                node=member.id,
                addresses=[ip_address(member.address)],
                ready=ready or (old is not None and old.ready),
            )
    vip = ip_address(lb.vip_address) if lb.vip_address else None
    spec = TenantLoadBalancerSpec(
        source=SourceService(
            cluster=SOURCE_CLUSTER, namespace=lb.project_id or "-", name=lb.name or lb.id, uid=lb.id
        ),
        mode=MODES[lb.mode],
        ports=ports,
        ip_families=[IPFamily.of(vip)] if vip is not None else [],
        requested_ips=[vip] if vip is not None else [],
        external_traffic_policy=ExternalTrafficPolicy.LOCAL,
        backends=sorted(backends.values(), key=lambda b: b.node),
    )
    return TenantLoadBalancer(
        metadata=ObjectMeta(
            name=request_name(lb.id),
            namespace=namespace,
            labels={LABEL_LOADBALANCER: lb.id, LABEL_PROJECT: lb.project_id},
            annotations={ANNOTATION_TREE: lb.model_dump_json()},
        ),
        spec=spec,
    )


_FIELD = re.compile(r"^spec\.(backends|ports|requestedIPs)\[(\d+)\]")


def refusal_text(request: TenantLoadBalancer, refusal: Refusal[Rule]) -> str:
    """A vetting refusal of the driver's request in Octavia's terms, for the API's answer:
    the Octavia object its field comes from (a backend is a member, a port a listener, the
    mode the flavor's), what is wrong, and the rule in brackets (the reason the manager's
    conditions and Events give for the same refusal)."""
    subject = {"spec.mode": "flavor mode"}.get(refusal.field, refusal.field)
    found = _FIELD.match(refusal.field)
    if found is not None:
        kind, index = found.group(1), int(found.group(2))
        spec = request.spec
        if kind == "backends" and index < len(spec.backends):
            subject = f"member {spec.backends[index].node}"
        elif kind == "ports" and index < len(spec.ports):
            subject = f"listener {spec.ports[index].name}"
        elif kind == "requestedIPs":
            subject = "vip_address"
    return f"{subject}: {refusal.message} [{refusal.rule}]"


def tree_of(request: TenantLoadBalancer) -> LoadBalancer | None:
    """The tree a TenantLoadBalancer was mapped from (None: not one of the driver's)."""
    text = (request.metadata.annotations or {}).get(ANNOTATION_TREE)
    return LoadBalancer.model_validate_json(text) if text else None


# ------------------------------------------------------------------ statuses


@dataclass(frozen=True)
class Answer:
    """What the manager said of the request: accepted (or why not), its addresses, the
    next hops route mode announces, and whether it is programmed."""

    accepted: bool
    message: str
    addresses: tuple[str, ...]
    next_hops: frozenset[str]
    programmed: bool

    @classmethod
    def of(cls, status: TenantLoadBalancerStatus | None) -> Answer | None:
        """None while the manager has not answered."""
        if status is None:
            return None
        conditions = {c.type: c for c in status.conditions}
        accepted = conditions.get(ACCEPTED)
        if accepted is None:
            return None
        programmed = conditions.get(PROGRAMMED)
        return cls(
            accepted=accepted.status is ConditionStatus.TRUE,
            message=accepted.message,
            addresses=tuple(status.addresses),
            next_hops=frozenset(status.next_hops),
            programmed=programmed is not None and programmed.status is ConditionStatus.TRUE,
        )


def answer_to(request: TenantLoadBalancer, generation: int | None = None) -> Answer | None:
    """The manager's answer to `generation` of the request (default: its current one):
    every condition observed it; None while the manager has not answered it."""
    status = request.status
    if generation is None:
        generation = request.metadata.generation or 0
    if status is None or not status.conditions:
        return None
    if any((c.observed_generation or 0) < generation for c in status.conditions):
        return None
    return Answer.of(status)


def unreported(request: TenantLoadBalancer) -> int | None:
    """The generation of one of the driver's requests that the manager answered and whose
    statuses never reached Octavia (the driver agent was down, the API process went away
    mid-report); None when there is nothing to re-send. A refused generation is the
    driver's to roll back and report, never re-sent as it stands."""
    answer = answer_to(request)
    if tree_of(request) is None or answer is None or not answer.accepted:
        return None
    generation = request.metadata.generation or 0
    reported = (request.metadata.annotations or {}).get(ANNOTATION_REPORTED)
    return None if reported == str(generation) else generation


Gone = Iterable[tuple[ObjectKind, str]]

ACTIVE, DELETED, ERROR = "ACTIVE", "DELETED", "ERROR"
ONLINE, OFFLINE, DEGRADED, NO_MONITOR, DRAINING = (
    "ONLINE",
    "OFFLINE",
    "DEGRADED",
    "NO_MONITOR",
    "DRAINING",
)


def _entry(ident: str, provisioning: str, operating: str | None = None) -> dict[str, str]:
    out = {"id": ident, "provisioning_status": provisioning}
    if operating is not None:
        out["operating_status"] = operating
    return out


def _member_operating(
    lb: LoadBalancer, answer: Answer, pool: Pool, member: Member, listener_up: bool | None
) -> str:
    if listener_up is None or not _ready(lb, listener_up, pool, member):
        return DRAINING if member.admin_state_up and member.weight == 0 else OFFLINE
    # The gateway's pools: written for the gateway (its own status is not read back yet).
    by_gateway = pool.id in gateway_pools(lb)
    serving = by_gateway or (
        answer.programmed and (lb.mode is Mode.PROXY or member.address in answer.next_hops)
    )
    if not serving:
        return OFFLINE
    # Only the gateway probes members (an L4 pool's monitor is kept, not carried out).
    return ONLINE if by_gateway and probed(pool) else NO_MONITOR


def status_update(
    lb: LoadBalancer,
    answer: Answer,
    *,
    gone: Gone = (),
    failed: tuple[ObjectKind, str] | None = None,
) -> dict[str, list[dict[str, str]]]:
    """The status update (octavia-lib's `update_loadbalancer_status` dictionary) for the
    whole tree once the manager answered: every object ACTIVE (the load balancer and its
    listeners too, or Octavia keeps them immutable), operating statuses from the answer,
    `gone` objects DELETED, and the `failed` object ERROR."""
    out: dict[str, list[dict[str, str]]] = {k.value: [] for k in ObjectKind}
    in_use = {**gateway_pools(lb), **{pool.id: up for pool, up in serving_pools(lb)}}
    lb_operating = ONLINE if answer.accepted and answer.addresses else ERROR
    if not lb.admin_state_up:
        lb_operating = OFFLINE
    out[ObjectKind.LOADBALANCER].append(_entry(lb.id, ACTIVE, lb_operating))
    for listener in lb.listeners:
        up = lb.admin_state_up and listener.admin_state_up
        operating = (ONLINE if lb_operating == ONLINE else lb_operating) if up else OFFLINE
        out[ObjectKind.LISTENER].append(_entry(listener.id, ACTIVE, operating))
        for policy in listener.l7policies:
            on = ONLINE if up and policy.admin_state_up else OFFLINE
            out[ObjectKind.L7POLICY].append(_entry(policy.id, ACTIVE, on))
            for rule in policy.rules:
                rule_on = ONLINE if on == ONLINE and rule.admin_state_up else OFFLINE
                out[ObjectKind.L7RULE].append(_entry(rule.id, ACTIVE, rule_on))
    for pool in lb.pools:
        listener_up = in_use.get(pool.id)
        members = [(m, _member_operating(lb, answer, pool, m, listener_up)) for m in pool.members]
        for member, operating in members:
            out[ObjectKind.MEMBER].append(_entry(member.id, ACTIVE, operating))
        serving = [op for _, op in members if op in (ONLINE, NO_MONITOR)]
        if not pool.admin_state_up or listener_up is None:
            operating = OFFLINE
        elif not members or len(serving) == len(members):
            operating = ONLINE
        else:
            operating = DEGRADED if serving else ERROR
        out[ObjectKind.POOL].append(_entry(pool.id, ACTIVE, operating))
        monitor = pool.health_monitor
        if monitor is not None:
            operating = ONLINE if monitor.admin_state_up else OFFLINE
            out[ObjectKind.HEALTHMONITOR].append(_entry(monitor.id, ACTIVE, operating))
    for kind, ident in gone:
        out[kind].append(_entry(ident, DELETED))
    if failed is not None:
        kind, ident = failed
        out[kind] = [e for e in out[kind] if e["id"] != ident]
        out[kind].append(_entry(ident, ERROR, ERROR))
    return {k: v for k, v in out.items() if v}


def deleted_update(lb: LoadBalancer, *, lb_gone: bool = True) -> dict[str, list[dict[str, str]]]:
    """Every object of the tree DELETED (a cascade delete)."""
    gone: list[tuple[ObjectKind, str]] = [(ObjectKind.LISTENER, li.id) for li in lb.listeners]
    for listener in lb.listeners:
        for policy in listener.l7policies:
            gone.append((ObjectKind.L7POLICY, policy.id))
            gone += [(ObjectKind.L7RULE, r.id) for r in policy.rules]
    for pool in lb.pools:
        gone.append((ObjectKind.POOL, pool.id))
        gone += [(ObjectKind.MEMBER, m.id) for m in pool.members]
        if pool.health_monitor is not None:
            gone.append((ObjectKind.HEALTHMONITOR, pool.health_monitor.id))
    if lb_gone:
        gone.append((ObjectKind.LOADBALANCER, lb.id))
    out: dict[str, list[dict[str, str]]] = {}
    for kind, ident in gone:
        out.setdefault(kind.value, []).append(_entry(ident, DELETED))
    return out


def failed_update(
    lb_id: str, failed: tuple[ObjectKind, str] | None
) -> dict[str, list[dict[str, str]]]:
    """The load balancer back to ACTIVE and the failed object in ERROR (a change the
    driver could not make: the last good state stays in place)."""
    out = {ObjectKind.LOADBALANCER.value: [_entry(lb_id, ACTIVE)]}
    if failed is not None:
        kind, ident = failed
        if kind is ObjectKind.LOADBALANCER:
            out[kind.value] = [_entry(lb_id, ERROR, ERROR)]
        else:
            out[kind.value] = [_entry(ident, ERROR, ERROR)]
    return out


__all__ = [
    "ANNOTATION_TREE",
    "LABEL_LOADBALANCER",
    "LABEL_PROJECT",
    "MODES",
    "SOURCE_CLUSTER",
    "Answer",
    "deleted_update",
    "desired_request",
    "failed_update",
    "request_name",
    "serving_pools",
    "status_update",
    "tree_of",
]
