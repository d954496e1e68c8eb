"""What OVN mode wants in the Northbound database for the cluster's Services."""

from __future__ import annotations

from typing import Any

from model.builders import parse
from ovn.builders import OWNER, POOL, endpoints, ovn, view, web
from teapot_lb.cluster import Kind, Store
from teapot_lb.ovn.desired import DesiredCache, desired_state
from teapot_lb.ovn.rows import IP_KEY, OWNER_KEY, SERVICE_KEY, Table, Target

ROUTER = Target(Table.ROUTER, "gr0")
SWITCH = Target(Table.SWITCH, "ls0")
GROUP = "teapot-lb/test/lb-system/ovn"
LB = "teapot-lb/test/default/web/203.0.113.1/tcp"


def test_one_row_per_ip_and_protocol_with_the_ready_endpoints_at_the_target_port() -> None:
    v = view(
        POOL,
        ovn(),
        web("203.0.113.1"),
        endpoints("web", ("10.0.0.2", "n1", True), ("10.0.0.3", "n2", True)),
    )
    state = desired_state(v, OWNER).state
    lb = state.load_balancers[LB]
    assert lb.protocol == "tcp"
    assert dict(lb.vips) == {"203.0.113.1:80": "10.0.0.2:8080,10.0.0.3:8080"}
    assert dict(lb.external_ids) == {
        OWNER_KEY: OWNER,
        SERVICE_KEY: "default/web",
        IP_KEY: "203.0.113.1",
    }


def test_endpoints_not_ready_are_not_backends() -> None:
    v = view(
        POOL,
        ovn(),
        web("203.0.113.1"),
        endpoints("web", ("10.0.0.2", "n1", True), ("10.0.0.3", "n2", False)),
    )
    lb = desired_state(v, OWNER).state.load_balancers[LB]
    assert lb.backends() == {"203.0.113.1:80": ["10.0.0.2:8080"]}


def test_without_ready_endpoints_the_vip_stays_and_rejects() -> None:
    v = view(POOL, ovn(), web("203.0.113.1"))
    lb = desired_state(v, OWNER).state.load_balancers[LB]
    assert lb.backends() == {"203.0.113.1:80": []}
    assert ("reject", "true") in lb.options


def test_cluster_policy_rows_join_the_advertisements_group_on_its_routers_and_switches() -> None:
    v = view(POOL, ovn(), web("203.0.113.1"), endpoints("web", ("10.0.0.2", "n1", True)))
    state = desired_state(v, OWNER).state
    assert state.groups == {GROUP: frozenset({LB})}
    assert state.group_attached == {ROUTER: frozenset({GROUP}), SWITCH: frozenset({GROUP})}
    assert state.attached == {}


def test_dual_stack_gets_a_row_per_family_with_that_familys_endpoints() -> None:
    v = view(
        POOL,
        ovn(),
        web("203.0.113.1", "2001:db8::1"),
        endpoints("web", ("10.0.0.2", "n1", True)),
        endpoints("web", ("fd00::2", "n1", True), family="IPv6"),
    )
    lbs = desired_state(v, OWNER).state.load_balancers
    assert lbs[LB].backends() == {"203.0.113.1:80": ["10.0.0.2:8080"]}
    v6 = lbs["teapot-lb/test/default/web/2001:db8::1/tcp"]
    assert v6.backends() == {"[2001:db8::1]:80": ["[fd00::2]:8080"]}


def test_each_protocol_is_its_own_row() -> None:
    v = view(
        POOL,
        ovn(),
        web("203.0.113.1", ports=("80", "53/UDP")),
        endpoints("web", ("10.0.0.2", "n1", True)),
        endpoints("web", ("10.0.0.2", "n1", True), target_port=5353, port_name="p53",
                  protocol="UDP", name="web-udp"),
    )  # fmt: skip
    lbs = desired_state(v, OWNER).state.load_balancers
    udp = lbs["teapot-lb/test/default/web/203.0.113.1/udp"]
    assert udp.protocol == "udp"
    assert udp.backends() == {"203.0.113.1:53": ["10.0.0.2:5353"]}
    assert lbs[LB].backends() == {"203.0.113.1:80": ["10.0.0.2:8080"]}


