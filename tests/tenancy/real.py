"""The real tier's management side of Teapot, on a shared kube-apiserver: the CRDs, a
configuration namespace with the shared pool, acme's and bolt's Tenants and namespaces
(names suffixed: the control plane is shared), and the manager's and each agent's
ServiceAccount with exactly the RBAC rules of deploy/teapot/ (management.yaml,
tenant-namespace.yaml)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.lab.kubeplane import ControlPlane

from .builders import TENANTS as FACTS
from .builders import pool_body, tenant_body

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "teapot"
GATEWAY_API = ROOT.parent / "shared" / "gateway-api"
GATEWAY_API_CRDS = ("gatewayclasses", "gateways", "httproutes", "tlsroutes", "tcproutes",
                    "udproutes", "referencegrants")  # fmt: skip


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def shipped_rules(name: str, kind: str, role: str | None = None) -> list[dict[str, Any]]:
    """The rules of the one `kind` (Role, ClusterRole) of deploy/teapot/`name`, or of the
    one named `role`."""
    (found,) = [d for d in _docs(name) if d["kind"] == kind
                and role in (None, d["metadata"]["name"])]  # fmt: skip
    return list(found["rules"])


@dataclass(frozen=True)
class Real:
    plane: ControlPlane
    suffix: str
    config_ns: str
    app_ns: str
    manager: Path
    agents: dict[str, Path]

    def ns(self, tenant: str) -> str:
        return f"{FACTS[tenant]['namespace']}-{self.suffix}"

    def tenant(self, tenant: str) -> str:
        return f"{tenant}-{self.suffix}"


def apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def add_node(plane: ControlPlane, name: str, ip: str) -> None:
    """A Node with one InternalIP (its status written as a kubelet would)."""
    apply(plane, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    status = {"status": {"addresses": [{"type": "InternalIP", "address": ip}]}}
    plane.kubectl("patch", "node", name, "--subresource=status", "--type=merge",
                  "-p", json.dumps(status))  # fmt: skip


def install_gateway_api(plane: ControlPlane) -> None:
    """The upstream Gateway API CRDs (../shared/gateway-api), as an operator installs them."""
    for crd in GATEWAY_API_CRDS:
        plane.kubectl("apply", "--server-side", "-f",
                      str(GATEWAY_API / f"gateway.networking.k8s.io_{crd}.yaml"))  # fmt: skip
    for crd in GATEWAY_API_CRDS:
        plane.kubectl("wait", "--for=condition=established",
                      f"crd/{crd}.gateway.networking.k8s.io")  # fmt: skip


def _service_account(plane: ControlPlane, ns: str, name: str, role: dict[str, Any]) -> Path:
    apply(
        plane,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": f"{role['kind']}Binding",
            "metadata": {"name": role["metadata"]["name"], **(
                {"namespace": ns} if role["kind"] == "Role" else {})},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                        "name": role["metadata"]["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
        },
    )  # fmt: skip
    token = plane.service_account_token(ns, name)
    return plane.token_kubeconfig(token, f"{name}-{ns}", namespace=ns)


@contextmanager
def management(plane: ControlPlane, *, gateway: bool = False, **tenant_spec: Any) -> Iterator[Real]:
    """The management side on `plane` (`tenant_spec`: more of both Tenants' spec; `gateway`:
    the Gateway API CRDs installed, and the manager's and the agents' roles with
    deploy/teapot/gateway.yaml's rules for them too: the gateway's reconcile in the
    manager, the mirror in the agents); its namespaces and Tenants deleted after."""
    suffix = uuid.uuid4().hex[:6]
    if gateway:
        install_gateway_api(plane)
    for crd in ("tenants", "tenantloadbalancers", "tenantnodes", "addresspools"):
        plane.kubectl("apply", "-f", str(ROOT / "deploy" / "crds" / f"lb.teapot.io_{crd}.yaml"))
        plane.kubectl("wait", "--for=condition=established", f"crd/{crd}.lb.teapot.io")
    config_ns, app_ns = f"teapot-{suffix}", f"apps-{suffix}"
    namespaces = [config_ns, app_ns, *(f"{FACTS[t]['namespace']}-{suffix}" for t in FACTS)]
    for ns in namespaces:
        plane.kubectl("create", "namespace", ns)
    pool_v4 = pool_body("shared-v4", ["198.51.100.0/26"])
    pool_v4["metadata"]["namespace"] = config_ns
    apply(plane, pool_v4)
    for t in FACTS:
        body = tenant_body(
            t,
            namespace=f"{FACTS[t]['namespace']}-{suffix}",
            allocations=[{"addressPool": "shared-v4", "cidrs": [FACTS[t]["v4"]]}],
            **tenant_spec,
        )
        body["metadata"]["name"] = f"{t}-{suffix}"
        apply(plane, body)  # fmt: skip
    manager = _service_account(plane, config_ns, "manager", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": f"teapot-manager-{suffix}"},
        "rules": shipped_rules("management.yaml", "ClusterRole") + (
            shipped_rules("gateway.yaml", "ClusterRole", "teapot-lb-gateway-control")
            if gateway else [])})  # fmt: skip
    apply(plane, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "teapot-manager", "namespace": config_ns},
        "rules": shipped_rules("management.yaml", "Role") + (
            shipped_rules("gateway.yaml", "ClusterRole", "teapot-lb-gateway-addresses")
            if gateway else [])}, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "teapot-manager", "namespace": config_ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "teapot-manager"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "manager", "namespace": config_ns}]})  # fmt: skip
    agents = {
        t: _service_account(plane, f"{FACTS[t]['namespace']}-{suffix}", "teapot-tenant-agent", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "teapot-tenant-agent",
                         "namespace": f"{FACTS[t]['namespace']}-{suffix}"},
            "rules": shipped_rules("tenant-namespace.yaml", "Role") + (
                shipped_rules("gateway.yaml", "Role") if gateway else [])})
        for t in FACTS
    }  # fmt: skip
    try:
        yield Real(plane, suffix, config_ns, app_ns, manager, agents)
    finally:
        for ns in namespaces:
            plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        for t in FACTS:
            plane.kubectl("delete", "tenant", f"{t}-{suffix}", check=False)


def webhook_configuration(
    name: str, port: int, plane: ControlPlane, namespace: str
) -> dict[str, Any]:
    """The manager's webhook as deploy/teapot/management.yaml registers it (failurePolicy
    Fail), by URL on this host and for `namespace` only (the control plane is shared)."""
    ca = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "tenancy.lb.teapot.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate", "caBundle": ca},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "rules": [{"apiGroups": ["lb.teapot.io"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"],
                       "resources": ["tenantloadbalancers"]}],
        }],
    }  # fmt: skip


def gateway_webhook_configuration(
    name: str, port: int, plane: ControlPlane, namespace: str
) -> dict[str, Any]:
    """The gateway kinds' webhook as deploy/teapot/gateway.yaml registers it (the manager
    serves it; failurePolicy Fail), by URL on this host and for `namespace` only."""
    (hook,) = [d for d in _docs("gateway.yaml") if d["kind"] == "ValidatingWebhookConfiguration"]
    hook["metadata"]["name"] = name
    ca = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
    for h in hook["webhooks"]:
        h["clientConfig"] = {"url": f"https://127.0.0.1:{port}/validate", "caBundle": ca}
        h["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return dict(hook)
