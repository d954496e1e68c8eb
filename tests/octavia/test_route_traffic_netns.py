"""An Octavia load balancer serving traffic in route mode, in the lab's namespaces.

Everything of the management side and Octavia runs in the router's namespace: the fake
API server (on the LAN address), `teapot-lb manager`, `octavia-driver-agent`,
`octavia-api` with the teapot provider; a management speaker (`teapot-lb speaker
--tenancy`) on host m1 peers with BIRD 2 in the router. The Octavia members are the lab's
nodes n1..n3 (each serving its name on port 7000); they accept the VIP on `lo` as route
mode asks of members. The client reaches the VIP through the router's ECMP route.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.octavia import PROJECT, Rest, Stack, missing
from teapot_lb.lab.octavia_stack import active, connection, route_lab
from teapot_lb.lab.peers import DAEMONS, fib_next_hops
from teapot_lb.lab.standalone_lab import NODES, PORT, Lab
from teapot_lb.lab.wait import wait_for

pytestmark = [
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),
]

SUBNET = "11111111-2222-4333-8444-555555555555"
MEMBERS = frozenset(NODES.values())


@pytest.fixture(scope="module")
def lab_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Lab, Stack, Rest, Any]]:
    require_root()
    require_binary(*DAEMONS["bird"].binaries)
    with route_lab(tmp_path_factory.mktemp("octavia-route")) as (lab, stack, rest):
        yield lab, stack, rest, connection(stack)


def test_a_request_to_the_vip_reaches_a_member_and_follows_member_changes(
    lab_stack: tuple[Lab, Stack, Rest, Any],
) -> None:
    lab, stack, rest, conn = lab_stack
    lbs = conn.load_balancer
    lb = lbs.create_load_balancer(
        name="web", vip_subnet_id=SUBNET, project_id=PROJECT, provider="teapot"
    )
    vip = active(conn, lb.id).vip_address
    listener = lbs.create_listener(
        loadbalancer_id=lb.id, protocol="TCP", protocol_port=PORT, project_id=PROJECT
    )
    active(conn, lb.id)
    pool = lbs.create_pool(
        listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN", project_id=PROJECT
    )
    active(conn, lb.id)
    members = {}
    for name, address in NODES.items():
        members[name] = lbs.create_member(
            pool.id, address=address, protocol_port=PORT, project_id=PROJECT
        )
        active(conn, lb.id)
    lab.bind_service_ip(vip)  # the members' part in route mode: accept the VIP

    prefix = f"{vip}/32"

    def hops() -> frozenset[str] | None:
        return fib_next_hops(lab.router, prefix)

    wait_for(lambda: hops() == MEMBERS, timeout=30, what="ECMP over the members in BIRD's FIB",
             detail=lambda: f"FIB: {hops()}; TLB: {rest.tlb(lb.id)}; "
                            f"speaker: {stack.tail('speaker', 10)}")  # fmt: skip
    answered = wait_for(lambda: lab.who(vip), timeout=10, what="the client reaches the VIP")
    assert answered in NODES

    lbs.update_member(members["n2"], pool.id, admin_state_up=False)
    active(conn, lb.id)
    rest_of = MEMBERS - {NODES["n2"]}
    wait_for(lambda: hops() == rest_of, timeout=20, what="n2's path withdrawn")
    seen = {lab.who(vip) for _ in range(12)}
    assert "n2" not in seen and seen <= {"n1", "n3"}, seen

    lbs.delete_load_balancer(lb.id, cascade=True)
    wait_for(lambda: hops() is None, timeout=20, what="the route withdrawn after the delete")
    assert rest.tlb(lb.id) is None
