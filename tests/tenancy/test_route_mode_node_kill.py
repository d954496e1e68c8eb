"""Route mode when a tenant node dies hard (its link cut), and when the management speaker
is cut off from the tenant's nodes: the speaker's own probes of the next hops
(teapot_lb.tenancy.hop_health).

A dead node's path is withheld by the speaker within a few probe rounds, before the
tenant's cluster could mark it not ready (the request is not touched); a speaker cut off
from every tenant node withholds nothing (it cannot tell that from a dead tenant). BIRD
only; the setup is test_route_mode_netns.py's, with the request's nodePort on the lab's
workload port (7000) so the probes reach the nodes' "kube-proxy"."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bgp.interop.peers import BgpDaemon, fib_next_hops
from standalone.netlab import NODES, PORT, wait_for

from .test_route_mode_netns import TENANT_NODES, Management, management, tenant_request

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
    mgmt, _ = management
    lab = mgmt.lab
    m1 = lab.topo.hosts["m1"]
    mgmt.apply([probed_request()])
    status = wait_for(lambda: (s := mgmt.status()).get("addresses") and s, timeout=20,
                      what="the manager programs the request")  # fmt: skip
    [ip] = status["addresses"]
    lab.bind_service_ip(ip)

    def hops() -> frozenset[str] | None:
        return fib_next_hops(lab.router, f"{ip}/32")

    wait_for(lambda: hops() == TENANT_NODES, timeout=30, what="ECMP over n1..n3")
    wait_for(lambda: lab.who(ip, timeout=0.2), timeout=10, what="the client reaches the IP")

    lab.nodes["n2"].ip("link", "set", "eth0", "down")  # n2 dies: its cable cut
    killed = time.monotonic()
    rest = TENANT_NODES - {NODES["n2"]}
    wait_for(lambda: hops() == rest, timeout=10, what="n2's path withheld by the probes",
             detail=lambda: f"FIB: {hops()}, logged: {failing_logged(mgmt)}")  # fmt: skip
    withheld_s = time.monotonic() - killed
    assert mgmt.status()["nextHops"] == sorted(TENANT_NODES)  # the request is untouched
    after = [lab.who(ip, timeout=0.5) for _ in range(12)]
    assert None not in after and set(after) <= {"n1", "n3"}

    lab.nodes["n2"].ip("link", "set", "eth0", "up")
    wait_for(lambda: hops() == TENANT_NODES, timeout=10, what="n2's path back")

    logged = len(failing_logged(mgmt))
    for addr in NODES.values():  # m1 cut off from the tenant's nodes (its BGP stays up)
        m1.ip("route", "add", "prohibit", f"{addr}/32")
    all_failing = sorted(NODES.values())
    seen: set[frozenset[str] | None] = set()

    def all_failing_watching_the_fib() -> bool:
        seen.add(hops())
        return all_failing in failing_logged(mgmt)[logged:]

    wait_for(all_failing_watching_the_fib, timeout=10, what="every tenant node failing from m1",
             detail=lambda: str(failing_logged(mgmt)), every=0)  # fmt: skip
    seen.add(hops())
    assert seen == {TENANT_NODES}  # nothing withheld at any time: not a dead tenant
    wait_for(lambda: lab.who(ip, timeout=0.5), timeout=10, what="the client still served")
    for addr in NODES.values():
        m1.ip("route", "del", "prohibit", f"{addr}/32")
    wait_for(lambda: failing_logged(mgmt)[-1] == [], timeout=10, what="the nodes pass again")
    assert hops() == TENANT_NODES
    print(f"\nroute mode, BIRD: n2's link cut → its path withheld by m1's probes in"
          f" {withheld_s:.2f} s (request untouched); m1 cut off from n1..n3 → nothing"
          " withheld")  # fmt: skip
    mgmt.kubectl("delete", "tenantloadbalancers", "tenant-acme", "web")
    wait_for(lambda: hops() is None, timeout=20, what="the route withdrawn")
