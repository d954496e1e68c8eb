"""The test stack of issue 38's Octavia provider: the real Neutron (ML2/OVN) and Octavia
with the real ovn-octavia-provider, both programming the Northbound of a real OVN.

One OVN (lab/ovnstack.py: northd, one chassis) and one Keystone + Neutron + Octavia on
PostgreSQL (lab/octavia_ovn.py) for the whole session (tests/conftest.py: `openstack_ovn`,
`openstack`; a stack start costs one to three minutes), shared with tests/providers: each
test makes its own networks. The tests drive Neutron's and Octavia's own APIs and read
what landed in the Northbound with ovn-nbctl. Needs root, OVN, PostgreSQL and the
virtualenv of lab.neutron_server.venv().
"""

from __future__ import annotations

from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.neutron_nets import host_port, network, ovs_map, ovs_uuids, routed, rows
from teapot_lb.lab.neutron_server import NOAUTH_PROJECT
from teapot_lb.lab.octavia_ovn import PROVIDER, OctaviaOVN
from teapot_lb.lab.octavia_stack import active, connection
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.wait import wait_for

MEMBER = "198.51.100.21"
WITHIN = 30.0


def member_graph(conn: Any, subnet: dict[str, Any], member: str) -> Any:
    """A load balancer with its VIP on `subnet`, a TCP listener on 80, a pool and
    `member`:8080, each made once the previous one is ACTIVE; the load balancer."""
    lbs = conn.load_balancer
    lb = lbs.create_load_balancer(name=f"lb-{member}", vip_subnet_id=subnet["id"],
                                  provider=PROVIDER, project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN)
    listener = lbs.create_listener(loadbalancer_id=lb.id, protocol="TCP", protocol_port=80,
                                   project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN)
    pool = lbs.create_pool(listener_id=listener.id, protocol="TCP",
                           lb_algorithm="SOURCE_IP_PORT", project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN)
    lbs.create_member(pool.id, address=member, protocol_port=8080, subnet_id=subnet["id"],
                      project_id=NOAUTH_PROJECT)  # fmt: skip
    return active(conn, lb.id, within=WITHIN)


def test_a_network_subnet_and_port_made_through_neutron_are_rows_of_the_northbound(
    openstack: OctaviaOVN, openstack_ovn: OVNStack
) -> None:
    neutron = openstack.neutron
    net, subnet = network(neutron, "step1")
    fixed = [{"subnet_id": subnet["id"], "ip_address": MEMBER}]
    port = neutron.create("port", name="step1-p", network_id=net["id"], fixed_ips=fixed)

    switch = rows(openstack_ovn, "logical_switch", f"name=neutron-{net['id']}")
    assert len(switch) == 1
    assert ovs_map(switch[0]["external_ids"])["neutron:network_name"] == "step1"
    lsp = rows(openstack_ovn, "logical_switch_port", f"name={port['id']}")
    assert len(lsp) == 1
    assert lsp[0]["addresses"] == f"{port['mac_address']} {MEMBER}"

    neutron.delete("port", port["id"])
    assert rows(openstack_ovn, "logical_switch_port", f"name={port['id']}") == []


def test_a_load_balancer_made_through_octavia_is_a_northbound_row_with_its_vip_and_member(
    openstack: OctaviaOVN, openstack_ovn: OVNStack
) -> None:
    net, subnet = network(openstack.neutron, "step2")
    conn = connection(openstack.stack)
    lbs = conn.load_balancer
    lb = member_graph(conn, subnet, MEMBER)

    row = rows(openstack_ovn, "load_balancer", f"name={lb.id}")
    assert len(row) == 1
    assert ovs_map(row[0]["vips"]) == {f"{lb.vip_address}:80": f"{MEMBER}:8080"}
    assert row[0]["protocol"] == "tcp"
    switch = rows(openstack_ovn, "logical_switch", f"name=neutron-{net['id']}")[0]
    assert row[0]["_uuid"][1] in ovs_uuids(switch["load_balancer"])
    vip_port = rows(openstack_ovn, "logical_switch_port", f"name={lb.vip_port_id}")
    assert len(vip_port) == 1, "the VIP's port, made in Neutron by the provider"

    lbs.delete_load_balancer(lb.id, cascade=True)
    wait_for(lambda: lbs.find_load_balancer(lb.id) is None, timeout=WITHIN,
             what=f"load balancer {lb.id} deleted from Octavia")  # fmt: skip
    wait_for(lambda: not rows(openstack_ovn, "load_balancer", f"name={lb.id}"), timeout=WITHIN,
             what=f"the Load_Balancer row of {lb.id} deleted")  # fmt: skip
    assert rows(openstack_ovn, "logical_switch_port", f"name={lb.vip_port_id}") == []


def test_a_client_behind_a_neutron_router_reaches_the_member_through_the_vip(
    openstack: OctaviaOVN, openstack_ovn: OVNStack
) -> None:
    neutron = openstack.neutron
    members, clients = routed(neutron, "step3")
    member = host_port(neutron, openstack_ovn, "m3", members, "198.51.100.31")
    workload = start_workload(member, "m3", 8080)
    client = Client(host_port(neutron, openstack_ovn, "c3", clients, "192.0.2.31").ns)
    conn = connection(openstack.stack)
    try:
        lb = member_graph(conn, members, "198.51.100.31")
        wait_for(lambda: client.get(lb.vip_address, 80).node == "m3", timeout=WITHIN,
                 what=f"m3 answering on {lb.vip_address}:80")  # fmt: skip

        conn.load_balancer.delete_load_balancer(lb.id, cascade=True)
        wait_for(lambda: client.get(lb.vip_address, 80).node is None, timeout=WITHIN,
                 what=f"{lb.vip_address}:80 unanswered after the delete")  # fmt: skip
    finally:
        client.close()
        workload.terminate()
        workload.wait(10)
