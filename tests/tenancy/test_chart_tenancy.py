"""The chart's tenancy values: `speaker.tenancy` (route mode's flag and the read access it
needs), `manager.enabled` (the manager, RBAC as deploy/teapot/management.yaml), and the
tenant agent's own chart (deploy/helm/teapot-tenant-agent, RBAC as
deploy/teapot/tenant-agent.yaml); rendered, and on the real tier dry-run by the server."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.chart import render_manifest, render_objects
from teapot_lb.cli.manager import manager
from teapot_lb.cli.tenant_agent import tenant_agent
from teapot_lb.lab.kubeplane import ControlPlane


def _speaker_args(objects: list[dict[str, Any]]) -> list[str]:
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def test_off_by_default_no_flag_and_no_access_to_the_management_kinds() -> None:
    objects = render_objects()
    assert "--tenancy" not in _speaker_args(objects)
    assert not [o for o in objects if o["metadata"]["name"] == "teapot-lb-speaker-tenancy"]


def test_on_the_speaker_runs_with_tenancy_and_may_read_tenants_and_requests() -> None:
    objects = render_objects({"speaker": {"tenancy": True}})
    assert "--tenancy" in _speaker_args(objects)
    role = next(
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "teapot-lb-speaker-tenancy"
    )
    assert role["rules"] == [
        {
            "apiGroups": ["lb.teapot.io"],
            "resources": ["tenants", "tenantloadbalancers"],
            "verbs": ["list", "watch"],
        }
    ]
    binding = next(
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding"
        and o["metadata"]["name"] == "teapot-lb-speaker-tenancy"
    )
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "teapot-lb-speaker", "namespace": "teapot-lb-system"}
    ]


# --- the manager (manager.enabled) and the tenant agent's own chart -----------------------

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
AGENT_CHART = DEPLOY / "helm" / "teapot-tenant-agent"


def shipped(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "teapot" / name).read_text()) if d]


def rules(objects: list[dict[str, Any]], *kinds: str) -> list[tuple[Any, ...]]:
    """Every RBAC rule of these kinds as (kind, apiGroups, resources, verbs), sorted."""
    out = []
    for o in objects:
        if o["kind"] in kinds:
            out += [(o["kind"], tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"]))
                    for r in o["rules"]]  # fmt: skip
    return sorted(out)


def container_args(objects: list[dict[str, Any]], name: str) -> list[str]:
    (deployment,) = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def manager_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"].startswith("teapot-lb-manager")]


def test_the_manager_is_off_by_default() -> None:
    assert manager_objects(render_objects()) == []


def test_the_managers_rbac_matches_the_shipped_manifests() -> None:
    chart = manager_objects(render_objects({"manager": {"enabled": True}}))
    plain = shipped("management.yaml")
    for kinds in (("ClusterRole",), ("Role",)):
        assert rules(chart, *kinds) == rules(plain, *kinds)
    bindings = [o for o in chart if o["kind"].endswith("Binding")]
    account = {
        "kind": "ServiceAccount",
        "name": "teapot-lb-manager",
        "namespace": "teapot-lb-system",
    }
    assert bindings and all(s == account for b in bindings for s in b["subjects"])


def test_the_managers_arguments_are_the_commands_and_its_webhook_covers_the_tenancy_kinds() -> None:
    objects = render_objects({"manager": {"enabled": True}, "configNamespace": "lb-config"})
    args = container_args(objects, "teapot-lb-manager")
    assert args[1] == "manager" and "--config-namespace=lb-config" in args
    manager.make_context("manager", args[2:], resilient_parsing=True)
    (hook,) = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"
                   and o["metadata"]["name"] == "teapot-lb-manager")["webhooks"]  # fmt: skip
    assert sorted(hook["rules"][0]["resources"]) == ["tenantloadbalancers", "tenants"]
    role = next(
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "teapot-lb-manager"
    )
    assert role["metadata"]["namespace"] == "lb-config"  # the pools are read where they live
    off = render_objects({"manager": {"enabled": True, "webhook": {"enabled": False}}})
    assert "--webhook-addr=" in container_args(off, "teapot-lb-manager")
    assert not [o for o in manager_objects(off) if o["kind"] == "ValidatingWebhookConfiguration"]


def test_the_tenant_agent_chart_has_the_shipped_rbac_and_the_commands_arguments() -> None:
    objects = render_objects(chart=AGENT_CHART, namespace="teapot-system", release="web-1")
    assert rules(objects, "ClusterRole") == rules(shipped("tenant-agent.yaml"), "ClusterRole")
    args = container_args(objects, "teapot-tenant-agent")
    assert args[1] == "tenant-agent" and "--cluster-name=web-1" in args  # the release name
    tenant_agent.make_context("tenant-agent", args[2:], resilient_parsing=True)
    unclassed = render_objects({"unclassed": True, "clusterName": "c7"}, chart=AGENT_CHART)
    got = container_args(unclassed, "teapot-tenant-agent")
    assert "--unclassed" in got and "--cluster-name=c7" in got
    assert not [o for o in objects if o["kind"] in ("CustomResourceDefinition", "DaemonSet")]


@pytest.mark.parametrize("variant", ["manager", "manager without webhook", "tenant agent"])
def test_the_rendered_manager_and_agent_pass_a_server_side_dry_run(
    kube_plane: ControlPlane, variant: str
) -> None:
    namespace = f"chart-{uuid.uuid4().hex[:6]}"
    kube_plane.kubectl("create", "namespace", namespace)
    if variant == "tenant agent":
        text = render_manifest(namespace=namespace, chart=AGENT_CHART)
    else:
        webhook = {"enabled": variant == "manager"}
        values = {"manager": {"enabled": True, "webhook": webhook}, "speaker": {"enabled": False}}
        text = render_manifest(values, namespace=namespace)
        text = "".join(f"---{d}" for d in text.split("---") if "teapot-lb-manager" in d)
    server_dry_run(kube_plane, [d for d in yaml.safe_load_all(text) if d])
    kube_plane.kubectl("delete", "namespace", namespace, "--wait=false")


def server_dry_run(kube_plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    """`kubectl apply --dry-run=server` of ``docs``: every one accepted."""
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kube_plane.admin_kubeconfig}", "apply", "--dry-run=server",
         "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(server dry run)") == len(docs), done.stdout
