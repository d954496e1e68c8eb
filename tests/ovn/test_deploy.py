"""deploy/ovn/: the writer's Deployment runs `teapot-lb ovn` with arguments the command
takes, and its RBAC grants exactly the kinds it watches (no Secrets) and its Lease."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from teapot_lb.cli.ovn import ovn
from teapot_lb.model.kinds import REGISTRY
from teapot_lb.ovn.desired import READ_KINDS

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "ovn" / "teapot-lb-ovn.yaml"


def objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def one(kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects() if o["kind"] == kind]
    return found


def test_the_deployment_arguments_are_accepted_by_the_command() -> None:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"][1] == "ovn"
    ovn.make_context("ovn", container["args"][2:], resilient_parsing=True)


def test_the_roles_cover_the_watched_kinds_and_the_lease_and_nothing_else() -> None:
    granted = {
        (group, resource)
        for role in (one("ClusterRole"), one("Role"))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    watched = {(REGISTRY[k].resource.group, REGISTRY[k].resource.plural) for k in READ_KINDS}
    assert granted == watched | {("coordination.k8s.io", "leases")}
