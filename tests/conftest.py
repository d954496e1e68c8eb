"""Shared fixtures: skips with reasons for root and daemons, namespace topologies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from needs import require_binary, require_kube, require_ovn, require_root
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.netlab import Topology

if TYPE_CHECKING:  # (the real OpenStack stack's modules load only where it is used)
    from teapot_lb.lab.octavia_ovn import OctaviaOVN
    from teapot_lb.lab.ovnstack import OVNStack

__all__ = [
    "kube_plane",
    "openstack",
    "openstack_ovn",
    "require_binary",
    "require_kube",
    "require_root",
    "topology",
]


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A fresh namespace topology, always torn down (processes killed, namespaces deleted)."""
    require_root()
    label = request.node.name.replace("test_", "")[:6].replace("[", "").replace("-", "")
    topo = Topology(label or "t")
    try:
        yield topo
    finally:
        topo.close()


@pytest.fixture(scope="session")
def kube_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One real control plane (etcd, kube-apiserver, kube-controller-manager) for the whole
    session, shared by every test that asks for it: tests keep to their own namespaces and
    object names. Tests that break the control plane on purpose start their own
    (:class:`teapot_lb.lab.kubeplane.ControlPlane`). Requests are audited
    (:meth:`ControlPlane.audit_events`)."""
    require_kube()
    plane = ControlPlane(tmp_path_factory.mktemp("kube"), audit=True)
    try:
        plane.start()
        yield plane
    finally:
        plane.close()


# The real OpenStack stack (about 1 GB and its periodic tasks) closes after the last test
# that uses it, not at the end of the session: the half of the suite that runs after
# tests/providers does not share the two cores with an idle OpenStack.
_OPENSTACK = contextlib.ExitStack()
_LAST_OPENSTACK_USER = pytest.StashKey[pytest.Item | None]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    users = [i for i in items if "openstack_ovn" in getattr(i, "fixturenames", ())]
    config.stash[_LAST_OPENSTACK_USER] = users[-1] if users else None


@pytest.hookimpl(trylast=True)  # (after the item's own and its module's fixtures are torn down)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if item is item.config.stash.get(_LAST_OPENSTACK_USER, None):
        _OPENSTACK.close()


@pytest.fixture(scope="session")
def openstack_ovn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OVNStack]:
    """The real OVN under the real OpenStack stack (northd, one chassis: ovs-vswitchd
    userspace, ovn-controller), one for the session (tests/octavia/test_ovn_provider_stack.py
    and tests/providers), closed after the last test that uses it: every log in pytest's
    kept temporary directory. Skips naming what is missing (root, OVN, the Neutron
    virtualenv, PostgreSQL)."""
    from teapot_lb.lab.octavia_ovn import missing as openstack_missing
    from teapot_lb.lab.ovnstack import OVNStack

    require_ovn()
    reason = openstack_missing()
    if reason:
        pytest.skip(reason)
    try:
        topo = _OPENSTACK.enter_context(Topology("octovn"))
        stack = OVNStack(tmp_path_factory.mktemp("octovn"), topo)
        _OPENSTACK.callback(stack.close)
        stack.start()
        yield stack
    finally:
        _OPENSTACK.close()


@pytest.fixture(scope="session")
def openstack(openstack_ovn: OVNStack) -> OctaviaOVN:
    """Keystone, Neutron (ML2/OVN) and Octavia with ovn-octavia-provider on that OVN,
    Neutron's and Octavia's databases in PostgreSQL, one for the session (a start costs one
    to three minutes), closed with the OVN under it: every test makes its own networks,
    hosts and load balancers, and deletes the load balancers it made."""
    from teapot_lb.lab.octavia_ovn import running

    return _OPENSTACK.enter_context(running(openstack_ovn.workdir / "openstack", openstack_ovn))
