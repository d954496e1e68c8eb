"""The pure controller core: reconcile decisions from a ClusterView, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address
from typing import Any

from model.builders import namespace, pool, service
from teapot_lb import ipam
from teapot_lb.cluster import Kind, Store
from teapot_lb.controller import (
    ANNOTATION_ALLOCATED_FROM,
    REASON_ALLOCATED,
    REASON_CHANGED,
    REASON_FAILED,
    REASON_INVALID,
    REASON_RELEASED,
    ControllerOptions,
    EventType,
    ServiceOutcome,
    UnparsedPool,
    pool_statuses,
    rebuild,
    reconcile_service,
)
from teapot_lb.model import ObjectRef, Problem, parse_object

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def put(store: Store, *documents: dict[str, Any]) -> None:
    for doc in documents:
        obj, problems = parse_object(doc)
        assert obj is not None, problems
        store.put_object(obj)


def applied(store: Store, outcome: ServiceOutcome) -> None:
    """Write back what the outcome says, as an adapter would."""
    svc = store.view().services[outcome.key]
    body = svc.model_dump(mode="json", by_alias=True, exclude_none=True)
    if outcome.status is not None:
        body["status"] = {"loadBalancer": {"ingress": [{"ip": str(ip)} for ip in outcome.status]}}
    if outcome.annotate:
        annotations = dict(body["metadata"].get("annotations") or {})
        annotations.pop(ANNOTATION_ALLOCATED_FROM, None)
        if outcome.allocated_from:
            annotations[ANNOTATION_ALLOCATED_FROM] = outcome.allocated_from
        body["metadata"]["annotations"] = annotations
    put(store, body)


def settle(store: Store, state: Any, *keys: str) -> dict[str, ServiceOutcome]:
    """Reconcile until nothing is left to write; the last outcome per key."""
    queue = list(keys or store.view().services)
    last: dict[str, ServiceOutcome] = {}
    for _ in range(1000):
        if not queue:
            return last
        key = queue.pop(0)
        outcome = reconcile_service(store.view(), state, key)
        if outcome.exists and outcome.writes:
            applied(store, outcome)
            queue.append(key)
        queue.extend(k for k in outcome.requeue if k not in queue)
        last[key] = outcome if key not in last or outcome.events else last[key]
    raise AssertionError("reconcile did not settle")


def ips(store: Store, key: str) -> list[str]:
    return [str(ip) for ip in store.view().services[key].ingress_ips()]


def test_a_new_service_gets_the_lowest_free_ip_its_pool_and_an_event() -> None:
    store = Store()
    put(store, pool("blue", "192.0.2.0/30"), service("web"))
    state = rebuild(store.view())
    outcome = reconcile_service(store.view(), state, "default/web")
    assert outcome.status == (ip_address("192.0.2.0"),)
    assert outcome.annotate and outcome.allocated_from == "blue"
    assert [(e.type, e.reason) for e in outcome.events] == [(EventType.NORMAL, REASON_ALLOCATED)]
    applied(store, outcome)
    again = reconcile_service(store.view(), state, "default/web")
    assert not again.writes and not again.events


def test_requested_ip_pool_annotation_and_dual_stack() -> None:
    store = Store()
    put(
        store,
        pool("v4", "192.0.2.0/28"),
        pool("dual", "198.51.100.0/28", "2001:db8::/124", autoAssign=False),
        service("pinned", ips="192.0.2.7"),
        service("named", pool="dual"),
        service(
            "both", pool="dual", ipFamilyPolicy="RequireDualStack", ipFamilies=["IPv6", "IPv4"]
        ),
    )
    state = rebuild(store.view())
    settle(store, state)
    assert ips(store, "default/pinned") == ["192.0.2.7"]
    assert ips(store, "default/named") == ["198.51.100.0"]
    assert ips(store, "default/both") == ["2001:db8::1", "198.51.100.1"]
    annotations = store.view().services["default/both"].metadata.annotations
    assert annotations[ANNOTATION_ALLOCATED_FROM] == "dual"


def test_sharing_key_allows_distinct_ports_and_refuses_a_port_clash() -> None:
    store = Store()
    put(
        store,
        pool("blue", "192.0.2.0/28"),
        service("dns-tcp", "53", ips="192.0.2.5", sharing_key="dns"),
        service("dns-udp", "53/UDP", ips="192.0.2.5", sharing_key="dns"),
        service("clash", "53", ips="192.0.2.5", sharing_key="dns"),
    )
    state = rebuild(store.view())
    last = settle(store, state, "default/dns-tcp", "default/dns-udp", "default/clash")
    assert ips(store, "default/dns-tcp") == ["192.0.2.5"]
    assert ips(store, "default/dns-udp") == ["192.0.2.5"]
    assert ips(store, "default/clash") == []
    (event,) = last["default/clash"].events
    assert event.type is EventType.WARNING and event.reason == REASON_FAILED
    assert "PortConflict" in event.message


def test_deleted_pool_moves_services_to_another_pool_with_an_event() -> None:
    store = Store()
    put(store, pool("a", "192.0.2.0/30", serviceAllocation={"priority": 1}), service("web"))
    state = rebuild(store.view())
    settle(store, state)
    assert ips(store, "default/web") == ["192.0.2.0"]
    put(store, pool("b", "198.51.100.0/30"))
    store.delete(Kind.ADDRESS_POOL, "lb-system/a")
    last = settle(store, state, "default/web")
    assert ips(store, "default/web") == ["198.51.100.0"]
    (event,) = last["default/web"].events
    assert event.reason == REASON_CHANGED and "PoolGone" in event.message


def test_a_deleted_service_frees_its_ip_for_the_next_one() -> None:
    store = Store()
    put(store, pool("tiny", "192.0.2.8/31", avoidBuggyIPs=False), service("one"), service("two"))
    state = rebuild(store.view())
    settle(store, state)
    put(store, service("three"))
    settle(store, state, "default/three")
    assert ips(store, "default/three") == []
    assert "default/three" in state.refused
    store.delete(Kind.SERVICE, "default/one")
    gone = reconcile_service(store.view(), state, "default/one")
    assert gone.released == (ip_address("192.0.2.8"),) and "default/three" in gone.requeue
    settle(store, state, "default/three")
    assert ips(store, "default/three") == ["192.0.2.8"]


def test_a_freed_address_completes_a_prefer_dual_stack_service_short_of_that_family() -> None:
    store = Store()
    put(store, pool("tiny", "192.0.2.8/32", "2001:db8::/126", avoidBuggyIPs=False))
    put(store, service("one"))
    state = rebuild(store.view())
    settle(store, state)
    put(store, service("both", ipFamilyPolicy="PreferDualStack", ipFamilies=["IPv4", "IPv6"]))
    settle(store, state, "default/both")
    assert ips(store, "default/both") == ["2001:db8::1"]  # the IPv4 was taken
    store.delete(Kind.SERVICE, "default/one")
    gone = reconcile_service(store.view(), state, "default/one")
    assert "default/both" in gone.requeue
    settle(store, state, "default/both")
    assert ips(store, "default/both") == ["192.0.2.8", "2001:db8::1"]
    assert "default/both" not in state.short


def test_rebuild_keeps_the_ips_services_hold() -> None:
    store = Store()
    put(store, pool("blue", "192.0.2.0/28"), *(service(f"s{i}") for i in range(5)))
    state = rebuild(store.view())
    settle(store, state, "default/s3", "default/s1", "default/s4", "default/s0", "default/s2")
    before = {key: ips(store, key) for key in store.view().services}
    restarted = rebuild(store.view())
    put(store, service("late"))
    outcomes = settle(store, restarted, "default/late", *before)
    assert {key: ips(store, key) for key in before} == before
    assert all(not outcomes[key].events for key in before)
    assert ips(store, "default/late") not in before.values()


def test_other_classes_are_never_touched_and_class_only_is_honoured() -> None:
    store = Store()
    put(
        store,
        pool("blue", "192.0.2.0/28"),
        service("theirs", loadBalancerClass="example.com/other"),
        service("unclassed"),
        service("ours", loadBalancerClass="lb.teapot.io/teapot"),
    )
    state = rebuild(store.view(), ControllerOptions(class_only=True))
    settle(store, state)
    assert ips(store, "default/theirs") == []
    assert ips(store, "default/unclassed") == []
    assert ips(store, "default/ours") == ["192.0.2.0"]


def test_a_service_that_stops_being_a_load_balancer_gives_its_ip_back() -> None:
    store = Store()
    put(store, pool("blue", "192.0.2.0/28"), service("web"))
    state = rebuild(store.view())
    settle(store, state)
    body = store.view().services["default/web"].model_dump(mode="json", by_alias=True)
    body["spec"]["type"] = "ClusterIP"
    put(store, body)
    last = settle(store, state, "default/web")
    assert ips(store, "default/web") == []
    assert (
        ANNOTATION_ALLOCATED_FROM not in store.view().services["default/web"].metadata.annotations
    )
    assert last["default/web"].events[0].reason == REASON_RELEASED
    assert state.allocator.assignment("default/web") is None


def test_an_invalid_pool_reports_why_and_the_others_keep_working() -> None:
    store = Store()
    put(
        store,
        pool("good", "192.0.2.0/28"),
        pool("overlapping", "192.0.2.8/29"),
        namespace("default"),
        service("web"),
    )
    broken = UnparsedPool(
        ObjectRef("AddressPool", "lb-system", "typo"),
        (Problem("AddressPool", "typo", "lb-system", "spec.addresses[0]", "not a CIDR"),),
    )
    unparsed = {"lb-system/typo": broken}
    state = rebuild(store.view(), unparsed_pools=unparsed)
    assert [p.name for p in state.allocator.pools] == ["good"]
    settle(store, state)
    assert ips(store, "default/web") == ["192.0.2.0"]
    statuses = {s.key: s for s in pool_statuses(store.view(), state, NOW, unparsed)}
    good = statuses["lb-system/good"]
    assert good.status["assignedIPv4"] == 1 and good.status["availableIPv4"] == 15
    assert good.status["conditions"][0]["status"] == "True" and not good.events
    bad = statuses["lb-system/overlapping"]
    assert bad.status["conditions"][0]["status"] == "False"
    assert "overlaps AddressPool 'good'" in bad.status["conditions"][0]["message"]
    assert [e.reason for e in bad.events] == [REASON_INVALID]
    typo = statuses["lb-system/typo"]
    assert typo.changed and "not a CIDR" in typo.events[0].message


def test_pool_usage_counts_each_family() -> None:
    store = Store()
    put(
        store,
        pool("dual", "192.0.2.0/30", "2001:db8::/126"),
        service("both", ipFamilyPolicy="PreferDualStack", ipFamilies=["IPv4", "IPv6"]),
    )
    state = rebuild(store.view())
    settle(store, state)
    (status,) = pool_statuses(store.view(), state, NOW)
    assert status.status["assignedIPv4"] == 1 and status.status["availableIPv4"] == 3
    # 2001:db8:: (the Subnet-Router anycast address) is never handed out
    assert (
        status.status["assignedIPv6"] == 1 and status.status["availableIPv6"] == 2
    )  # 2001:db8:: skipped
    assert state.allocator.usage()["dual"][ipam.IPFamily.V6].assigned == 1
