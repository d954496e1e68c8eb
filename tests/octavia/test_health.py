"""Health monitors → the gateway's checks, and what the gateways report → Octavia's
operating statuses and listener statistics (pure: monitor.py, health.py)."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from gateway.control.builders import tenant
from octavia.builders import LB_ID, LISTENER_ID, MONITOR_ID, POOL_ID, load_balancer, member
from octavia.builders import monitor as monitor_dict
from octavia.builders import pool as pool_dict
from octavia.test_l7 import HOST, NAMESPACE, objects_of, policy, rule, through_gateway
from teapot_lb.gateway.config import HealthCheck, Owner, RouteKind
from teapot_lb.gateway.control.l7mirror import ANNOTATION_HEALTH_CHECK
from teapot_lb.gateway.report import BackendCounters, BackendsReport, BackendState, ServerState
from teapot_lb.gateway.translate import translate
from teapot_lb.octavia import l7
from teapot_lb.octavia.health import (
    CounterTotals,
    operating_statuses,
    provisioning_only,
    resent,
    server_status,
    status_changes,
)
from teapot_lb.octavia.mapping import Answer
from teapot_lb.octavia.monitor import health_check
from teapot_lb.octavia.tree import LoadBalancer, Mode, load_balancer_from_provider
from teapot_lb.octavia.unsupported import ObjectKind, refusals, refusals_in_load_balancer
from teapot_lb.tenancy.l7vet import L7World

M0, M1 = "198.51.100.10", "198.51.100.11"
ANSWER = Answer(True, "", ("203.0.113.1",), frozenset(), True)


def probed_lb(monitor: dict[str, Any] | None = None, **member_over: Any) -> LoadBalancer:
    """An HTTP listener whose HOST_NAME policy sends to a pool of 2 members on 8080 with
    an HTTP monitor (or `monitor`)."""
    members = [member(0, M0, 8080, **member_over), member(1, M1, 8080)]
    hm = monitor or monitor_dict(type="HTTP", url_path="/health", http_method="GET",
                                 expected_codes="200")  # fmt: skip
    d = load_balancer(pools=[pool_dict(members, protocol="HTTP", healthmonitor=hm)])
    d["listeners"][0].update(
        protocol="HTTP", default_pool_id=None,
        l7policies=[policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)],
                           redirect_pool_id=POOL_ID)],
    )  # fmt: skip
    return load_balancer_from_provider(d, Mode.ROUTE)


def report(*servers: tuple[str, str], **counters: int) -> BackendsReport:
    """A gateway's report of the pool's backend: (address, HAProxy status) per server."""
    owner = Owner(tenant="acme", kind=RouteKind.SERVICE, namespace=NAMESPACE,
                  name=l7.service_name(POOL_ID))  # fmt: skip
    state = BackendState(
        name="be-pool", owner=owner, health_checked=True,
        counters=BackendCounters(**counters),
        servers=tuple(ServerState(address=a, port=8080, status=s) for a, s in servers),
    )  # fmt: skip
    return BackendsReport(stats_age_seconds=0.1, backends=(state,))


def statuses(lb: LoadBalancer, *reports: BackendsReport, **kw: Any) -> dict[str, str]:
    found = operating_statuses(lb, ANSWER, NAMESPACE, reports, **kw)
    names = {LB_ID: "lb", LISTENER_ID: "listener", POOL_ID: "pool", MONITOR_ID: "monitor"}
    names |= {m.id: f"m{i}" for i, m in enumerate(lb.pools[0].members)}
    return {names[ident]: status for (_, ident), status in found.items() if ident in names}


# ------------------------------------------------------------------ monitors


def test_an_http_monitor_becomes_the_gateways_http_check_with_every_parameter() -> None:
    hm = monitor_dict(type="HTTP", delay=3, timeout=2, max_retries=4, max_retries_down=5,
                      url_path="/health", http_method="HEAD", expected_codes="200, 202",
                      http_version=1.1, domain_name="probe.acme.example")  # fmt: skip
    lb = load_balancer_from_provider(load_balancer(pools=[pool_dict(healthmonitor=hm)]), Mode.ROUTE)
    assert health_check(lb.pools[0].health_monitor) == HealthCheck(
        interval_ms=3000, timeout_ms=2000, rise=4, fall=5, http_path="/health",
        http_method="HEAD", http_version="HTTP/1.1", http_host="probe.acme.example",
        expect_status="200,202",
    )  # fmt: skip


def test_https_checks_over_tls_tcp_connects_and_a_disabled_monitor_checks_nothing() -> None:
    def check(**over: Any) -> HealthCheck | None:
        d = load_balancer(pools=[pool_dict(healthmonitor=monitor_dict(**over))])
        return health_check(load_balancer_from_provider(d, Mode.ROUTE).pools[0].health_monitor)

    https = check(type="HTTPS", url_path="/")
    assert https is not None and https.tls and https.http_path == "/"
    tcp = check(type="TCP")
    assert tcp is not None and tcp.http_path is None and not tcp.tls
    assert check(type="HTTP", admin_state_up=False) is None


def test_ping_and_tls_hello_monitors_are_refused_by_name() -> None:
    for kind in ("PING", "TLS-HELLO"):
        found = refusals(ObjectKind.HEALTHMONITOR, monitor_dict(type=kind), Mode.ROUTE)
        assert [(u.option, u.value) for u in found] == [("type", kind)]
        assert "HAProxy" in str(found[0]) and MONITOR_ID in str(found[0])
    hm = monitor_dict(delay=7200, timeout=0, domain_name="under_score.example.")
    graph = load_balancer(pools=[pool_dict(healthmonitor=hm)])
    found = refusals_in_load_balancer(graph, Mode.ROUTE)
    assert [u.option for u in found] == ["delay", "timeout", "domain_name"]


def test_the_pools_slice_carries_the_check_and_the_gateway_translates_it() -> None:
    lb = probed_lb()
    bodies = l7.gateway_objects(lb, NAMESPACE)
    (eps,) = [b for b in bodies if b["kind"] == "EndpointSlice"]
    assert ANNOTATION_HEALTH_CHECK in eps["metadata"]["annotations"]
    config = through_gateway(bodies, nodeNetworks=["198.51.100.0/24"]).config
    (backend,) = config.backends
    assert backend.health_check == health_check(lb.pools[0].health_monitor)


def test_a_malformed_check_annotation_is_reported_and_not_used() -> None:

    bodies = l7.gateway_objects(probed_lb(), NAMESPACE)
    for b in bodies:
        if b["kind"] == "EndpointSlice":
            b["metadata"]["annotations"][ANNOTATION_HEALTH_CHECK] = '{"rise": 0}'
    objects, slices = objects_of(bodies)
    world = L7World([tenant("acme", nodeNetworks=["198.51.100.0/24"])], objects, {})
    result = translate(world, slices, [ip_address("203.0.113.1")])
    assert result.config.backends[0].health_check is None
    notes = [n for r in result.results.values() for n in r.notes]
    assert any(ANNOTATION_HEALTH_CHECK in n and "ignored: rise: Input should be" in n
               for n in notes), notes  # fmt: skip


# ------------------------------------------------------------------ statuses


def test_haproxy_server_states_read_as_octavia_member_statuses() -> None:
    assert [server_status(s) for s in ("UP", "UP 1/3", "DOWN", "DOWN 1/2", "no check",
                                       "MAINT")] == [
        "ONLINE", "ONLINE", "ERROR", "ERROR", "NO_MONITOR", None]  # fmt: skip


def test_members_that_pass_their_checks_make_the_whole_chain_online() -> None:
    found = statuses(probed_lb(), report((M0, "UP"), (M1, "UP")))
    assert found == {"lb": "ONLINE", "listener": "ONLINE", "pool": "ONLINE", "m0": "ONLINE",
                     "m1": "ONLINE", "monitor": "ONLINE"}  # fmt: skip


def test_a_failing_member_is_error_and_degrades_its_pool_listener_and_lb() -> None:
    found = statuses(probed_lb(), report((M0, "UP"), (M1, "DOWN")))
    assert (found["m0"], found["m1"]) == ("ONLINE", "ERROR")
    assert (found["pool"], found["listener"], found["lb"]) == ("DEGRADED",) * 3


def test_every_member_failing_is_a_pool_and_listener_in_error_and_the_lb_degraded() -> None:
    found = statuses(probed_lb(), report((M0, "DOWN"), (M1, "DOWN 1/2")))
    assert (found["pool"], found["listener"], found["lb"]) == ("ERROR", "ERROR", "DEGRADED")


def test_a_member_one_gateway_reaches_is_online() -> None:
    found = statuses(probed_lb(), report((M0, "DOWN"), (M1, "UP")), report((M0, "UP")))
    assert (found["m0"], found["m1"], found["pool"]) == ("ONLINE", "ONLINE", "ONLINE")


def test_a_member_no_gateway_reports_keeps_its_last_status() -> None:
    lb = probed_lb()
    last = {(ObjectKind.MEMBER.value, lb.pools[0].members[1].id): "ERROR"}
    found = statuses(lb, report((M0, "UP")), last=last)
    assert (found["m0"], found["m1"], found["pool"]) == ("ONLINE", "ERROR", "DEGRADED")


def test_a_pool_no_gateway_ever_reported_is_left_as_it_is() -> None:
    found = statuses(probed_lb())  # every gateway unreachable since the agent started
    assert "m0" not in found and "m1" not in found and "pool" not in found
    assert (found["lb"], found["listener"]) == ("ONLINE", "ONLINE")


def test_a_disabled_member_is_offline_whatever_the_gateway_says() -> None:
    found = statuses(probed_lb(admin_state_up=False), report((M0, "DOWN"), (M1, "UP")))
    assert (found["m0"], found["m1"], found["pool"]) == ("OFFLINE", "ONLINE", "ONLINE")


def test_only_changed_operating_statuses_are_sent_and_never_provisioning() -> None:
    lb = probed_lb()
    before = operating_statuses(lb, ANSWER, NAMESPACE, [report((M0, "UP"), (M1, "UP"))])
    after = operating_statuses(lb, ANSWER, NAMESPACE, [report((M0, "UP"), (M1, "DOWN"))])
    changes = status_changes(after, before)
    assert changes == {
        "listeners": [{"id": LISTENER_ID, "operating_status": "DEGRADED"}],
        "loadbalancers": [{"id": LB_ID, "operating_status": "DEGRADED"}],
        "members": [{"id": lb.pools[0].members[1].id, "operating_status": "ERROR"}],
        "pools": [{"id": POOL_ID, "operating_status": "DEGRADED"}],
    }
    assert status_changes(after, after) == {}


def test_with_the_agent_the_driver_reports_provisioning_and_a_failure_only() -> None:
    update = {
        "pools": [{"id": "p", "provisioning_status": "ACTIVE", "operating_status": "ONLINE"}],
        "members": [{"id": "m", "provisioning_status": "ERROR", "operating_status": "ERROR"}],
    }
    assert provisioning_only(update) == {
        "pools": [{"id": "p", "provisioning_status": "ACTIVE"}],
        "members": [{"id": "m", "provisioning_status": "ERROR", "operating_status": "ERROR"}],
    }


def test_an_unreported_tree_is_resent_whole_active_with_the_agents_operating_statuses() -> None:
    """The driver agent was down when the driver reported: the provider agent sends the
    whole tree, provisioning ACTIVE (nothing left PENDING_*), and the operating statuses
    it decided from the gateways' checks, not the driver's guesses."""
    lb = probed_lb()
    statuses = operating_statuses(lb, ANSWER, NAMESPACE, [report((M0, "UP"), (M1, "DOWN"))])
    update = resent(lb, ANSWER, statuses)
    assert {e["provisioning_status"] for entries in update.values() for e in entries} == {"ACTIVE"}
    assert update["loadbalancers"] == [
        {"id": LB_ID, "provisioning_status": "ACTIVE", "operating_status": "DEGRADED"}
    ]
    member_status = {e["id"]: e["operating_status"] for e in update["members"]}
    assert member_status == {lb.pools[0].members[0].id: "ONLINE",
                             lb.pools[0].members[1].id: "ERROR"}  # fmt: skip


# ------------------------------------------------------------------ statistics


def test_listener_statistics_sum_the_gateways_and_survive_a_haproxy_reload() -> None:
    lb = probed_lb()
    totals = CounterTotals()
    totals.observe("gw-a", report(bytes_in=100, bytes_out=1000, sessions=10, current=2, errors=1))
    totals.observe("gw-b", report(bytes_in=50, bytes_out=500, sessions=5))
    (stats,) = totals.listener_statistics(lb, NAMESPACE)
    assert stats == {"id": LISTENER_ID, "bytes_in": 150, "bytes_out": 1500,
                     "active_connections": 2, "total_connections": 15,
                     "request_errors": 1}  # fmt: skip
    # gw-a reloads (its counters restart) and serves 3 more; gw-b goes away.
    totals.observe("gw-a", report(bytes_in=30, bytes_out=300, sessions=3))
    totals.forget("gw-b")
    (stats,) = totals.listener_statistics(lb, NAMESPACE)
    assert (stats["total_connections"], stats["bytes_in"], stats["active_connections"]) == (
        18, 180, 0)  # fmt: skip


def test_l4_listeners_have_no_statistics_from_the_gateway() -> None:
    lb = load_balancer_from_provider(load_balancer(), Mode.ROUTE)
    totals = CounterTotals()
    totals.observe("gw", report(sessions=4))
    assert totals.listener_statistics(lb, NAMESPACE) == []
