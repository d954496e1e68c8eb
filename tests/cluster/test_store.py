"""The object cache and its views."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.cluster.changes import LIMIT
from teapot_lb.model import AddressPool, EndpointSlice, Service, parse_ip, parse_object
from teapot_lb.model.common import creation_order
from teapot_lb.standalone.assign import Assignment


def _service(ns: str, name: str) -> Service:
    obj, _ = parse_object(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }
    )
    assert isinstance(obj, Service)
    return obj


def _slice(ns: str, service: str, ready: dict[str, bool]) -> EndpointSlice:
    obj, _ = parse_object(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "namespace": ns,
                "name": f"{service}-abc",
                "labels": {"kubernetes.io/service-name": service},
            },
            "endpoints": [
                {"addresses": ["192.0.2.50"], "nodeName": n, "conditions": {"ready": r}}
                for n, r in ready.items()
            ],
        }
    )
    assert isinstance(obj, EndpointSlice)
    return obj


def test_view_is_a_snapshot_that_later_changes_do_not_alter() -> None:
    store = Store()
    store.put_object(_service("web", "a"))
    before = store.view()
    store.put_object(_service("web", "b"))
    assert sorted(before.services) == ["web/a"]
    assert sorted(store.view().services) == ["web/a", "web/b"]


def test_view_is_reused_until_something_changes() -> None:
    store = Store()
    store.put_object(_service("web", "a"))
    assert store.view() is store.view()
    store.delete(Kind.SERVICE, "web/a")
    assert store.view().services == {}


def test_ready_endpoint_nodes_come_from_the_services_slices_only() -> None:
    store = Store()
    store.put_object(_slice("web", "a", {"node-1": True, "node-2": False}))
    store.put_object(_slice("other", "a", {"node-3": True}))
    assert store.view().ready_endpoint_nodes("web/a") == {"node-1"}


def test_pool_of_finds_the_pool_holding_an_address() -> None:
    store = Store()
    pool, _ = parse_object(
        {
            "apiVersion": "lb.teapot.io/v1alpha1",
            "kind": "AddressPool",
            "metadata": {"name": "public"},
            "spec": {"addresses": ["192.0.2.0/28"]},
        }
    )
    store.put_object(pool)
    view = store.view()
    found = view.pool_of(parse_ip("192.0.2.3"))
    assert found is not None and found.name == "public"
    assert view.pool_of(parse_ip("198.51.100.1")) is None


def _pool(name: str, addresses: list[str], avoid_buggy: bool, created: int | None) -> AddressPool:
    meta: dict[str, Any] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = f"2026-01-01T00:00:{created:02d}Z"
    spec = {"addresses": addresses, "avoidBuggyIPs": avoid_buggy}
    obj, problems = parse_object(
        {"apiVersion": "lb.teapot.io/v1alpha1", "kind": "AddressPool", "metadata": meta,
         "spec": spec}
    )  # fmt: skip
    assert isinstance(obj, AddressPool), problems
    return obj


def _entry(six: bool, first: int, last: int) -> str:
    base = ip_address("2001:db8::") if six else ip_address("192.0.2.0")
    return f"{base + min(first, last)}-{base + max(first, last)}"


_ranges = st.lists(
    st.tuples(st.booleans(), st.integers(0, 255), st.integers(0, 255)), min_size=1, max_size=3
)


@given(
    pools=st.lists(st.tuples(_ranges, st.booleans(), st.none() | st.integers(0, 59)), max_size=6),
    probes=st.lists(st.tuples(st.booleans(), st.integers(0, 255)), min_size=1, max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_pool_of_is_the_oldest_pool_that_may_hand_out_the_address_even_where_pools_overlap(
    pools: list[tuple[list[tuple[bool, int, int]], bool, int | None]],
    probes: list[tuple[bool, int]],
) -> None:
    store = Store()
    for i, (ranges, avoid_buggy, created) in enumerate(pools):
        addresses = [_entry(*rng) for rng in ranges]
        store.put_object(_pool(f"pool-{i}", addresses, avoid_buggy, created))
    view = store.view()
    by_age = sorted(view.pools.values(), key=creation_order)
    for six, offset in probes:
        ip = (ip_address("2001:db8::") if six else ip_address("192.0.2.0")) + offset
        oldest = next((pool for pool in by_age if pool.contains(ip)), None)
        assert view.pool_of(ip) is oldest


def _labelled_slice(name: str, service: str | None) -> EndpointSlice:
    labels = {"kubernetes.io/service-name": service} if service else {}
    obj, _ = parse_object(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"namespace": "default", "name": name, "labels": labels},
            "endpoints": [],
        }
    )
    assert isinstance(obj, EndpointSlice)
    return obj


_slice_changes = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "replace"]),
        st.sampled_from(["e1", "e2", "e3"]),
        st.sampled_from([None, "s1", "s2"]),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(_slice_changes)
def test_the_stores_slice_index_equals_a_view_indexing_every_slice(
    changes: list[tuple[str, str, str | None]],
) -> None:
    store = Store()
    for what, name, service in changes:
        key = f"default/{name}"
        if what == "put":
            store.put(Kind.ENDPOINT_SLICE, key, _labelled_slice(name, service))
        elif what == "delete":
            store.delete(Kind.ENDPOINT_SLICE, key)
        else:
            store.replace(Kind.ENDPOINT_SLICE, {key: _labelled_slice(name, service)})
        view = store.view()
        fresh = ClusterView(endpoint_slices=view.endpoint_slices)  # indexes every slice
        for svc in ("default/s1", "default/s2"):
            assert sorted(map(id, view.slices_of(svc))) == sorted(map(id, fresh.slices_of(svc)))


def test_the_change_log_names_what_changed_and_forgets_the_oldest() -> None:
    store = Store()
    start = store.changes.mark
    store.put(Kind.ENDPOINT_SLICE, "default/e1", _labelled_slice("e1", "s1"))
    store.put(Kind.ENDPOINT_SLICE, "default/e1", _labelled_slice("e1", "s2"))
    changes = store.changes.between(start, store.changes.mark)
    assert changes is not None
    assert [(c.key, c.services) for c in changes] == [
        ("default/e1", ("default/s1",)),
        ("default/e1", ("default/s1", "default/s2")),
    ]
    for _ in range(3 * LIMIT):
        store.delete(Kind.ENDPOINT_SLICE, "default/e1")
        store.put(Kind.ENDPOINT_SLICE, "default/e1", _labelled_slice("e1", "s1"))
    assert store.changes.between(start, store.changes.mark) is None  # a reader walks again
    recent = store.changes.mark - 10
    assert store.changes.between(recent, store.changes.mark) is not None


def test_a_replace_records_only_the_keys_it_changed() -> None:
    store = Store()
    a, b, c = _service("default", "a"), _service("default", "b"), _service("default", "c")
    store.replace(Kind.SERVICE, {"default/a": a, "default/b": b})
    view, mark = store.view(), store.changes.mark
    # The same objects again (an unchanged manifest file): nothing changed, same view.
    store.replace(Kind.SERVICE, {"default/a": a, "default/b": b})
    assert store.changes.mark == mark and store.view() is view
    # One replaced by an equal copy (a changed file parsed again), one gone, one new.
    a2 = _service("default", "a")
    store.replace(Kind.SERVICE, {"default/a": a2, "default/c": c})
    changes = store.changes.between(mark, store.changes.mark)
    assert changes is not None
    assert sorted(ch.key for ch in changes) == ["default/a", "default/b", "default/c"]
    assert store.get(Kind.SERVICE, "default/a") is a2
    assert sorted(store.view().services) == ["default/a", "default/c"]


def test_a_replace_of_most_objects_records_every_key() -> None:
    store = Store()
    services = {f"default/s{i}": _service("default", f"s{i}") for i in range(1100)}
    mark = store.changes.mark
    store.replace(Kind.SERVICE, services)
    changes = store.changes.between(mark, store.changes.mark)
    assert changes is not None and [ch.key for ch in changes] == [""]  # EVERY_KEY
    assert len(store.view().services) == 1100


def test_what_was_assigned_beside_a_service_is_read_in_place_of_its_status() -> None:
    store = Store()
    store.put_object(_service("web", "a"))
    view = store.view()
    svc = view.services["web/a"]
    assert view.ingress_ips("web/a", svc) == [] and view.vrids_annotation("web/a", svc) is None
    mark = store.changes.mark
    store.assign("web/a", Assignment("web/a", (parse_ip("192.0.2.7"),), vrids="vip=4"))
    view = store.view()
    assert view.services["web/a"] is svc  # the Service is not copied
    assert view.ingress_ips("web/a", svc) == [parse_ip("192.0.2.7")]
    assert view.vrids_annotation("web/a", svc) == "vip=4"
    changes = store.changes.between(mark, store.changes.mark)
    assert changes is not None and [(c.kind, c.key) for c in changes] == [(Kind.SERVICE, "web/a")]
    # An equal assignment changes nothing and keeps the object held; None drops it.
    held = view.assigned["web/a"]
    mark = store.changes.mark
    store.assign("web/a", Assignment("web/a", (parse_ip("192.0.2.7"),), vrids="vip=4"))
    store.replace_assigned({"web/a": Assignment("web/a", (parse_ip("192.0.2.7"),), vrids="vip=4")})
    assert store.changes.between(mark, store.changes.mark) == []
    assert store.view().assigned["web/a"] is held
    store.assign("web/a", None)
    assert store.view().ingress_ips("web/a", svc) == []


def test_replacing_the_assignments_records_the_keys_that_changed_or_went() -> None:
    store = Store()
    one = {f"web/s{i}": Assignment(f"web/s{i}", (parse_ip(f"192.0.2.{i}"),)) for i in range(3)}
    store.replace_assigned(one)
    mark = store.changes.mark
    two = dict(one)
    two["web/s1"] = Assignment("web/s1", (parse_ip("192.0.2.99"),))
    del two["web/s2"]
    store.replace_assigned(two)
    changes = store.changes.between(mark, store.changes.mark)
    assert changes is not None
    assert sorted(c.key for c in changes) == ["web/s1", "web/s2"]
    assert dict(store.view().assigned) == two


def test_a_view_after_a_change_copies_only_the_changed_kind() -> None:
    store = Store()
    store.put_object(_service("web", "a"))
    store.assign("web/a", Assignment("web/a", (parse_ip("192.0.2.7"),)))
    before = store.view()
    node, _ = parse_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert node is not None
    store.put_object(node)
    after = store.view()
    assert after is not before and list(after.nodes) == ["n1"] and before.nodes == {}
    assert after.services is before.services and after.assigned is before.assigned
    store.assign("web/a", Assignment("web/a", (parse_ip("192.0.2.8"),)))
    third = store.view()
    assert third.services is after.services and third.assigned is not after.assigned
    assert after.ingress_ips("web/a", after.services["web/a"]) == [parse_ip("192.0.2.7")]
    store.put_object(_service("web", "b"))
    assert store.view().services is not third.services and sorted(third.services) == ["web/a"]
