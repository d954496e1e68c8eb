"""Octavia load balancer → TenantLoadBalancer, and the manager's answer → statuses."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address

from teapot_lb.model.common import Condition, ConditionStatus
from teapot_lb.model.service import ExternalTrafficPolicy, Protocol
from teapot_lb.model.tenancy import (
    Tenant,
    TenantLoadBalancer,
    TenantLoadBalancerStatus,
    TenantMode,
)
from teapot_lb.octavia import tree as t
from teapot_lb.octavia.l7 import l7_refusals
from teapot_lb.octavia.mapping import (
    ANNOTATION_REPORTED,
    LABEL_LOADBALANCER,
    Answer,
    deleted_update,
    desired_request,
    failed_update,
    refusal_text,
    status_update,
    tree_of,
    unreported,
)
from teapot_lb.octavia.unsupported import ObjectKind, tree_refusals
from teapot_lb.tenancy.vet import vet

from .builders import (
    LB_ID,
    LISTENER_ID,
    MONITOR_ID,
    POOL_ID,
    PROJECT,
    load_balancer,
    member,
    pool,
    tree,
)

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def condition(kind: str, ok: bool) -> Condition:
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    return Condition(type=kind, status=status, reason=kind, message="", last_transition_time=NOW)


def answer(hops: list[str], *, accepted: bool = True, programmed: bool = True) -> Answer:
    conditions = [condition("Accepted", accepted), condition("Programmed", programmed)]
    status = TenantLoadBalancerStatus(
        addresses=["198.51.100.1"] if accepted else [], next_hops=hops, conditions=conditions
    )
    found = Answer.of(status)
    assert found is not None
    return found


def by_id(update: dict[str, list[dict[str, str]]], kind: ObjectKind) -> dict[str, tuple[str, ...]]:
    return {
        e["id"]: (e["provisioning_status"], e.get("operating_status", ""))
        for e in update.get(kind.value, [])
    }


def test_a_tcp_load_balancer_is_one_request_in_the_tenants_namespace() -> None:
    request = desired_request(tree(), "tenant-acme")
    assert request.metadata.namespace == "tenant-acme"
    assert request.metadata.name == f"octavia-{LB_ID}"
    assert request.metadata.labels[LABEL_LOADBALANCER] == LB_ID
    spec = request.spec
    assert spec.mode is TenantMode.ROUTE
    assert [(p.protocol, p.port, p.node_port) for p in spec.ports] == [(Protocol.TCP, 80, None)]
    assert spec.requested_ips == [ip_address("198.51.100.1")]
    assert spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL
    assert [(b.addresses, b.ready) for b in spec.backends] == [
        ([ip_address(f"192.0.2.{10 + i}")], True) for i in range(3)
    ]
    assert spec.source.namespace == PROJECT and spec.source.uid == LB_ID


def test_an_https_listener_passes_tls_through_as_a_tcp_port_on_the_vip() -> None:
    members = [member(i, port=443) for i in range(2)]
    d = load_balancer(pools=[pool(members, protocol="HTTPS", hm=False)])
    d["listeners"][0].update(protocol="HTTPS", protocol_port=443)
    lb = t.load_balancer_from_provider(d, t.Mode.ROUTE)
    assert tree_refusals(lb) == [] and l7_refusals(lb) == []
    spec = desired_request(lb, "tenant-acme").spec
    assert [(p.protocol, p.port) for p in spec.ports] == [(Protocol.TCP, 443)]
    assert [b.addresses for b in spec.backends] == [
        [ip_address(f"192.0.2.{10 + i}")] for i in range(2)
    ]


def test_the_tree_rides_along_and_comes_back() -> None:
    lb = tree()
    assert tree_of(desired_request(lb, "tenant-acme")) == lb


def test_proxy_mode_is_gateway_mode_with_the_members_port() -> None:
    lb = tree(t.Mode.PROXY, pools=[pool([member(0, port=8080)])])
    spec = desired_request(lb, "ns").spec
    assert spec.mode is TenantMode.GATEWAY
    assert [(p.port, p.node_port) for p in spec.ports] == [(80, 8080)]


def test_down_or_drained_members_and_a_down_load_balancer_are_not_ready() -> None:
    members = [member(0), member(1, admin_state_up=False), member(2, weight=0)]
    lb = tree(pools=[pool(members)])
    assert [b.ready for b in desired_request(lb, "ns").spec.backends] == [True, False, False]
    down = lb.model_copy(update={"admin_state_up": False})
    assert not any(b.ready for b in desired_request(down, "ns").spec.backends)


def test_members_of_a_pool_no_listener_uses_are_not_backends() -> None:
    lb = tree(listeners=0)
    assert desired_request(lb, "ns").spec.backends == []


def test_edits_add_and_remove_members_listeners_pools_and_monitors() -> None:
    lb = tree()
    lb = t.put_member(lb, POOL_ID, t.member_from_provider(member(7)))
    assert len(desired_request(lb, "ns").spec.backends) == 4
    lb = t.drop_member(lb, member(0)["member_id"])
    assert ip_address("192.0.2.10") not in [
        a for b in desired_request(lb, "ns").spec.backends for a in b.addresses
    ]
    lb = t.set_members(lb, POOL_ID, [t.member_from_provider(member(1))])
    assert len(desired_request(lb, "ns").spec.backends) == 1
    lb = t.drop_health_monitor(lb, POOL_ID)
    assert lb.pools[0].health_monitor is None
    lb = t.drop_listener(lb, LISTENER_ID)
    assert desired_request(lb, "ns").spec.ports == []
    lb = t.drop_pool(lb, POOL_ID)
    assert lb.pools == ()


def test_a_pool_update_keeps_its_members_and_monitor() -> None:
    lb = tree()
    update = t.pool_from_provider(pool(members=0, hm=False, lb_algorithm="SOURCE_IP_PORT"))
    lb = t.put_pool(lb, update)
    assert lb.pools[0].lb_algorithm == "SOURCE_IP_PORT"
    assert len(lb.pools[0].members) == 3 and lb.pools[0].health_monitor is not None


def test_an_accepted_request_makes_the_whole_chain_active_and_online() -> None:
    lb = tree()
    update = status_update(lb, answer([f"192.0.2.{10 + i}" for i in range(3)]))
    assert by_id(update, ObjectKind.LOADBALANCER) == {LB_ID: ("ACTIVE", "ONLINE")}
    assert by_id(update, ObjectKind.LISTENER) == {LISTENER_ID: ("ACTIVE", "ONLINE")}
    assert by_id(update, ObjectKind.POOL) == {POOL_ID: ("ACTIVE", "ONLINE")}
    # An L4 pool's monitor is kept, not carried out: nothing probes route mode's members.
    assert set(by_id(update, ObjectKind.MEMBER).values()) == {("ACTIVE", "NO_MONITOR")}
    assert by_id(update, ObjectKind.HEALTHMONITOR) == {MONITOR_ID: ("ACTIVE", "ONLINE")}


def test_members_not_announced_are_offline_and_the_pool_degraded() -> None:
    update = status_update(tree(), answer(["192.0.2.10"]))
    members = by_id(update, ObjectKind.MEMBER)
    assert sorted(op for _, op in members.values()) == ["NO_MONITOR", "OFFLINE", "OFFLINE"]
    assert by_id(update, ObjectKind.POOL) == {POOL_ID: ("ACTIVE", "DEGRADED")}


def test_without_a_monitor_members_say_no_monitor() -> None:
    lb = t.drop_health_monitor(tree(), POOL_ID)
    update = status_update(lb, answer([f"192.0.2.{10 + i}" for i in range(3)]))
    assert set(by_id(update, ObjectKind.MEMBER).values()) == {("ACTIVE", "NO_MONITOR")}


def test_gone_objects_are_deleted_and_a_failed_one_in_error() -> None:
    gone_id = member(9)["member_id"]
    update = status_update(tree(), answer([]), gone=[(ObjectKind.MEMBER, gone_id)])
    assert by_id(update, ObjectKind.MEMBER)[gone_id] == ("DELETED", "")
    failed = failed_update(LB_ID, (ObjectKind.MEMBER, gone_id))
    assert by_id(failed, ObjectKind.LOADBALANCER) == {LB_ID: ("ACTIVE", "")}
    assert by_id(failed, ObjectKind.MEMBER) == {gone_id: ("ERROR", "ERROR")}


def test_a_cascade_delete_reports_every_object_deleted() -> None:
    update = deleted_update(tree())
    assert {k: len(v) for k, v in update.items()} == {
        "listeners": 1, "pools": 1, "members": 3, "healthmonitors": 1, "loadbalancers": 1,
    }  # fmt: skip
    assert all(e["provisioning_status"] == "DELETED" for v in update.values() for e in v)


def answered(generation: int, observed: int, *, reported: str | None = None) -> TenantLoadBalancer:
    """The request of tree() at `generation`, its conditions observing `observed`."""
    request = desired_request(tree(), "tenant-acme")
    conditions = [
        c.model_copy(update={"observed_generation": observed})
        for c in (condition("Accepted", True), condition("Programmed", True))
    ]
    annotations = dict(request.metadata.annotations or {})
    if reported is not None:
        annotations[ANNOTATION_REPORTED] = reported
    meta = request.metadata.model_copy(
        update={"generation": generation, "annotations": annotations}
    )
    status = TenantLoadBalancerStatus(addresses=["198.51.100.1"], conditions=conditions)
    return request.model_copy(update={"metadata": meta, "status": status})


def test_an_answered_generation_not_marked_reported_is_to_be_resent() -> None:
    assert unreported(answered(3, 3)) == 3
    assert unreported(answered(3, 3, reported="3")) is None
    assert unreported(answered(3, 3, reported="2")) == 3  # a newer change, never delivered
    assert unreported(answered(3, 2)) is None  # not answered yet: the driver is on it


def test_a_member_outside_the_node_networks_is_refused_naming_the_member_and_the_rule() -> None:
    outside = member(0, "203.0.113.77")
    request = desired_request(tree(pools=[pool([outside, member(1)])]), "tenant-acme")
    tenant = Tenant.model_validate(
        {"apiVersion": "lb.teapot.io/v1alpha1", "kind": "Tenant", "metadata": {"name": "acme"},
         "spec": {"namespace": "tenant-acme", "nodeNetworks": ["192.0.2.0/24"],
                  "modes": ["Route"]}}
    )  # fmt: skip
    [refused] = [r for r in vet(request, tenant, {}) if r.rule == "BackendNotAllowed"]
    text = refusal_text(request, refused)
    assert text.startswith(f"member {outside['member_id']}: ")
    assert "203.0.113.77 is outside the node networks of Tenant acme (192.0.2.0/24)" in text
    assert text.endswith("[BackendNotAllowed]")
