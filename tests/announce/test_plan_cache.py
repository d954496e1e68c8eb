"""Incremental planning: with a PlanCache, plan() and l2_election_orders() give exactly the
uncached result, and replan only the Services whose inputs changed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from model.builders import (
    bgp_advertisement,
    l2_advertisement,
    parse,
    peer,
    pool,
    service,
    vip_advertisement,
)
from teapot_lb.announce.announcement import Announcement, Mode, VIPMembership
from teapot_lb.announce.cache import NodeDependencies, PlanCache
from teapot_lb.announce.election import EXCLUDE_LABEL, score, suffix
from teapot_lb.announce.fleet import l2_election_orders, vip_memberships
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.cluster import ClusterView, Kind, Store, object_key
from teapot_lb.model import ExternalTrafficPolicy, parse_ip
from teapot_lb.standalone.assign import Assignment

NODE_NAMES = ("node-a", "node-b", "node-c")
SERVICE_NAMES = ("s0", "s1", "s2")
IPS = ("192.0.2.1", "192.0.2.2", "198.51.100.1", "2001:db8::1", "203.0.113.9")


def node_doc(name: str, labels: dict[str, str], unavailable: bool = False) -> dict[str, Any]:
    status = (
        {"conditions": [{"type": "NetworkUnavailable", "status": "True"}]} if unavailable else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": status,
    }


def slice_doc(svc: str, ready: dict[str, bool]) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{svc}-x",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc},
        },
        "endpoints": [
            {"addresses": ["192.0.2.200"], "nodeName": n, "conditions": {"ready": r}}
            for n, r in ready.items()
        ],
    }


def service_doc(name: str, ips: list[str], local: bool, handled: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"externalTrafficPolicy": "Local" if local else "Cluster"}
    if not handled:
        spec["loadBalancerClass"] = "example.org/other"
    doc = service(name, **spec)
    return {**doc, "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ips]}}}


def selectors(rack: str | None) -> list[dict[str, Any]]:
    return [{"matchLabels": {"rack": rack}}] if rack else []


racks = st.sampled_from([None, "r1", "r2"])

# Each change is (kind of change, arguments); applied in order to one Store.
_service_changes = st.one_of(
    st.tuples(
        st.just("service"),
        st.sampled_from(SERVICE_NAMES),
        st.lists(st.sampled_from(IPS), max_size=3, unique=True),
        st.booleans(),
        st.booleans() | st.just(True),
    ),
    st.tuples(st.just("delete-service"), st.sampled_from(SERVICE_NAMES)),
    st.tuples(
        st.just("slice"),
        st.sampled_from(SERVICE_NAMES),
        st.dictionaries(st.sampled_from(NODE_NAMES), st.booleans()),
    ),
    st.tuples(st.just("delete-slice"), st.sampled_from(SERVICE_NAMES)),
    # What a controller in the same process assigned (standalone), read beside the
    # Service in place of its status and VRID annotation; None: nothing (the status).
    st.tuples(
        st.just("assign"),
        st.sampled_from(SERVICE_NAMES),
        st.none() | st.lists(st.sampled_from(IPS), max_size=2, unique=True),
        st.sampled_from([None, "v1=7", "v1=9"]),
    ),
)
_other_changes = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODE_NAMES), racks, st.booleans(), st.booleans()),
    st.tuples(st.just("delete-node"), st.sampled_from(NODE_NAMES)),
    st.tuples(st.just("touch-node"), st.sampled_from(NODE_NAMES), st.integers(0, 9)),
    st.tuples(st.just("pool"), st.sampled_from(["p1", "p2"]), st.booleans()),
    st.tuples(st.just("peer"), st.sampled_from(["tor1", "tor2"]), racks, st.booleans()),
    st.tuples(st.just("delete-peer"), st.sampled_from(["tor1", "tor2"])),
    st.tuples(
        st.just("bgp-adv"),
        st.sampled_from(["b1", "b2"]),
        st.sampled_from(["p1", "p2"]),
        racks,
        st.sampled_from([[], ["tor1"], ["tor2"]]),
        st.sampled_from([None, 24]),
    ),
    st.tuples(
        st.just("l2-adv"),
        st.sampled_from(["l1", "l2"]),
        st.sampled_from(["p1", "p2"]),
        racks,
        st.sampled_from([[], ["eth0"], ["eth1", "eth0"]]),
    ),
    st.tuples(
        st.just("vip-adv"), st.sampled_from(["v1", "v2"]), st.sampled_from(["p1", "p2"]), racks
    ),
    st.tuples(
        st.just("delete-adv"),
        st.sampled_from(
            [
                (Kind.BGP_ADVERTISEMENT, "b1"),
                (Kind.BGP_ADVERTISEMENT, "b2"),
                (Kind.L2_ADVERTISEMENT, "l1"),
                (Kind.L2_ADVERTISEMENT, "l2"),
                (Kind.VIP_ADVERTISEMENT, "v1"),
            ]
        ),
    ),
    st.tuples(
        st.just("options"),
        st.none() | st.frozensets(st.sampled_from(NODE_NAMES)),
        st.frozensets(st.sampled_from(["tor1", "tor2"])),
        st.none() | st.frozensets(st.sampled_from(["tor1", "tor2"])),
        st.booleans(),
    ),
    st.tuples(st.just("reload")),
)

# Services and their endpoints change most often, as in a cluster.
changes = st.one_of(_service_changes, _service_changes, _other_changes)

POOL_ADDRESSES = {
    "p1": (["192.0.2.0/28", "2001:db8::/124"], ["192.0.2.0/30"]),
    "p2": (["198.51.100.0/28"], ["198.51.100.0/28", "203.0.113.0/28"]),
}


def apply(store: Store, change: tuple[Any, ...], options: PlanOptions) -> PlanOptions:
    """Apply one change to the store; return the options to plan with from now on."""
    what, *args = change
    if what == "service":
        name, ips, local, handled = args
        store.put_object(parse(service_doc(name, ips, local, handled)))
    elif what == "delete-service":
        store.delete(Kind.SERVICE, object_key("default", args[0]))
    elif what == "slice":
        store.put_object(parse(slice_doc(args[0], args[1])))
    elif what == "delete-slice":
        store.delete(Kind.ENDPOINT_SLICE, object_key("default", f"{args[0]}-x"))
    elif what == "assign":
        name, ips, vrids = args
        key = object_key("default", name)
        given = None if ips is None else Assignment(key, tuple(map(parse_ip, ips)), vrids=vrids)
        store.assign(key, given)
    elif what == "node":
        name, rack, excluded, unavailable = args
        labels = {"rack": rack} if rack else {}
        if excluded:
            labels[EXCLUDE_LABEL] = ""
        store.put_object(parse(node_doc(name, labels, unavailable)))
    elif what == "touch-node":
        # A status update: a new resourceVersion and address, the same labels and condition.
        name, version = args
        current = store.view().nodes.get(name)
        if current is not None:
            doc = current.model_dump(by_alias=True, mode="json")
            doc["metadata"]["resourceVersion"] = str(version)
            doc["status"]["addresses"] = [{"type": "InternalIP", "address": f"192.0.2.{version}"}]
            store.put_object(parse(doc))
    elif what == "delete-node":
        store.delete(Kind.NODE, args[0])
    elif what == "pool":
        name, second = args
        store.put_object(parse(pool(name, *POOL_ADDRESSES[name][1 if second else 0])))
    elif what == "peer":
        name, rack, ibgp = args
        store.put_object(
            parse(peer(name, peerASN=64512 if ibgp else 64500, nodeSelectors=selectors(rack)))
        )
    elif what == "delete-peer":
        store.delete(Kind.BGP_PEER, object_key("lb-system", args[0]))
    elif what == "bgp-adv":
        name, pool_name, rack, peers, aggregation = args
        spec: dict[str, Any] = {"nodeSelectors": selectors(rack), "peers": peers}
        if aggregation is not None:
            spec["aggregationLength"] = aggregation
        spec["communities"] = ["65000:1"] if rack else []
        spec["localPref"] = 120
        store.put_object(parse(bgp_advertisement(name, pool_name, **spec)))
    elif what == "l2-adv":
        name, pool_name, rack, interfaces = args
        doc = l2_advertisement(
            name, pool_name, nodeSelectors=selectors(rack), interfaces=interfaces
        )
        store.put_object(parse(doc))
    elif what == "vip-adv":
        name, pool_name, rack = args
        store.put_object(parse(vip_advertisement(name, pool_name, nodeSelectors=selectors(rack))))
    elif what == "delete-adv":
        kind, name = args[0]
        store.delete(kind, object_key("lb-system", name))
    elif what == "options":
        live, down, established, unclassed = args
        return PlanOptions(
            live_speakers=live,
            down_peers=tuple(down),
            established_peers=established,
            handle_unclassed=unclassed,
        )
    elif what == "reload":
        # A re-list: every kind replaced by equal objects, the same ones kept for some kinds.
        view = store.view()
        store.replace(Kind.NODE, dict(view.nodes))
        store.replace(
            Kind.SERVICE,
            {k: type(s).model_validate(s.model_dump()) for k, s in view.services.items()},
        )
        store.replace_assigned({k: replace(a) for k, a in view.assigned.items()})
    return options


def base_store() -> Store:
    store = Store()
    for name in NODE_NAMES:
        store.put_object(parse(node_doc(name, {})))
    store.put_object(parse(pool("p1", *POOL_ADDRESSES["p1"][0])))
    store.put_object(parse(pool("p2", *POOL_ADDRESSES["p2"][0])))  # (the L2 one)
    store.put_object(parse(peer("tor1")))
    store.put_object(parse(bgp_advertisement("b1", "p1")))
    store.put_object(parse(l2_advertisement("l1", "p2")))
    return store


def check_against_uncached(steps: list[tuple[Any, ...]]) -> None:
    store = base_store()
    options = PlanOptions()
    caches = {name: PlanCache() for name in NODE_NAMES}
    orders_cache = PlanCache()
    before: dict[str, frozenset[Announcement]] = {name: frozenset() for name in NODE_NAMES}
    for change in steps:
        options = apply(store, change, options)
        view = store.view()
        for name in NODE_NAMES:
            cached = plan(view, name, options, cache=caches[name])
            full = plan(view, name, options)
            assert cached.announcements == full.announcements
            assert cached.decisions == full.decisions
            assert cached.tenant_decisions == full.tenant_decisions
            # What the backends apply instead of comparing everything is what changed.
            if cached.delta is not None:
                assert cached.delta.added == full.announcements - before[name]
                assert cached.delta.removed == before[name] - full.announcements
            before[name] = full.announcements
            # The per-mode sets and per-Service decisions (in key order) the cache keeps
            # between calls say the same as the plan without it.
            for mode in Mode:
                assert cached.of_mode(mode) == full.of_mode(mode)
            kept = [(k, d) for k, d in full.by_service.items() if d]
            assert list(cached.by_service.items()) == kept
        cached_orders = l2_election_orders(view, options, cache=orders_cache)
        full_orders = l2_election_orders(view, options)
        assert dict(cached_orders.items()) == dict(full_orders.items())
        # The speaker's own cache serves its plans and the cluster's VRRP instances.
        vip = vip_memberships(view, options, cache=caches[NODE_NAMES[0]])
        assert dict(vip) == vip_memberships(view, options)
        assert {k: set(held) for k, held in vip.items()} == every_nodes_vip(view, options)


def every_nodes_vip(view: ClusterView, options: PlanOptions) -> dict[str, set[VIPMembership]]:
    """The VRRP instances as every node's own plan has them, Services counted as
    Cluster-policy ones (instances do not follow endpoints): what vip_memberships answers
    once per Service."""
    services = dict(view.services)
    for key, svc in view.services.items():
        if svc.spec.external_traffic_policy is ExternalTrafficPolicy.LOCAL:
            spec = svc.spec.model_copy(update={"external_traffic_policy": "Cluster"})
            services[key] = svc.model_copy(update={"spec": spec})
    as_cluster = replace(view, services=services)
    out: dict[str, set[VIPMembership]] = {}
    for node in view.nodes:
        planned = plan(as_cluster, node, options)
        by_ip = {a.ip: a for a in planned.of_mode(Mode.VIP) if isinstance(a, VIPMembership)}
        for d in planned.decisions:
            if d.mode is Mode.VIP and d.announces:
                out.setdefault(d.service, set()).add(by_ip[d.ip])
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(changes, min_size=1, max_size=40))
def test_cached_plans_equal_uncached_plans_after_every_change(steps: list[tuple[Any, ...]]) -> None:
    check_against_uncached(steps)


@settings(max_examples=300, deadline=None)
@given(st.lists(_service_changes, min_size=1, max_size=30))
def test_cached_plans_equal_uncached_plans_under_service_and_endpoint_churn(
    steps: list[tuple[Any, ...]],
) -> None:
    # Only Services and EndpointSlices change: the cache is never reset, every Service's
    # entry must follow its own changes.
    check_against_uncached(steps)


def many_services(store: Store, count: int) -> None:
    for i in range(count):
        ip = f"192.0.2.{i + 1}" if i % 2 else f"198.51.100.{i + 1}"
        store.put_object(parse(service_doc(f"svc{i}", [ip], local=i % 3 == 0, handled=True)))


def test_after_one_service_change_only_that_service_is_planned_again() -> None:
    store = base_store()
    many_services(store, 12)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    l2_election_orders(store.view(), cache=cache)
    assert (cache.computed, cache.orders_computed) == (12, 12)

    store.put_object(parse(service_doc("svc4", ["192.0.2.14"], local=False, handled=True)))
    plan(store.view(), "node-a", cache=cache)
    l2_election_orders(store.view(), cache=cache)
    assert (cache.computed, cache.orders_computed) == (13, 13)

    # Nothing changed: nothing planned again.
    plan(store.view(), "node-a", cache=cache)
    assert cache.computed == 13


def test_one_l2_service_change_changes_only_its_entries_of_the_election_orders() -> None:
    """A new or changed L2 Service costs its own IPs: the table every IP's order is read
    from is changed in place, not made again from every Service (issue 19)."""
    store = base_store()
    store.put_object(parse(pool("p2", *POOL_ADDRESSES["p2"][0])))  # l1's: L2
    many_services(store, 12)
    cache = PlanCache()
    l2_election_orders(store.view(), cache=cache)
    table = cache.orders_table.candidates
    before = dict(table)
    assert len(before) == 6 and "198.51.100.3" in before  # svc2's

    store.put_object(parse(service_doc("svc2", ["198.51.100.14"], local=False, handled=True)))
    orders = l2_election_orders(store.view(), cache=cache)
    assert cache.orders_table.candidates is table
    assert set(before) ^ set(table) == {"198.51.100.3", "198.51.100.14"}
    assert dict(orders.items()) == dict(l2_election_orders(store.view()).items())


def test_an_endpoint_change_replans_only_its_local_service() -> None:
    store = base_store()
    many_services(store, 12)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    store.put_object(parse(slice_doc("svc3", {"node-a": True})))  # svc3 is Local
    store.put_object(parse(slice_doc("svc1", {"node-a": True})))  # svc1 is not
    p = plan(store.view(), "node-a", cache=cache)
    assert cache.computed == 13
    assert p == plan(store.view(), "node-a")


def test_an_equal_object_put_again_is_not_planned_again() -> None:
    store = base_store()
    many_services(store, 6)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    many_services(store, 6)  # new but equal Service objects
    store.put_object(parse(node_doc("node-b", {})))  # an equal Node
    plan(store.view(), "node-a", cache=cache)
    assert cache.computed == 6


def test_another_nodes_change_replans_only_services_whose_elections_it_can_change() -> None:
    store = base_store()
    many_services(store, 6)  # svc2, svc4: L2 elections; svc1, svc5: BGP (not bounded)
    store.put_object(parse(l2_advertisement("l1", "p2", nodeSelectors=selectors("r1"))))
    store.put_object(parse(node_doc("node-a", {"rack": "r1"})))  # the only L2 candidate
    cache = PlanCache()

    def replanned() -> int:
        before = cache.computed
        assert plan(store.view(), "node-a", cache=cache) == plan(store.view(), "node-a")
        return cache.computed - before

    def won_by(node: str) -> set[str]:
        return {
            d.service
            for d in plan(store.view(), "node-a").decisions
            if d.mode is Mode.L2 and f"owner is {node}" in d.reason
        }

    assert replanned() == 6
    # A label no selector reads, a value the selector matches neither way: nothing.
    store.put_object(parse(node_doc("node-b", {"zone": "z1"})))
    assert replanned() == 0
    store.put_object(parse(node_doc("node-b", {"rack": "r2"})))
    assert replanned() == 0
    # node-c enters the L2 candidates: the elections it now wins, never a BGP Service.
    store.put_object(parse(node_doc("node-c", {"rack": "r1"})))
    won = won_by("node-c")
    assert won and replanned() == len(won)
    # The exclusion label (no selector reads it): node-c leaves the elections it won.
    store.put_object(parse(node_doc("node-c", {"rack": "r1", EXCLUDE_LABEL: ""})))
    assert replanned() == len(won)
    store.put_object(parse(node_doc("node-a", {"rack": "r1", "zone": "z1"})))  # its own
    assert replanned() == 0  # (what no selector reads, for this node too)
    store.put_object(parse(node_doc("node-a", {})))
    assert replanned() == 6


def test_a_dead_node_replans_only_the_services_whose_election_chose_it() -> None:
    store = base_store()
    many_services(store, 9)
    cache = PlanCache()
    every = PlanOptions(live_speakers=set(NODE_NAMES))
    before = plan(store.view(), "node-a", every, cache=cache)
    owned = {
        d.service for d in before.decisions if d.mode is Mode.L2 and "owner is node-c" in d.reason
    }
    assert owned  # (node-c owns some of the L2 IPs: the test can fail)
    without = PlanOptions(live_speakers=set(NODE_NAMES) - {"node-c"})
    assert plan(store.view(), "node-a", without, cache=cache) == plan(
        store.view(), "node-a", without
    )
    assert cache.computed == 9 + len(owned)


def test_options_and_the_planning_node_replan_every_service() -> None:
    store = base_store()
    many_services(store, 5)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    plan(store.view(), "node-a", PlanOptions(live_speakers={"node-a"}), cache=cache)
    assert cache.computed == 10  # liveness known for the first time
    plan(
        store.view(),
        "node-a",
        PlanOptions(live_speakers={"node-a"}, handle_unclassed=False),
        cache=cache,
    )
    assert cache.computed == 15
    plan(store.view(), "node-b", PlanOptions(live_speakers={"node-a"}), cache=cache)
    assert cache.computed == 20


def test_a_bgp_session_changing_plans_no_service_again_and_changes_only_their_words() -> None:
    """A route is held for a peer whose session is down, never dropped: a session coming
    up or going down changes the decisions' words and peers, not what is announced, so no
    Service is planned again (at 10,000 Services that was ~0.8 s of CPU per flap) and the
    plan hands back the very announcements the backends hold, with an empty delta."""
    store = base_store()
    many_services(store, 6)
    cache = PlanCache()
    first = plan(store.view(), "node-a", PlanOptions(established_peers=()), cache=cache)
    made = list(first.announcements)
    decided = list(first.decisions)
    assert any(a.mode is Mode.BGP for a in made)
    assert cache.computed == 6

    again = plan(store.view(), "node-a", PlanOptions(established_peers=("tor1",)), cache=cache)

    assert cache.computed == 6
    assert list(again.decisions) != decided  # "held for tor1" became "announced to tor1"
    assert list(again.decisions) == list(
        plan(store.view(), "node-a", PlanOptions(established_peers=("tor1",))).decisions
    )
    assert {id(a) for a in again.announcements} == {id(a) for a in made}
    assert again.delta is not None and not (again.delta.added or again.delta.removed)
    one_down = PlanOptions(down_peers=("tor1",))
    down = plan(store.view(), "node-a", one_down, cache=cache)
    assert cache.computed == 6
    assert list(down.decisions) == list(plan(store.view(), "node-a", one_down).decisions)


def test_a_deleted_service_is_dropped_from_the_cache_and_the_plan() -> None:
    store = base_store()
    many_services(store, 4)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    store.delete(Kind.SERVICE, object_key("default", "svc1"))
    p = plan(store.view(), "node-a", cache=cache)
    assert p == plan(store.view(), "node-a")
    assert all(d.service != "default/svc1" for d in p.decisions)
    assert cache.computed == 4
    assert object_key("default", "svc1") not in cache.plans.held()


def test_a_node_status_update_that_the_plan_does_not_read_replans_nothing() -> None:
    store = base_store()
    many_services(store, 6)
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    doc = node_doc("node-b", {})
    doc["metadata"]["resourceVersion"] = "42"
    doc["status"]["addresses"] = [{"type": "InternalIP", "address": "192.0.2.99"}]
    store.put_object(parse(doc))
    assert plan(store.view(), "node-a", cache=cache) == plan(store.view(), "node-a")
    assert cache.computed == 6


def test_endpoints_that_keep_the_same_ready_nodes_replan_nothing() -> None:
    store = base_store()
    many_services(store, 6)
    store.put_object(parse(slice_doc("svc3", {"node-a": True, "node-b": False})))
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    store.put_object(parse(slice_doc("svc3", {"node-a": True, "node-c": False})))
    assert plan(store.view(), "node-a", cache=cache) == plan(store.view(), "node-a")
    assert cache.computed == 6
    store.put_object(parse(slice_doc("svc3", {"node-a": True, "node-c": True})))
    assert plan(store.view(), "node-a", cache=cache) == plan(store.view(), "node-a")
    assert cache.computed == 7


def test_a_node_coming_alive_that_wins_elections_replans_those_services() -> None:
    store = base_store()
    for i in range(14):  # L2 pool: node-c wins about a third of these once alive
        store.put_object(parse(service_doc(f"l2-{i}", [f"198.51.100.{i + 1}"], False, True)))
    cache = PlanCache()
    two = PlanOptions(live_speakers={"node-a", "node-b"})
    plan(store.view(), "node-a", two, cache=cache)
    every = PlanOptions(live_speakers=set(NODE_NAMES))
    cached = plan(store.view(), "node-a", every, cache=cache)
    full = plan(store.view(), "node-a", every)
    assert cached == full
    assert any("owner is node-c" in d.reason for d in full.decisions)
    assert cache.computed < 28  # not every Service


def test_another_nodes_change_replans_the_vrrp_instances_that_list_it() -> None:
    store = base_store()
    options = apply(store, ("vip-adv", "v1", "p1", None), PlanOptions())
    store.put_object(parse(service_doc("s0", ["192.0.2.1"], local=False, handled=True)))
    cache = PlanCache()
    plan(store.view(), "node-a", options, cache=cache)
    apply(store, ("node", "node-b", None, True, True), options)  # node-b: network unavailable
    cached = plan(store.view(), "node-a", options, cache=cache)
    assert cached == plan(store.view(), "node-a", options)
    assert any("VRRP candidate with node-a, node-c " in d.reason for d in cached.decisions)


def test_election_orders_follow_a_node_change_for_local_and_other_services() -> None:
    store = base_store()
    store.put_object(parse(pool("p2", *POOL_ADDRESSES["p2"][0])))
    store.put_object(parse(service_doc("local", ["198.51.100.1"], local=True, handled=True)))
    store.put_object(parse(slice_doc("local", {"node-b": True, "node-c": True})))
    store.put_object(parse(service_doc("cluster", ["198.51.100.2"], local=False, handled=True)))
    cache = PlanCache()
    l2_election_orders(store.view(), cache=cache)
    store.put_object(parse(node_doc("node-b", {}, unavailable=True)))
    cached = l2_election_orders(store.view(), cache=cache)
    full = l2_election_orders(store.view())
    assert dict(cached.items()) == dict(full.items())
    assert "node-b" not in cached["198.51.100.1"] and "node-b" not in cached["198.51.100.2"]


def vip_store() -> Store:
    """Three nodes, pool p2 selected by VIPAdvertisements v1 (rack r1) and v2 (any node)."""
    store = base_store()
    store.put_object(parse(pool("p2", *POOL_ADDRESSES["p2"][0])))
    store.put_object(parse(vip_advertisement("v1", "p2", nodeSelectors=selectors("r1"))))
    store.put_object(parse(vip_advertisement("v2", "p2")))
    store.put_object(parse(node_doc("node-a", {"rack": "r1"})))
    return store


def test_vip_instances_are_one_per_advertisement_that_comes_first_for_some_node() -> None:
    store = vip_store()
    store.put_object(parse(service_doc("v", ["198.51.100.1"], local=False, handled=True)))
    held = vip_memberships(store.view())
    by_adv = {m.advertisement: m.candidates for m in held["default/v"]}
    # node-a is in rack r1: v1 decides its instance; v2 decides node-b's and node-c's, and
    # lists every node it selects (node-a too), as each node's own plan does.
    assert by_adv == {"v1": ("node-a",), "v2": ("node-a", "node-b", "node-c")}


def test_a_node_change_re_decides_only_the_services_of_vip_pools() -> None:
    store = vip_store()
    store.put_object(parse(service_doc("v", ["198.51.100.1"], local=False, handled=True)))
    store.put_object(parse(service_doc("w", ["198.51.100.2"], local=True, handled=True)))
    many_services(store, 6)  # 3 of them in p1 (BGP and L2 only)
    cache = PlanCache()
    vip_memberships(store.view(), cache=cache)
    before = cache.vip.computed
    store.put_object(parse(node_doc("node-c", {"rack": "r1"})))
    held = vip_memberships(store.view(), cache=cache)
    assert held == vip_memberships(store.view())
    assert {m.candidates for m in held["default/v"] if m.advertisement == "v1"} == {
        ("node-a", "node-c")
    }
    # v, w and the three p2 Services of many_services: the others were not decided again.
    assert cache.vip.computed - before == 5
    store.put_object(parse(service_doc("v", ["198.51.100.3"], local=False, handled=True)))
    vip_memberships(store.view(), cache=cache)
    assert cache.vip.computed - before == 6


def test_a_leaving_node_finds_the_services_whose_elections_chose_it_now() -> None:
    deps = NodeDependencies()
    ip = suffix(parse_ip("192.0.2.1"))
    deps.note("default/s0", [(ip, ("node-a",), score("node-a", "192.0.2.1"))], every=False)
    deps.note("default/s1", [(ip, ("node-a", "node-b"), None)], every=False)
    assert deps.affected(set(), {"node-a"}) == {"default/s0", "default/s1"}
    # Planned again, s0's election chose node-b: node-a's leaving no longer concerns it.
    deps.note("default/s0", [(ip, ("node-b",), score("node-b", "192.0.2.1"))], every=False)
    assert deps.affected(set(), {"node-a"}) == {"default/s1"}
    assert deps.affected(set(), {"node-b"}) == {"default/s0", "default/s1"}
    deps.forget("default/s1")
    deps.note("default/s0", [], every=True)  # (VRRP: lists every candidate)
    assert deps.affected(set(), {"node-a"}) == {"default/s0"}
    assert deps.affected(set(), {"node-c"}) == {"default/s0"}


def test_a_service_planned_again_for_another_node_elects_only_among_its_candidates() -> None:
    """Planned again only because another node changed, a Service's election starts from
    what it chose last time and the nodes that changed: one that changed but is still no
    candidate never gets in, however well it ranks for the IP."""
    ip = "198.51.100.7"
    best = min(score("node-a", ip), score("node-b", ip))
    x = next(n for n in (f"node-x{i}" for i in range(1000)) if score(n, ip) < best)
    store = Store()
    for name, rack in (("node-a", "r1"), ("node-b", "r1"), (x, "r2")):
        store.put_object(parse(node_doc(name, {"rack": rack})))
    store.put_object(parse(pool("p2", *POOL_ADDRESSES["p2"][0])))
    store.put_object(parse(l2_advertisement("l1", "p2", nodeSelectors=selectors("r1"))))
    store.put_object(parse(peer("tor1", nodeSelectors=selectors("r3"))))
    store.put_object(parse(service_doc("s0", [ip], local=False, handled=True)))
    cache = PlanCache()
    plan(store.view(), "node-a", cache=cache)
    # x now matches the peer's selector (so it may enter), and still not the L2 one.
    store.put_object(parse(node_doc(x, {"rack": "r3"})))
    cached = plan(store.view(), "node-a", cache=cache)
    assert cache.plans.by_other_nodes == {"default/s0"}  # (from its last election)
    assert cached.decisions == plan(store.view(), "node-a").decisions
    (l2,) = [d for d in cached.decisions if d.mode is Mode.L2]
    assert x not in l2.reason and "owner is node-" in l2.reason
    # x becomes a candidate: it wins, from the last election and the nodes that changed.
    store.put_object(parse(node_doc(x, {"rack": "r1"})))
    cached = plan(store.view(), "node-a", cache=cache)
    assert cache.plans.by_other_nodes == {"default/s0"}
    assert cached.decisions == plan(store.view(), "node-a").decisions
    (l2,) = [d for d in cached.decisions if d.mode is Mode.L2]
    assert f"owner is {x}" in l2.reason
