"""Fixtures of the real-apiserver tier: the shipped manifests installed once on the
session's control plane, and a :class:`Release` of the chart per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from teapot_lb.lab.kubeplane import ControlPlane

from .release import Release, install_shipped, unique


@pytest.fixture(scope="session")
def installed(kube_plane: ControlPlane) -> ControlPlane:
    """The session's plane with the shipped manifests (:func:`install_shipped`)."""
    install_shipped(kube_plane)
    return kube_plane


@pytest.fixture
def release(installed: ControlPlane, tmp_path: Path) -> Iterator[Release]:
    """The chart's identities in a namespace of this test; its processes stopped after."""
    rel = Release(installed, unique("rel"), tmp_path).install()
    try:
        yield rel
    finally:
        rel.close()
