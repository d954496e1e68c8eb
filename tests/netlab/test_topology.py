"""The namespace topology builder used by the lab and the network tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from teapot_lb.netlab import Topology
from teapot_lb.netlab.topology import NetlabError, check_documentation_address


def test_non_documentation_addresses_are_refused() -> None:
    with pytest.raises(NetlabError, match="outside the documentation ranges"):
        check_documentation_address("10.0.0.1/24")
    check_documentation_address("192.0.2.7/24")
    check_documentation_address("2001:db8::1/64")


def test_two_hosts_on_a_switch_can_ping(topology: Topology) -> None:
    sw = topology.add_switch("sw")
    a = topology.add_host("a")
    b = topology.add_host("b")
    topology.connect(a, sw, addrs=["192.0.2.1/24", "2001:db8::1/64"])
    topology.connect(b, sw, addrs=["192.0.2.2/24", "2001:db8::2/64"])
    a.run("ping", "-c", "1", "-W", "2", "192.0.2.2")
    a.run("ping", "-c", "1", "-W", "2", "2001:db8::2")


def test_close_removes_namespaces_and_processes(topology: Topology) -> None:
    a = topology.add_host("a")
    proc = a.popen(["sleep", "600"])
    ns = a.ns
    topology.close()
    assert proc.poll() is not None
    assert not Path("/run/netns", ns).exists()
