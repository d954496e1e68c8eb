"""The shipped manifests on a real kube-apiserver: the CRDs, deploy/teapot-lb.yaml and the
chart's rendered output are accepted as they are (built-in kinds checked by the server's
own schemas and admission, server-side dry run), and so are the documented examples."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from controller.chart import render_manifest
from teapot_lb.lab.kubeplane import ControlPlane

from .release import ROOT, SHIPPED_NAMESPACE, install_gateway_api, unique

CERT_MANAGER_KINDS = {"Issuer", "Certificate"}
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "webhook off": {"webhook": {"enabled": False}},
    "webhook ignore, caBundle": {"webhook": {"failurePolicy": "Ignore", "caBundle": "Zm9v"}},
    "config namespace": {"configNamespace": "CONFIG"},
    "no memberlist, emptyDir state": {"speaker": {"memberlistSecret": "", "stateHostPath": ""}},
    "class only, one replica": {"classOnly": True, "controller": {"replicas": 1}},
    "speaker off": {"speaker": {"enabled": False}},
    "speaker with tenancy (route mode)": {"speaker": {"tenancy": True}},
    "cert-manager": {"webhook": {"certManager": {"enabled": True}}},
}


def dry_run(plane: ControlPlane, text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={plane.admin_kubeconfig}", "apply", "--dry-run=server",
         "-f", "-"],
        input=text, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_shipped_manifests_apply_as_they_are(installed: ControlPlane) -> None:
    names = json.loads(
        installed.kubectl("get", "crd", "-o", "json")
    )["items"]  # fmt: skip
    established = {
        c["metadata"]["name"]
        for c in names
        if any(
            cond["type"] == "Established" and cond["status"] == "True"
            for cond in c["status"]["conditions"]
        )
    }
    shipped = {yaml.safe_load(p.read_text())["metadata"]["name"]
               for p in (ROOT / "deploy" / "crds").glob("*.yaml")}  # fmt: skip
    assert shipped <= established
    got = installed.kubectl(
        "get", "deployment,daemonset,serviceaccount,role,rolebinding,service,poddisruptionbudget",
        "-n", SHIPPED_NAMESPACE, "-o", "name",
    ).split()  # fmt: skip
    for name in (
        "deployment.apps/teapot-lb-controller",
        "daemonset.apps/teapot-lb-speaker",
        "serviceaccount/teapot-lb-controller",
        "serviceaccount/teapot-lb-speaker",
        "role.rbac.authorization.k8s.io/teapot-lb-controller-leader",
        "service/teapot-lb-webhook",
        "poddisruptionbudget.policy/teapot-lb-controller",
    ):
        assert name in got


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_variant_passes_a_server_side_dry_run(
    installed: ControlPlane, variant: str
) -> None:
    namespace = unique("dry")
    installed.kubectl("create", "namespace", namespace)
    values = json.loads(json.dumps(VARIANTS[variant]).replace("CONFIG", namespace))
    text = render_manifest(values, namespace=namespace)
    docs = [d for d in yaml.safe_load_all(text) if d]
    # cert-manager's kinds exist only where cert-manager is installed (not here).
    checked = [d for d in docs if d["kind"] not in CERT_MANAGER_KINDS]
    skipped = {d["kind"] for d in docs} & CERT_MANAGER_KINDS
    assert skipped == (CERT_MANAGER_KINDS if variant == "cert-manager" else set())
    done = dry_run(installed, json.dumps({"apiVersion": "v1", "kind": "List", "items": checked}))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(checked), done.stdout
    installed.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize(
    "example", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").rglob("*.yaml"))
)
def test_the_examples_pass_the_crd_schemas_and_the_server(
    installed: ControlPlane, example: str
) -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / example).read_text()) if d]
    if any(d["apiVersion"].startswith("gateway.networking.k8s.io/") for d in docs):
        install_gateway_api(installed)  # examples/gateway: an operator installs them first
    for namespace in {d["metadata"].get("namespace") for d in docs} - {None}:
        installed.kubectl("create", "namespace", str(namespace), check=False)
    done = dry_run(installed, (ROOT / example).read_text())
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(docs), done.stdout
