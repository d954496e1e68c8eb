"""The upstream Gateway API CRDs (../shared/gateway-api, standard channel v1.6.1) applied
to a real kube-apiserver and the same manifests to `teapot-lb validate`'s evaluation of the
vendored copies: the same verdict for each, and the refusal's message in both.

Each manifest is sent as a server-side dry run (`kubectl create --dry-run=server`): the
apiserver defaults, prunes and validates it (schema and CEL rules) and stores nothing."""

from __future__ import annotations

import copy
import subprocess
import uuid
from collections.abc import Iterator

import pytest
import yaml

from model.gateway_api_cases import CASES, Case
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.model.manifest import parse_object

from .release import install_gateway_api


@pytest.fixture(scope="module")
def namespace(kube_plane: ControlPlane) -> Iterator[str]:
    install_gateway_api(kube_plane)
    name = f"crd-cases-{uuid.uuid4().hex[:6]}"
    kube_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kube_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _apiserver_verdict(plane: ControlPlane, namespace: str, body: dict[str, object]) -> str | None:
    """None when the apiserver would create the object, else its refusal."""
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={plane.admin_kubeconfig}", "create", "--dry-run=server",
         "-n", namespace, "-f", "-", "-o", "name"],
        input=yaml.safe_dump(body), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return None if done.returncode == 0 else done.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_apiserver_and_validate_give_a_manifest_the_same_verdict(
    kube_plane: ControlPlane, namespace: str, case: Case
) -> None:
    body = copy.deepcopy(case.body)
    body["metadata"]["namespace"] = namespace
    refusal = _apiserver_verdict(kube_plane, namespace, body)
    _, problems = parse_object(body)
    ours = "; ".join(p.message for p in problems) or None
    if case.refused_with is None:
        assert refusal is None, f"the apiserver refused it: {refusal}"
        assert ours is None, f"we refused it: {ours}"
    else:
        assert refusal is not None, "the apiserver accepted it"
        assert case.refused_with in refusal, refusal
        assert ours is not None, f"we accepted it; the apiserver said: {refusal}"
        assert case.refused_with in ours, ours
