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
from pathlib import Path

import pytest
import yaml

from model.gateway_api_cases import CASES, Case
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for
from teapot_lb.model.gateway_api_schema import CRD_FILES
from teapot_lb.model.manifest import parse_object

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_API = ROOT.parent / "shared" / "gateway-api"


@pytest.fixture(scope="module")
def namespace(kube_plane: ControlPlane) -> Iterator[str]:
    if not GATEWAY_API.is_dir():
        pytest.skip(f"the Gateway API CRDs are not in {GATEWAY_API}")
    files = [str(GATEWAY_API / file) for file in CRD_FILES.values()]
    for file in files:
        kube_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", file)

    def established() -> bool:
        # A CRD just created has no conditions yet, which `kubectl wait` takes for an error.
        lines = kube_plane.kubectl(
            "get", *(f"-f={f}" for f in files),
            "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Established')]"
            ".status}{'\\n'}{end}",
        ).split()  # fmt: skip
        return lines == ["True"] * len(files)

    wait_for(established, timeout=60, what="the Gateway API CRDs established", every=0.2)
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
