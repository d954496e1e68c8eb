"""Octavia's L7 listeners served by the real `teapot-lb gateway` process, for
tests/octavia/test_gateway_traffic_netns.py and bench/octavia_tls.py: the gateway lab
(gateway, client, members), the Octavia stack, and `teapot-lb gateway` reading the
management API the teapot driver writes (HAProxy in the lab's gateway namespace; needs
root, HAProxy, curl and openssl); `tls_graph` creates a TERMINATED_HTTPS load balancer in
one call."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.lab.gateway_lab import (
    GatewayLab,
    gateway_lab,
    make_certificate,
    ready,
    start_gateway,
)
from teapot_lb.lab.octavia import (
    POOL_CIDR,
    PROJECT,
    TENANT_NS,
    Stack,
    config,
    running,
    store_certificate,
    tenant,
)
from teapot_lb.lab.octavia_stack import active, connection
from teapot_lb.lab.wait import wait_for

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
