"""Octavia's L7 listeners served by the real `teapot-lb gateway` process: the Octavia API
(openstacksdk) → the teapot driver → the Gateway, HTTPRoutes, EndpointSlices and TLS
Secrets in the Tenant's namespace of the management API → `teapot-lb gateway` reading
them from there (its cluster source, as in production) → HAProxy in a lab namespace →
members (HTTP servers) in another. Requests reach the members the L7 policies name;
a TERMINATED_HTTPS listener serves each hostname with its certificate by SNI; a member
change moves traffic over HAProxy's runtime API (no reload). One stack, one gateway and
one load balancer per module."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.lab import GatewayLab, gateway_lab, make_certificate
from gateway.test_wired import metric, ready, start_gateway
from needs import require_binary, require_root
from teapot_lb.lab.wait import wait_for

from .stack import (
    POOL_CIDR,
    PROJECT,
    TENANT_NS,
    Stack,
    active,
    config,
    connection,
    missing,
    running,
    store_certificate,
    tenant,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.daemon,
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),
]

SUBNET = "11111111-2222-4333-8444-555555555555"
WWW, API = "www.acme.example", "api.acme.example"
WEB_A, WEB_B, API_MEMBER = "198.51.100.2", "198.51.100.3", "198.51.100.4"
WITHIN = 30.0


@dataclass
class World:
    lab: GatewayLab
    stack: Stack
    conn: Any
    metrics_port: int
    cas: dict[str, Path]  # hostname -> its certificate (curl --cacert)
    lb_id: str = ""
    web_pool: str = ""
    https_first_s: float = 0.0


def objects() -> list[dict[str, Any]]:
    """Tenant acme whose node network holds the members (the gateway reaches them)."""
    return [
        config("AddressPool", "octavia", {"addresses": [POOL_CIDR], "autoAssign": False}),
        tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29", dnsDomains=["acme.example"],
               nodeNetworks=["198.51.100.0/24"]),
    ]  # fmt: skip


def https(w: World, host: str, path: str = "/") -> str | None:
    """The member answering https://host/path (None: no 200)."""
    r = w.lab.curl(f"https://{host}{path}", "--cacert", str(w.cas[host]), host=host, port=443)
    return str(r.json()["name"]) if r.code == 200 else None


@contextmanager
def traffic_world(work: Path) -> Iterator[World]:
    """The lab (gateway, client, members), the stack, and `teapot-lb gateway` reading the
    management API, HAProxy in the lab's gateway namespace (needs root, HAProxy)."""
    with gateway_lab(work, "octgw") as lab:
        members = lab.start_backends(
            f"http:web-a:{WEB_A}:8080", f"http:web-b:{WEB_B}:8080", f"http:api:{API_MEMBER}:8080"
        )
        (work / "stack").mkdir()
        try:
            with running(work / "stack", objects=objects()) as (stack, _):
                gateway, port = start_gateway(lab, ["--kubeconfig", str(stack.kubeconfig)], "gw")
                try:
                    wait_for(lambda: ready(port), timeout=WITHIN, what="the gateway ready")
                    cas = {h: make_certificate(work / "certs", h)[0] for h in (WWW, API)}
                    yield World(lab, stack, connection(stack), port, cas)
                finally:
                    # (HAProxy's own exit is the gateway's to wait for: rc 0 says it did)
                    gateway.send_signal(signal.SIGTERM)
                    assert gateway.wait(timeout=15) == 0
        finally:
            members.terminate()
            members.wait(timeout=10)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    with traffic_world(tmp_path_factory.mktemp("octgw")) as w:
        build(w)
        yield w


def policy(host: str, path: str = "", **pool: Any) -> dict[str, Any]:
    """A REDIRECT_TO_POOL policy (`pool`: redirect_pool by name, or redirect_pool_id)."""
    rules = [{"type": "HOST_NAME", "compare_type": "EQUAL_TO", "value": host}]
    if path:
        rules.append({"type": "PATH", "compare_type": "STARTS_WITH", "value": path})
    return {"action": "REDIRECT_TO_POOL", "rules": rules, **pool}


def tls_graph(w: World, name: str = "gw") -> tuple[Any, float]:
    """One graph create: pools web (a, b) and api, TERMINATED_HTTPS on 443 (www's
    certificate, api's by SNI) with www → web and api → api; returns the load balancer
    ACTIVE and the seconds from the POST to the first HTTPS answer (api's, by SNI)."""
    refs = {
        h: store_certificate(w.stack, ca.read_text(), ca.with_suffix(".key").read_text())
        for h, ca in w.cas.items()
    }
    pools = [
        {"name": name, "protocol": "HTTP", "lb_algorithm": "ROUND_ROBIN",
         "members": [{"address": a, "protocol_port": 8080} for a in addresses]}
        for name, addresses in (("web", [WEB_A, WEB_B]), ("api", [API_MEMBER]))
    ]  # fmt: skip
    tls = {
        "protocol": "TERMINATED_HTTPS", "protocol_port": 443,
        "default_tls_container_ref": refs[WWW], "sni_container_refs": [refs[API]],
        "l7policies": [policy(WWW, redirect_pool={"name": "web"}),
                       policy(API, redirect_pool={"name": "api"})],
    }  # fmt: skip
    start = time.monotonic()
    lb = w.conn.load_balancer.create_load_balancer(
        name=name, vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot",
        listeners=[tls], pools=pools,
    )  # fmt: skip
    wait_for(lambda: https(w, API), timeout=WITHIN, what=f"https://{API}/ served",
             every=0.02)  # fmt: skip
    took = time.monotonic() - start
    return active(w.conn, lb.id, within=WITHIN), took


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
