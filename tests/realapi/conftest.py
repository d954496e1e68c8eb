"""Fixtures of the real-apiserver tier: the shipped manifests installed once on the
session's control plane, and a :class:`Release` of the chart per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from teapot_lb.lab.kubeplane import ControlPlane

from .release import Release, unique

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_NAMESPACE = "teapot-lb-system"


@pytest.fixture(scope="session")
def installed(kube_plane: ControlPlane) -> ControlPlane:
    """The CRDs and deploy/teapot-lb.yaml applied as they are, the CRDs established.

    The shipped ValidatingWebhookConfiguration is removed again afterwards: it reaches the
    controller through a Service, and no Pod runs here to back it (with failurePolicy Fail
    every lb.teapot.io write would be refused). Tests register the webhook by URL instead
    (test_webhook.py)."""
    kube_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kube_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "-f", str(ROOT / "deploy" / "crds")
    )
    kube_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "teapot-lb.yaml"))
    kube_plane.kubectl("delete", "validatingwebhookconfiguration", "teapot-lb")
    return kube_plane


@pytest.fixture
def release(installed: ControlPlane, tmp_path: Path) -> Iterator[Release]:
    """The chart's identities in a namespace of this test; its processes stopped after."""
    rel = Release(installed, unique("rel"), tmp_path).install()
    try:
        yield rel
    finally:
        rel.close()
