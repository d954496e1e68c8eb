"""Route mode when a tenant node dies hard (its link cut), and when a management speaker
is cut off from some or all of the tenant's nodes: the speakers' own probes of the next
hops (teapot_lb.announce.hop_health).

A dead node's path is withheld by both speakers (m1, m2) within a few probe rounds, before
the tenant's cluster could mark it not ready (the request is not touched); m1 alone cut
off from n2 withholds n2's path but the router keeps it through m2; m1 cut off from every
tenant node withholds nothing (it cannot tell that from a dead tenant). BIRD only (m1's
own paths are read from BIRD's protocol for m1); the setup is test_route_mode_netns.py's,
with the request's nodePort on the lab's workload port (7000) so the probes reach the
nodes' "kube-proxy"."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from teapot_lb.lab.peers import BgpDaemon, fib_next_hops
from teapot_lb.lab.peers.bird import Bird
from teapot_lb.lab.standalone_lab import NODES, PORT
from teapot_lb.lab.wait import wait_for

from .test_route_mode_netns import M1, TENANT_NODES, Management, management, tenant_request

__all__ = ["management"]  # the fixture, imported for this module


def probed_request() -> dict[str, Any]:
    body = tenant_request()
    body["spec"]["ports"] = [{"protocol": "TCP", "port": PORT, "nodePort": PORT}]
    return body


def failing_logged(mgmt: Management) -> list[list[str]]:
    """Every failing set the speaker logged, in order."""
    out = []
    for line in (mgmt.workdir / "speaker.log").read_text(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("event") == "tenant next hops failing":
            out.append(doc["failing"])
    return out


@pytest.mark.parametrize("management", ["bird"], indirect=True)
def test_a_dead_tenant_nodes_path_is_withheld_by_the_speakers_probes_but_not_on_a_partition(
    management: tuple[Management, BgpDaemon],
) -> None:
    mgmt, router = management
    assert isinstance(router, Bird)  # m1's own paths are read from BIRD's protocol m1
    lab = mgmt.lab
    m1 = lab.topo.hosts["m1"]
    mgmt.apply([probed_request()])
    status = wait_for(lambda: (s := mgmt.status()).get("addresses") and s, timeout=20,
                      what="the manager programs the request")  # fmt: skip
    [ip] = status["addresses"]
    lab.bind_service_ip(ip)

    def hops() -> frozenset[str] | None:
        return fib_next_hops(lab.router, f"{ip}/32")

    def m1_paths() -> int:
        """The paths the router holds from m1 (ADD-PATH: one per next hop)."""
        return router.imported(M1).get("ipv4", 0)

    wait_for(lambda: hops() == TENANT_NODES, timeout=30, what="ECMP over n1..n3")
    wait_for(lambda: m1_paths() == 3, timeout=30, what="m1's three paths at the router")
    wait_for(lambda: lab.who(ip, timeout=0.2), timeout=10, what="the client reaches the IP")

    # m1 alone cut off from n2: m1 withholds n2's path, m2 still announces it.
    m1.ip("route", "add", "prohibit", f"{NODES['n2']}/32")
    wait_for(lambda: m1_paths() == 2, timeout=10, what="m1 withholding n2's path",
             detail=lambda: str(failing_logged(mgmt)))  # fmt: skip
    # The router keeps n2 through m2: one speaker's view. (Waited on, not read once: on a
    # loaded machine m2's own probe of n2 may miss a round and take n2 out for a moment,
    # as a CI run saw; a path withheld by both would keep n2 out and fail the wait.)
    wait_for(lambda: hops() == TENANT_NODES, timeout=10, what="the router keeping n2 via m2",
             detail=lambda: f"FIB: {hops()}, logged: {failing_logged(mgmt)}")  # fmt: skip
    m1.ip("route", "del", "prohibit", f"{NODES['n2']}/32")
    wait_for(lambda: m1_paths() == 3, timeout=10, what="m1's path for n2 back")

    lab.nodes["n2"].ip("link", "set", "eth0", "down")  # n2 dies: its cable cut
    killed = time.monotonic()
    rest = TENANT_NODES - {NODES["n2"]}
    wait_for(lambda: hops() == rest, timeout=10, what="n2's path withheld by both speakers",
             detail=lambda: f"FIB: {hops()}, logged: {failing_logged(mgmt)}")  # fmt: skip
    withheld_s = time.monotonic() - killed
    assert mgmt.status()["nextHops"] == sorted(TENANT_NODES)  # the request is untouched
    after = [lab.who(ip, timeout=0.5) for _ in range(12)]
    assert None not in after and set(after) <= {"n1", "n3"}

    lab.nodes["n2"].ip("link", "set", "eth0", "up")
    wait_for(lambda: hops() == TENANT_NODES, timeout=10, what="n2's path back")
    wait_for(lambda: m1_paths() == 3, timeout=10, what="m1's three paths back")

    logged = len(failing_logged(mgmt))
    for addr in NODES.values():  # m1 cut off from every tenant node (its BGP stays up)
        m1.ip("route", "add", "prohibit", f"{addr}/32")
    all_failing = sorted(NODES.values())
    seen: set[int] = set()

    def all_failing_watching_m1s_paths() -> bool:
        seen.add(m1_paths())
        return all_failing in failing_logged(mgmt)[logged:]

    wait_for(all_failing_watching_m1s_paths, timeout=10, what="every tenant node failing from m1",
             detail=lambda: str(failing_logged(mgmt)), every=0)  # fmt: skip
    seen.add(m1_paths())
    assert seen == {3}  # m1 withheld nothing at any time: a partition is not a dead tenant
    # (m2's probes: as above)
    wait_for(lambda: hops() == TENANT_NODES, timeout=10, what="the router keeping n1..n3",
             detail=lambda: f"FIB: {hops()}")  # fmt: skip
    wait_for(lambda: lab.who(ip, timeout=0.5), timeout=10, what="the client still served")
    for addr in NODES.values():
        m1.ip("route", "del", "prohibit", f"{addr}/32")
    wait_for(lambda: failing_logged(mgmt)[-1] == [], timeout=10, what="the nodes pass again")
    print(f"\nroute mode, BIRD, speakers m1 and m2: n2's link cut → its path withheld by both"
          f" in {withheld_s:.2f} s (request untouched); m1 alone cut off from n2 → m1"
          " withholds it, the router keeps it through m2; m1 cut off from n1..n3 → m1"
          " withholds nothing")  # fmt: skip
    mgmt.kubectl("delete", "tenantloadbalancers", "tenant-acme", "web")
    wait_for(lambda: hops() is None, timeout=20, what="the route withdrawn")