def test_local_policy_gives_each_routers_node_only_its_own_endpoints_without_snat() -> None:
    routers = [{"name": "gr-n1", "node": "n1"}, {"name": "gr-n2", "node": "n2"}, {"name": "gr"}]
    v = view(
        POOL,
        ovn(gatewayRouters=routers),
        web("203.0.113.1", externalTrafficPolicy="Local"),
        endpoints("web", ("10.0.0.2", "n1", True), ("10.0.0.3", "n2", True)),
    )
    desired = desired_state(v, OWNER)
    state = desired.state
    n1 = state.load_balancers[f"{LB}/gr-n1"]
    assert n1.backends() == {"203.0.113.1:80": ["10.0.0.2:8080"]}
    assert ("skip_snat", "true") in n1.options
    assert state.attached[Target(Table.ROUTER, "gr-n1")] == {f"{LB}/gr-n1"}
    # East-west: the switch gets the row with every endpoint; routers do not get it.
    assert state.attached[SWITCH] == {LB}
    assert state.groups[GROUP] == frozenset()
    assert Target(Table.ROUTER, "gr") not in state.attached
    assert any("router gr not used" in n for n in desired.notes["default/web"])


def test_health_checks_probe_each_vip_from_the_source_through_the_pods_ports() -> None:
    check = {"sourceIP": "10.0.0.254", "interval": 2, "failureCount": 2}
    v = view(
        POOL,
        ovn(healthCheck=check),
        web("203.0.113.1"),
        endpoints("web", ("10.0.0.2", "n1", True)),
    )
    lb = desired_state(v, OWNER).state.load_balancers[LB]
    (hc,) = lb.health_checks
    assert hc.vip == "203.0.113.1:80"
    assert dict(hc.options)["interval"] == "2"
    assert dict(hc.options)["failure_count"] == "2"
    assert dict(lb.ip_port_mappings) == {"10.0.0.2": "default_pod-n1:10.0.0.254"}


def test_services_outside_ovn_pools_and_of_other_classes_get_no_row() -> None:
    other = web("198.51.100.1")  # in no pool
    classed = {**web("203.0.113.2"), "metadata": {"name": "other", "namespace": "default"}}
    classed["spec"] = {**classed["spec"], "loadBalancerClass": "someone.else/lb"}
    v = view(POOL, ovn(), other, classed)
    assert desired_state(v, OWNER).state.load_balancers == {}


def test_the_same_view_gives_the_same_state() -> None:
    docs = (POOL, ovn(), web("203.0.113.1"), endpoints("web", ("10.0.0.2", "n1", True)))
    assert desired_state(view(*docs), OWNER) == desired_state(view(*docs), OWNER)


def test_a_cache_gives_the_uncached_state_through_changes_to_services_slices_and_config() -> None:
    store = Store()
    cache = DesiredCache()

    def put(*documents: dict[str, Any]) -> None:
        for d in documents:
            store.put_object(parse(d))

    def check() -> None:
        v = store.view()
        assert desired_state(v, OWNER, cache=cache) == desired_state(v, OWNER)

    put(POOL, ovn(), web("203.0.113.1"), endpoints("web", ("10.0.0.2", "n1", True)))
    check()
    put(endpoints("web", ("10.0.0.3", "n1", True)))  # the slice replaced
    check()
    put(ovn(logicalSwitches=["ls1"]))  # the configuration changed
    check()
    other = {**web("203.0.113.2"), "metadata": {"name": "api", "namespace": "default"}}
    put(other)
    check()
    store.delete(Kind.SERVICE, "default/web")
    check()
    assert set(desired_state(store.view(), OWNER, cache=cache).notes) == {"default/api"}


def test_client_ip_session_affinity_becomes_the_affinity_timeout() -> None:
    affinity = {"sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}  # fmt: skip
    v = view(POOL, ovn(), web("203.0.113.1", **affinity))
    assert ("affinity_timeout", "60") in desired_state(v, OWNER).state.load_balancers[LB].options
    plain = view(POOL, ovn(), web("203.0.113.1"))
    options = dict(desired_state(plain, OWNER).state.load_balancers[LB].options)
    assert "affinity_timeout" not in options


def test_a_service_limiting_its_clients_gets_no_row_and_a_note_saying_why() -> None:
    # An OVN load balancer DNATs every client, and no kube-proxy filters after it: rather
    # no row than one open to everyone.
    v = view(
        POOL,
        ovn(),
        web("203.0.113.1", loadBalancerSourceRanges=["198.51.100.0/24"]),
        endpoints("web", ("10.0.0.2", "n1", True)),
    )
    desired = desired_state(v, OWNER)
    assert desired.state.load_balancers == {}
    (note,) = desired.notes["default/web"]
    assert note.startswith("not programmed: spec.loadBalancerSourceRanges is set")
