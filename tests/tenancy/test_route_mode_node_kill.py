"""Route mode when a tenant node dies hard (its link cut): what the product does.

Route mode has no liveness check of its own on tenant nodes (no BFD to them, the
management speaker announces next hops it does not peer with): the router keeps the dead
node's path and the connections hashed to it fail, until the tenant's cluster marks the
node's endpoints not ready and its agent updates the request; then the manager drops the
next hop and the speaker withdraws that path. This test shows both halves and prints the
times (BIRD only; the setup is test_route_mode_netns.py's)."""

from __future__ import annotations

import time

import pytest

from bgp.interop.peers import BgpDaemon, fib_next_hops
from standalone.netlab import NODES, wait_for

from .test_route_mode_netns import TENANT_NODES, Management, management, tenant_request

__all__ = ["management"]  # the fixture, imported for this module


@pytest.mark.parametrize("management", ["bird"], indirect=True)
def test_a_dead_tenant_node_keeps_its_path_until_its_backend_is_marked_not_ready(
    management: tuple[Management, BgpDaemon],
) -> None:
    mgmt, _ = management
    lab = mgmt.lab
    started = time.monotonic()
    mgmt.apply([tenant_request()])
    status = wait_for(lambda: (s := mgmt.status()).get("addresses") and s, timeout=20,
                      what="the manager programs the request")  # fmt: skip
    [ip] = status["addresses"]
    lab.bind_service_ip(ip)

    def hops() -> frozenset[str] | None:
        return fib_next_hops(lab.router, f"{ip}/32")

    wait_for(lambda: hops() == TENANT_NODES, timeout=30, what="ECMP over n1..n3")
    wait_for(lambda: lab.who(ip, timeout=0.2), timeout=10, what="the client reaches the IP")
    reachable_s = time.monotonic() - started

    lab.nodes["n2"].ip("link", "set", "eth0", "down")  # n2 dies: its cable cut
    killed = time.monotonic()
    answers: list[str | None] = []

    def three_failed() -> bool:
        answers.append(lab.who(ip, timeout=0.2))
        return answers.count(None) >= 3

    wait_for(three_failed, timeout=30, what="three connections hashed to the dead n2",
             every=0)  # fmt: skip
    assert hops() == TENANT_NODES  # no detection: n2's path is still announced
    assert "n2" not in answers

    marked = time.monotonic()  # before the write (kubectl takes a while to return)
    mgmt.apply([tenant_request(ready={1: False})])  # the tenant's agent: n2 not ready
    rest = TENANT_NODES - {NODES["n2"]}
    wait_for(lambda: hops() == rest, timeout=20, what="n2's path withdrawn",
             detail=lambda: f"FIB: {hops()}")  # fmt: skip
    withdrawn_s = time.monotonic() - marked
    after = [lab.who(ip, timeout=0.2) for _ in range(12)]
    assert None not in after and set(after) <= {"n1", "n3"}
    print(
        f"\nroute mode, BIRD: request → reachable {reachable_s:.2f} s;"
        f" after the kill, {answers.count(None)} of {len(answers)} requests failed in"
        f" {marked - killed:.2f} s with n2 still in the FIB; marked not ready →"
        f" path withdrawn {withdrawn_s:.2f} s (kubectl apply included);"
        " then 12 of 12 requests answered by n1/n3"
    )
    lab.nodes["n2"].ip("link", "set", "eth0", "up")
    mgmt.kubectl("delete", "tenantloadbalancers", "tenant-acme", "web")
    wait_for(lambda: hops() is None, timeout=20, what="the route withdrawn")
