"""An Octavia load balancer as the driver keeps it (pure): the parts teapot-lb maps.

Octavia hands a provider driver one object per call (a listener, a member) and keeps its
own database; the driver keeps the whole tree of each load balancer beside the
TenantLoadBalancer it maps to (an annotation), edits it per call with the functions here,
and maps the edited tree again (:mod:`.mapping`). `from_provider` reads octavia-lib's
provider dictionaries (``to_dict(recurse=True)``), so nothing here imports octavia-lib.
Unsupported options are refused before a tree is edited (:mod:`.unsupported`); the tree
only holds what teapot-lb maps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Mode(StrEnum):
    """How teapot-lb serves the load balancer (the flavor's `mode`)."""

    ROUTE = "route"
    """The VIP is routed (BGP, ECMP) to the members, which accept it as their own."""
    PROXY = "proxy"
    """The shared gateway proxies to the members (teapot-lb's Gateway mode)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


T = TypeVar("T", bound=BaseModel)


class HealthMonitor(_Frozen):
    id: str
    type: str
    delay: int = 5
    timeout: int = 5
    max_retries: int = 3
    max_retries_down: int = 3
    url_path: str | None = None
    http_method: str | None = None
    expected_codes: str | None = None
    admin_state_up: bool = True
    http_version: float | None = None
    domain_name: str | None = None


class Member(_Frozen):
    id: str
    address: str
    protocol_port: int
    name: str = ""
    weight: int = 1
    admin_state_up: bool = True


class Pool(_Frozen):
    id: str
    protocol: str
    lb_algorithm: str = "ROUND_ROBIN"
    name: str = ""
    admin_state_up: bool = True
    members: tuple[Member, ...] = ()
    health_monitor: HealthMonitor | None = None


class L7Rule(_Frozen):
    """One condition of an L7 policy (Octavia ANDs a policy's rules)."""

    id: str
    type: str
    compare_type: str
    value: str
    key: str | None = None
    invert: bool = False
    admin_state_up: bool = True


class L7Policy(_Frozen):
    """What a listener does with the requests its rules match (first by `position`)."""

    id: str
    action: str
    position: int = 1
    redirect_pool_id: str | None = None
    redirect_url: str | None = None
    redirect_prefix: str | None = None
    redirect_http_code: int | None = None
    admin_state_up: bool = True
    rules: tuple[L7Rule, ...] = ()


class Listener(_Frozen):
    id: str
    protocol: str
    protocol_port: int
    name: str = ""
    default_pool_id: str | None = None
    admin_state_up: bool = True
    l7policies: tuple[L7Policy, ...] = ()
    certificates: int = 0
    """TERMINATED_HTTPS: how many certificates (default, then SNI) Octavia gave; their PEM
    is written to Secrets when given and never kept in the tree (which is an annotation)."""
    certificate_hosts: tuple[tuple[str, ...], ...] = ()
    """The DNS names of each certificate (same order; public, unlike the PEM): which one a
    hostname is served with by SNI. Empty when not read."""


class LoadBalancer(_Frozen):
    id: str
    project_id: str
    name: str = ""
    vip_address: str | None = None
    admin_state_up: bool = True
    mode: Mode = Mode.ROUTE
    listeners: tuple[Listener, ...] = ()
    pools: tuple[Pool, ...] = Field(default=())

    def pool(self, pool_id: str) -> Pool | None:
        return next((p for p in self.pools if p.id == pool_id), None)

    def listener(self, listener_id: str) -> Listener | None:
        return next((li for li in self.listeners if li.id == listener_id), None)

    def pool_of_member(self, member_id: str) -> Pool | None:
        return next((p for p in self.pools if any(m.id == member_id for m in p.members)), None)

    def listener_of_policy(self, policy_id: str) -> Listener | None:
        return next(
            (li for li in self.listeners if any(p.id == policy_id for p in li.l7policies)), None
        )


# ---------------------------------------------------------------- provider dictionaries


def _get(d: Mapping[str, Any], key: str, default: Any) -> Any:
    """octavia-lib renders unset attributes as None: read those as the default."""
    value = d.get(key)
    return default if value is None else value


def health_monitor_from_provider(d: Mapping[str, Any]) -> HealthMonitor:
    return HealthMonitor(
        id=str(d["healthmonitor_id"]),
        type=str(_get(d, "type", "TCP")),
        delay=int(_get(d, "delay", 5)),
        timeout=int(_get(d, "timeout", 5)),
        max_retries=int(_get(d, "max_retries", 3)),
        max_retries_down=int(_get(d, "max_retries_down", 3)),
        url_path=d.get("url_path"),
        http_method=d.get("http_method"),
        expected_codes=d.get("expected_codes"),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
        http_version=d.get("http_version"),
        domain_name=d.get("domain_name"),
    )


def member_from_provider(d: Mapping[str, Any]) -> Member:
    return Member(
        id=str(d["member_id"]),
        address=str(d["address"]),
        protocol_port=int(d["protocol_port"]),
        name=str(_get(d, "name", "")),
        weight=int(_get(d, "weight", 1)),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
    )


def pool_from_provider(d: Mapping[str, Any]) -> Pool:
    monitor = d.get("healthmonitor")
    return Pool(
        id=str(d["pool_id"]),
        protocol=str(d["protocol"]),
        lb_algorithm=str(_get(d, "lb_algorithm", "ROUND_ROBIN")),
        name=str(_get(d, "name", "")),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
        members=tuple(member_from_provider(m) for m in _get(d, "members", []) if m),
        health_monitor=health_monitor_from_provider(monitor) if monitor else None,
    )


def l7rule_from_provider(d: Mapping[str, Any]) -> L7Rule:
    return L7Rule(
        id=str(d["l7rule_id"]),
        type=str(d["type"]),
        compare_type=str(d["compare_type"]),
        value=str(_get(d, "value", "")),
        key=d.get("key"),
        invert=bool(_get(d, "invert", False)),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
    )


def l7policy_from_provider(d: Mapping[str, Any]) -> L7Policy:
    return L7Policy(
        id=str(d["l7policy_id"]),
        action=str(d["action"]),
        position=int(_get(d, "position", 1)),
        redirect_pool_id=d.get("redirect_pool_id"),
        redirect_url=d.get("redirect_url"),
        redirect_prefix=d.get("redirect_prefix"),
        redirect_http_code=d.get("redirect_http_code"),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
        rules=tuple(l7rule_from_provider(r) for r in _get(d, "rules", []) if r),
    )


def certificates_in(d: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A listener's TLS containers as Octavia gives them to the driver (default first)."""
    default = d.get("default_tls_container_data")
    return [c for c in [default, *_get(d, "sni_container_data", [])] if c]


def certificate_count(d: Mapping[str, Any]) -> int:
    """How many certificates a listener has: those given, or those referred to (Octavia's
    listener create passes the SNI references without their data)."""
    refs = int(bool(d.get("default_tls_container_ref"))) + len(_get(d, "sni_container_refs", []))
    return max(len(certificates_in(d)), refs)


def listener_from_provider(d: Mapping[str, Any]) -> Listener:
    pool = d.get("default_pool")
    pool_id = d.get("default_pool_id") or (pool.get("pool_id") if pool else None)
    return Listener(
        id=str(d["listener_id"]),
        protocol=str(d["protocol"]),
        protocol_port=int(d["protocol_port"]),
        name=str(_get(d, "name", "")),
        default_pool_id=str(pool_id) if pool_id else None,
        admin_state_up=bool(_get(d, "admin_state_up", True)),
        l7policies=tuple(l7policy_from_provider(p) for p in _get(d, "l7policies", []) if p),
        certificates=certificate_count(d),
    )


def pools_in(d: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every pool dictionary of a provider load balancer: its `pools` and its listeners'
    default pools (a graph create nests them), each once."""
    seen: dict[str, Mapping[str, Any]] = {}
    for p in _get(d, "pools", []):
        if p:
            seen.setdefault(str(p["pool_id"]), p)
    for li in _get(d, "listeners", []):
        pool = li.get("default_pool") if li else None
        if pool:
            seen.setdefault(str(pool["pool_id"]), pool)
    return list(seen.values())


def load_balancer_from_provider(d: Mapping[str, Any], mode: Mode) -> LoadBalancer:
    return LoadBalancer(
        id=str(d["loadbalancer_id"]),
        project_id=str(_get(d, "project_id", "")),
        name=str(_get(d, "name", "")),
        vip_address=d.get("vip_address"),
        admin_state_up=bool(_get(d, "admin_state_up", True)),
        mode=mode,
        listeners=tuple(listener_from_provider(li) for li in _get(d, "listeners", []) if li),
        pools=tuple(pool_from_provider(p) for p in pools_in(d)),
    )


# ---------------------------------------------------------------- edits (one per call)


def merged(current: T, changes: Mapping[str, Any]) -> T:
    """`current` with the fields an update names (octavia-lib's update objects carry only
    the changed attributes; None is "not given")."""
    fields = type(current).model_fields
    children = ("id", "l7policies", "rules", "members", "health_monitor", "certificates")
    update = {
        k: v for k, v in changes.items() if k in fields and k not in children and v is not None
    }
    return type(current).model_validate({**current.model_dump(), **update})


def _put(items: Iterable[T], item: T, key: Callable[[T], str]) -> tuple[T, ...]:
    out = [x for x in items if key(x) != key(item)]
    out.append(item)
    return tuple(out)


def put_listener(lb: LoadBalancer, listener: Listener) -> LoadBalancer:
    return lb.model_copy(update={"listeners": _put(lb.listeners, listener, lambda x: x.id)})


def drop_listener(lb: LoadBalancer, listener_id: str) -> LoadBalancer:
    kept = tuple(li for li in lb.listeners if li.id != listener_id)
    return lb.model_copy(update={"listeners": kept})


def put_pool(lb: LoadBalancer, pool: Pool, *, listener_id: str | None = None) -> LoadBalancer:
    """Add or replace `pool` (keeping its members and monitor when replacing with a pool
    that has none: an update names only the pool's own fields); `listener_id` makes it
    that listener's default pool."""
    old = lb.pool(pool.id)
    if old is not None:
        pool = pool.model_copy(
            update={
                "members": pool.members or old.members,
                "health_monitor": pool.health_monitor or old.health_monitor,
            }
        )
    out = lb.model_copy(update={"pools": _put(lb.pools, pool, lambda x: x.id)})
    listener = out.listener(listener_id) if listener_id else None
    if listener is not None:
        out = put_listener(out, listener.model_copy(update={"default_pool_id": pool.id}))
    return out


def drop_pool(lb: LoadBalancer, pool_id: str) -> LoadBalancer:
    listeners = tuple(
        li.model_copy(update={"default_pool_id": None}) if li.default_pool_id == pool_id else li
        for li in lb.listeners
    )
    pools = tuple(p for p in lb.pools if p.id != pool_id)
    return lb.model_copy(update={"listeners": listeners, "pools": pools})


def _with_pool(lb: LoadBalancer, pool_id: str, **update: Any) -> LoadBalancer:
    pools = tuple(p.model_copy(update=update) if p.id == pool_id else p for p in lb.pools)
    return lb.model_copy(update={"pools": pools})


def put_member(lb: LoadBalancer, pool_id: str, member: Member) -> LoadBalancer:
    pool = lb.pool(pool_id)
    members = _put(pool.members if pool else (), member, lambda x: x.id)
    return _with_pool(lb, pool_id, members=members)


def drop_member(lb: LoadBalancer, member_id: str) -> LoadBalancer:
    pool = lb.pool_of_member(member_id)
    if pool is None:
        return lb
    members = tuple(m for m in pool.members if m.id != member_id)
    return _with_pool(lb, pool.id, members=members)


def set_members(lb: LoadBalancer, pool_id: str, members: Iterable[Member]) -> LoadBalancer:
    return _with_pool(lb, pool_id, members=tuple(members))


def put_health_monitor(lb: LoadBalancer, pool_id: str, monitor: HealthMonitor) -> LoadBalancer:
    return _with_pool(lb, pool_id, health_monitor=monitor)


def drop_health_monitor(lb: LoadBalancer, pool_id: str) -> LoadBalancer:
    return _with_pool(lb, pool_id, health_monitor=None)


def keep_certificates(lb: LoadBalancer, kept: LoadBalancer | None) -> LoadBalancer:
    """`lb` (rebuilt from Octavia's database, as in a failover) with the certificate count
    of `kept`'s listeners where it read none: their Secrets stay written."""
    if kept is None:
        return lb
    counts = {li.id: li.certificates for li in kept.listeners}
    hosts = {li.id: li.certificate_hosts for li in kept.listeners}
    listeners = tuple(
        li if li.certificates else li.model_copy(update={"certificates": counts.get(li.id, 0)})
        for li in lb.listeners
    )
    listeners = tuple(
        li.model_copy(update={"certificate_hosts": hosts[li.id]})
        if not li.certificate_hosts and len(hosts.get(li.id, ())) == li.certificates > 0
        else li
        for li in listeners
    )
    return lb.model_copy(update={"listeners": listeners})


def put_l7policy(lb: LoadBalancer, listener_id: str, policy: L7Policy) -> LoadBalancer:
    """Add or move `policy` on its listener to its position, as Octavia does: the others
    at that position and after move one down, and positions are renumbered 1..n."""
    listener = lb.listener(listener_id)
    if listener is None:
        return lb
    others = sorted((p for p in listener.l7policies if p.id != policy.id), key=lambda p: p.position)
    others.insert(max(policy.position, 1) - 1, policy)
    policies = tuple(p.model_copy(update={"position": i}) for i, p in enumerate(others, 1))
    changed = listener.model_copy(update={"l7policies": policies})
    return lb.model_copy(update={"listeners": _put(lb.listeners, changed, lambda x: x.id)})


def set_l7policies(
    lb: LoadBalancer, listener_id: str, policies: Iterable[Mapping[str, Any]]
) -> LoadBalancer:
    """`lb` with a listener's L7 policies replaced by `policies` (provider dictionaries)."""
    listener = lb.listener(listener_id)
    if listener is None:
        return lb
    parsed = sorted((l7policy_from_provider(p) for p in policies if p), key=lambda p: p.position)
    return put_listener(lb, listener.model_copy(update={"l7policies": tuple(parsed)}))


def drop_l7policy(lb: LoadBalancer, policy_id: str) -> LoadBalancer:
    listener = lb.listener_of_policy(policy_id)
    if listener is None:
        return lb
    kept = tuple(
        p.model_copy(update={"position": i})
        for i, p in enumerate((p for p in listener.l7policies if p.id != policy_id), 1)
    )
    changed = listener.model_copy(update={"l7policies": kept})
    return lb.model_copy(update={"listeners": _put(lb.listeners, changed, lambda x: x.id)})


def _policy(lb: LoadBalancer, policy_id: str) -> tuple[Listener, L7Policy] | None:
    listener = lb.listener_of_policy(policy_id)
    if listener is None:
        return None
    return listener, next(p for p in listener.l7policies if p.id == policy_id)


def put_l7rule(lb: LoadBalancer, policy_id: str, rule: L7Rule) -> LoadBalancer:
    found = _policy(lb, policy_id)
    if found is None:
        return lb
    listener, policy = found
    rules = _put(policy.rules, rule, lambda x: x.id)
    return put_l7policy(lb, listener.id, policy.model_copy(update={"rules": rules}))


def drop_l7rule(lb: LoadBalancer, policy_id: str, rule_id: str) -> LoadBalancer:
    found = _policy(lb, policy_id)
    if found is None:
        return lb
    listener, policy = found
    rules = tuple(r for r in policy.rules if r.id != rule_id)
    return put_l7policy(lb, listener.id, policy.model_copy(update={"rules": rules}))


__all__ = [
    "HealthMonitor",
    "L7Policy",
    "L7Rule",
    "Listener",
    "LoadBalancer",
    "Member",
    "Mode",
    "Pool",
    "certificate_count",
    "certificates_in",
    "drop_health_monitor",
    "drop_l7policy",
    "drop_l7rule",
    "drop_listener",
    "drop_member",
    "drop_pool",
    "health_monitor_from_provider",
    "keep_certificates",
    "l7policy_from_provider",
    "l7rule_from_provider",
    "listener_from_provider",
    "load_balancer_from_provider",
    "member_from_provider",
    "merged",
    "pool_from_provider",
    "pools_in",
    "put_health_monitor",
    "put_l7policy",
    "put_l7rule",
    "put_listener",
    "put_member",
    "put_pool",
    "set_members",
]
