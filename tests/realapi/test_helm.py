"""Real Helm against a real API server: both charts installed, upgraded with a changed
value and uninstalled, as docs/install.md and docs/teapot.md tell a user to.

A control plane of its own: the session's plane holds the shipped manifests, whose
cluster-wide objects (ClusterRoles, webhook configurations) Helm would refuse to adopt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.chart import CHART, helm, render_objects
from needs import require_kube
from teapot_lb.lab.kubeplane import ControlPlane

AGENT_CHART = CHART.parent / "teapot-tenant-agent"
NAMESPACE = "teapot-lb-system"
AGENT_NAMESPACE = "teapot-system"


def _get(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The object as the apiserver holds it, or None."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace")
    where = ["-n", namespace] if namespace else []
    out = plane.kubectl("get", kind, name, *where, "-o", "json", "--ignore-not-found", check=True)
    return json.loads(out) if out.strip() else None


def _crds(plane: ControlPlane) -> set[str]:
    out = plane.kubectl("get", "crd", "-o", "jsonpath={.items[*].metadata.name}")
    return set(out.split())


def test_helm_installs_upgrades_and_uninstalls_both_charts(tmp_path: Path) -> None:
    require_kube()
    with ControlPlane(tmp_path / "kube", controller_manager=False) as plane:
        kc = plane.admin_kubeconfig
        helm(
            "install", "teapot-lb", str(CHART), "-n", NAMESPACE, "--create-namespace",
            "--set", "webhook.caBundle=Y2E=", kubeconfig=kc,
        )  # fmt: skip
        helm(
            "install", "web-1", str(AGENT_CHART), "-n", AGENT_NAMESPACE, "--create-namespace",
            kubeconfig=kc,
        )  # fmt: skip
        rendered = render_objects(namespace=NAMESPACE)
        agent = render_objects(chart=AGENT_CHART, namespace=AGENT_NAMESPACE, release="web-1")
        for obj in rendered + agent:
            held = _get(plane, obj)
            assert held is not None, f"{obj['kind']}/{obj['metadata']['name']} not installed"
            assert held["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        crds = _crds(plane)
        assert {"addresspools.lb.teapot.io", "bgppeers.lb.teapot.io"} <= crds

        controller = {"kind": "Deployment", "metadata": {"name": "teapot-lb-controller"}}
        controller["metadata"]["namespace"] = NAMESPACE
        before = _get(plane, controller)
        assert before is not None and before["spec"]["replicas"] == 2
        helm(
            "upgrade", "teapot-lb", str(CHART), "-n", NAMESPACE, "--reuse-values",
            "--set", "controller.replicas=3", kubeconfig=kc,
        )  # fmt: skip
        after = _get(plane, controller)
        assert after is not None and after["spec"]["replicas"] == 3
        history = json.loads(
            helm("history", "teapot-lb", "-n", NAMESPACE, "-o", "json", kubeconfig=kc)
        )
        assert [h["revision"] for h in history] == [1, 2]
        assert json.loads(
            helm("get", "values", "teapot-lb", "-n", NAMESPACE, "-o", "json", kubeconfig=kc)
        ) == {"controller": {"replicas": 3}, "webhook": {"caBundle": "Y2E="}}

        helm("uninstall", "teapot-lb", "-n", NAMESPACE, "--wait", kubeconfig=kc)
        helm("uninstall", "web-1", "-n", AGENT_NAMESPACE, "--wait", kubeconfig=kc)
        left = [o for o in rendered + agent if _get(plane, o) is not None]
        assert not left, [f"{o['kind']}/{o['metadata']['name']}" for o in left]
        # Helm's own rule: the CRDs of a chart's crds/ directory stay (deleting them would
        # delete every pool and advertisement).
        assert crds <= _crds(plane)
