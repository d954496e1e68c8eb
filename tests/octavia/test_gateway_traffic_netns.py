"""Octavia's L7 listeners served by the real `teapot-lb gateway` process: the Octavia API
(openstacksdk) → the teapot driver → the Gateway, HTTPRoutes, EndpointSlices and TLS
Secrets in the Tenant's namespace of the management API → `teapot-lb gateway` reading
them from there (its cluster source, as in production) → HAProxy in a lab namespace →
members (HTTP servers) in another. Requests reach the members the L7 policies name;
a TERMINATED_HTTPS listener serves each hostname with its certificate by SNI; a member
change moves traffic over HAProxy's runtime API (no reload). One stack, one gateway and
one load balancer per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.gateway_lab import (
    metric,
)
from teapot_lb.lab.octavia import (
    PROJECT,
    missing,
)
from teapot_lb.lab.octavia_stack import active
from teapot_lb.lab.octavia_traffic import (
    API,
    WEB_A,
    WITHIN,
    WWW,
    World,
    https,
    policy,
    tls_graph,
    traffic_world,
)
from teapot_lb.lab.wait import wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.daemon,
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    with traffic_world(tmp_path_factory.mktemp("octgw")) as w:
        build(w)
        yield w


def build(w: World) -> None:
    """The TLS load balancer (tls_graph), then one listener create: HTTP on 80 with
    www/api* → api and www → web."""
    lbs = w.conn.load_balancer
    lb, w.https_first_s = tls_graph(w)
    w.lb_id = lb.id
    ids = {lbs.get_pool(p["id"]).name: p["id"] for p in lb.pools}
    w.web_pool = ids["web"]
    http = lbs.create_listener(
        loadbalancer_id=lb.id, protocol="HTTP", protocol_port=80, project_id=PROJECT
    )
    active(w.conn, lb.id, within=WITHIN)
    # (one call per rule: Octavia 19 fails a policy create with inline rules)
    for made in (policy(WWW, "/api", redirect_pool_id=ids["api"]),
                 policy(WWW, redirect_pool_id=ids["web"])):  # fmt: skip
        rules = made.pop("rules")
        created = lbs.create_l7_policy(listener_id=http.id, project_id=PROJECT, **made)
        active(w.conn, lb.id, within=WITHIN)
        for rule in rules:
            lbs.create_l7_rule(created.id, project_id=PROJECT, **rule)
            active(w.conn, lb.id, within=WITHIN)


def served_by(w: World, path: str, host: str = WWW) -> str | None:
    return w.lab.served_by(path, host)


def test_http_requests_reach_the_members_the_l7_policies_name(world: World) -> None:
    assert wait_for(lambda: served_by(world, "/api/v1"), timeout=WITHIN,
                    what="http://www.acme.example/api/v1 served") == "api"  # fmt: skip
    seen = {served_by(world, "/") for _ in range(20)}
    assert seen == {"web-a", "web-b"}  # the web pool's two members, round robin
    # A hostname no policy names is not this load balancer's.
    assert world.lab.curl("http://other.acme.example/", host="other.acme.example").code == 404


def test_https_is_served_with_each_hostnames_certificate_by_sni(world: World) -> None:
    assert https(world, API) == "api"
    assert https(world, WWW) in ("web-a", "web-b")
    for host in (WWW, API):
        subject = world.lab.peer_certificate_subject(443, host).replace(" = ", "=")
        assert f"CN={host}" in subject, subject
    print(f"TERMINATED_HTTPS listener create -> first HTTPS answer: {world.https_first_s:.2f} s")


def test_a_member_change_moves_traffic_without_a_reload(world: World) -> None:
    lbs, port = world.conn.load_balancer, world.metrics_port
    reloads = metric(port, "teapot_lb_gateway_reloads_total")
    actions = metric(port, "teapot_lb_gateway_runtime_actions_total") or 0.0
    web_a = next(m for m in lbs.members(world.web_pool) if m.address == WEB_A)
    lbs.update_member(web_a, world.web_pool, admin_state_up=False)
    active(world.conn, world.lb_id, within=WITHIN)

    def only_b() -> bool:
        return {served_by(world, "/") for _ in range(6)} == {"web-b"}

    wait_for(only_b, timeout=WITHIN, what="web-a drained: every request to web-b", every=0.1)
    assert https(world, WWW) == "web-b"
    assert metric(port, "teapot_lb_gateway_reloads_total") == reloads
    assert (metric(port, "teapot_lb_gateway_runtime_actions_total") or 0.0) > actions
    lbs.update_member(web_a, world.web_pool, admin_state_up=True)
    active(world.conn, world.lb_id, within=WITHIN)
    wait_for(lambda: "web-a" in {served_by(world, "/") for _ in range(10)}, timeout=WITHIN,
             what="web-a back")  # fmt: skip
