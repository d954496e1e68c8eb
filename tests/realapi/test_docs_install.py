"""docs/install.md's one-cluster steps without Helm as a user runs them: the marked
commands, in the order written, on a kube-apiserver of their own (skipped when
../shared/kube is absent; CI has it), ending with a Service's address. A command that
fails fails the test, named by its line in the document.

No Pod runs here, so the test stands in for the kubelet and the cluster network between
the steps, and for nothing else: the controller runs as `teapot-lb controller` with its
Deployment's arguments, a token of its ServiceAccount and the certificate read back from
the Secret the docs created (local ports instead of the pod's), and the API server reaches
its webhook by URL instead of through its Service. The only edit of the documented
commands is in SUBSTITUTIONS.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from teapot_lb.lab.kubeplane import ControlPlane, free_port
from teapot_lb.lab.wait import wait_for_async

from . import docblocks as docs
from .release import ROOT, TEAPOT_LB, Component, _override

DOC = ROOT / "docs" / "install.md"
NAMESPACE = "teapot-lb-system"
# The names the API server reaches the webhook by (here: by URL, on this host).
SUBSTITUTIONS = {
    'DNS:teapot-lb-webhook.$NS.svc.cluster.local"': (
        'DNS:teapot-lb-webhook.$NS.svc.cluster.local,IP:127.0.0.1"'
    ),
}
STEPS = ["cluster"] * 4 + ["file", "cluster"]


@pytest.fixture
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with docs.fresh_planes(tmp_path_factory.mktemp("install"), "cluster") as planes:
        yield planes["cluster"]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


async def _start_controller(plane: ControlPlane, workdir: Path) -> Component:
    """What the Deployment's Pod would run (its arguments, its identity, its Secret)."""
    files = docs.mounted_secret(plane, NAMESPACE, "teapot-lb-webhook-cert", workdir)
    webhook_port, metrics = free_port(), f"127.0.0.1:{free_port()}"
    args = _override(
        docs.container_args(plane, NAMESPACE, "teapot-lb-controller"),
        {
            "--metrics-address": metrics,
            "--webhook-addr": f"127.0.0.1:{webhook_port}",
            "--webhook-cert": str(files["tls.crt"]),
            "--webhook-key": str(files["tls.key"]),
        },
    )
    identity = docs.service_account_kubeconfig(plane, NAMESPACE, "teapot-lb-controller")
    log_level, command, *rest = args
    argv = [*TEAPOT_LB, log_level, "--log-format=json", command,
            f"--kubeconfig={identity}", "--identity=controller-0", *rest]  # fmt: skip
    controller = Component("controller", argv, workdir / "controller.log",
                           {"POD_NAMESPACE": NAMESPACE})  # fmt: skip
    controller.start()
    await wait_for_async(
        lambda: _ready(f"http://{metrics}/readyz"), within=60, what="the controller ready"
    )
    docs.webhook_by_url(plane, "teapot-lb", webhook_port)
    return controller


async def test_the_one_cluster_steps_run_as_written(plane: ControlPlane, tmp_path: Path) -> None:
    blocks: list[docs.DocBlock] = docs.documented(DOC, SUBSTITUTIONS)
    assert [b.target for b in blocks] == STEPS
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")  # "from a checkout of teapot-lb"
    controller = None
    try:
        for block in blocks:
            await docs.run_block(DOC, block, plane, tmp_path, SUBSTITUTIONS)
            if "deploy/teapot-lb.yaml" in block.code:
                controller = await _start_controller(plane, tmp_path)
    finally:
        if controller is not None:
            controller.stop()
    service = docs.kubectl_json(plane, "-n", "default", "get", "service", "web")
    (entry,) = service["status"]["loadBalancer"]["ingress"]
    assert entry["ip"].startswith("192.0.2.")
