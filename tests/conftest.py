"""Shared fixtures: skips with reasons for root and daemons, namespace topologies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from needs import require_binary, require_kube, require_root
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.netlab import Topology

__all__ = ["kube_plane", "require_binary", "require_kube", "require_root", "topology"]


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
