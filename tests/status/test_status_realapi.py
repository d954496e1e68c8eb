"""`teapot-lb status` against a real kube-apiserver (../shared/kube), our CRDs installed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import yaml

from teapot_lb.cli.status import cluster_status
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.speaker.report import annotation_key

ROOT = Path(__file__).resolve().parents[2]
API = "lb.teapot.io/v1alpha1"


def apply(plane: ControlPlane, tmp_path: Path, *docs: dict[str, object]) -> None:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    plane.kubectl("apply", "-f", str(path))


async def test_status_reads_pools_holders_and_pending_services_from_a_real_api_server(
    kube_plane: ControlPlane, tmp_path: Path
) -> None:
    kube_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kube_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    ns, node = f"status-{uuid.uuid4().hex[:6]}", f"status-node-{uuid.uuid4().hex[:6]}"
    kube_plane.kubectl("create", "namespace", ns)
    apply(
        kube_plane, tmp_path,
        {"apiVersion": API, "kind": "AddressPool", "metadata": {"name": ns, "namespace": ns},
         "spec": {"addresses": ["198.51.100.240/28"]}},
        {"apiVersion": API, "kind": "BGPPeer", "metadata": {"name": "tor", "namespace": ns},
         "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"}},
        {"apiVersion": API, "kind": "BGPAdvertisement", "metadata": {"name": ns, "namespace": ns},
         "spec": {"addressPools": [ns]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
        *[{"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": ns,
                        "annotations": {annotation_key(node): "bgp 198.51.100.241 to tor"}},
           "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}} for name in ("web", "later")],
    )  # fmt: skip
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.241"}]}}}
    kube_plane.kubectl(
        "patch", "service", "web", "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps(ingress),
    )  # fmt: skip
    status = await cluster_status(str(kube_plane.admin_kubeconfig), 0, 2.0)
    pools = {p.pool: (p.assigned, p.size) for p in status.pools}
    assert pools[ns] == (1, 16)
    holders = {(h.service, h.ip): h.nodes for h in status.holders}
    assert holders[f"{ns}/web", "198.51.100.241"] == (node,)
    assert f"{ns}/later" in status.pending
    assert f"Service {ns}/later has no IP" in status.problems
