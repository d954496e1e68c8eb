"""Networks in the lab's real Neutron (ML2/OVN), as a tenant's Octavia load balancer
needs them: a subnet, two subnets on a router, a namespace bound to a Neutron port; and
what landed in OVN's Northbound, read with ovn-nbctl.

Neutron's OVN driver reports a router port ACTIVE once the Northbound's notification of
it came back: :func:`routed` waits for that, not for one answer.
"""

from __future__ import annotations

import json
from typing import Any

from teapot_lb.lab.neutron_server import Neutron
from teapot_lb.lab.ovnstack import OVNDatabases, OVNStack
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host

SUBNET = "198.51.100.0/24"
UP_WITHIN = 60.0  # a router port's notification on the 2-core machine under load


def network(
    neutron: Neutron, name: str, cidr: str = SUBNET, pool: tuple[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A network and its subnet (no DHCP; the gateway .1) made through Neutron's API;
    `pool` (first, last) bounds the addresses Neutron picks itself (it picks at random in
    the subnet otherwise: a port made by ovn-octavia-provider, its health monitors' source,
    could take an address a test names later)."""
    net = neutron.create("network", name=name)
    fields: dict[str, Any] = {}
    if pool is not None:
        fields["allocation_pools"] = [{"start": pool[0], "end": pool[1]}]
    subnet = neutron.create("subnet", name=name, network_id=net["id"], cidr=cidr,
                            ip_version=4, enable_dhcp=False, **fields)  # fmt: skip
    return net, subnet


def routed(
    neutron: Neutron,
    name: str,
    members: str = SUBNET,
    clients: str = "192.0.2.0/24",
    member_pool: tuple[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two networks, the members' (its allocation pool `member_pool`, see :func:`network`)
    and the clients', on one Neutron router: their subnets."""
    _, member_subnet = network(neutron, name, members, member_pool)
    _, client_subnet = network(neutron, f"{name}-clients", clients)
    router = neutron.create("router", name=name)
    for subnet in (member_subnet, client_subnet):
        added = neutron.call("PUT", f"/v2.0/routers/{router['id']}/add_router_interface",
                             {"subnet_id": subnet["id"]})  # fmt: skip
        up(neutron, added["port_id"])
    return member_subnet, client_subnet


def up(neutron: Neutron, port_id: str) -> None:
    """Wait for Neutron to have handled a router port's going up (a host's port stays
    DOWN in Neutron: no binding host): its OVN driver writes the port's status from the
    Northbound's notification, after the request that made the port has answered."""
    wait_for(lambda: neutron.call("GET", f"/v2.0/ports/{port_id}")["port"]["status"] == "ACTIVE",
             timeout=UP_WITHIN, what=f"port {port_id} ACTIVE in Neutron", every=0.2)  # fmt: skip


def host_port(
    neutron: Neutron,
    ovn: OVNStack,
    name: str,
    subnet: dict[str, Any],
    address: str,
    *,
    security_group: str | None = None,
) -> Host:
    """A namespace `name` bound to a Neutron port with `address` on `subnet`, its default
    route the subnet's gateway. Without `security_group` the port has no port security
    (no security group in the way); its Logical_Switch_Port's addresses are then only
    "unknown", so ovn-octavia-provider cannot find it as a monitored member's port (it
    looks the member's address up in them): a member to be health-checked needs a port
    with port security and a group letting the probes and the clients in
    (:func:`open_security_group`)."""
    fixed = [{"subnet_id": subnet["id"], "ip_address": address}]
    security: dict[str, Any] = {"port_security_enabled": False}
    if security_group is not None:
        security = {"port_security_enabled": True, "security_groups": [security_group]}
    port = neutron.create("port", name=name, network_id=subnet["network_id"], fixed_ips=fixed,
                          **security)  # fmt: skip
    host = ovn.topology.add_host(name)
    prefix = subnet["cidr"].partition("/")[2]
    ovn.bind(host, port["id"], f"{address}/{prefix}", subnet["gateway_ip"],
             mac=port["mac_address"])  # fmt: skip
    return host


def open_security_group(neutron: Neutron, name: str) -> str:
    """A security group letting everything in (and, as every group, out): its id. For a
    lab port that needs port security only so OVN knows its address."""
    group = neutron.create("security_group", name=name)
    for ethertype in ("IPv4", "IPv6"):
        neutron.create("security_group_rule", security_group_id=group["id"],
                       direction="ingress", ethertype=ethertype)  # fmt: skip
    return str(group["id"])


def rows(nb: OVNDatabases, table: str, *conditions: str) -> list[dict[str, Any]]:
    """The rows of a Northbound table (ovn-nbctl find), each a {column: value} dict."""
    found = json.loads(nb.nbctl("--format=json", "find", table, *conditions))
    return [dict(zip(found["headings"], row, strict=True)) for row in found["data"]]


def ovs_map(value: Any) -> dict[str, str]:
    """An OVSDB map as ovn-nbctl's JSON writes it (["map", [[k, v], ...]])."""
    return {k: v for k, v in value[1]}


def ovs_uuids(value: Any) -> set[str]:
    """An OVSDB set of references as ovn-nbctl's JSON writes it: ["uuid", u] for one,
    ["set", [["uuid", u], ...]] for none or several."""
    if value[0] == "uuid":
        return {value[1]}
    return {uuid for _, uuid in value[1]}
