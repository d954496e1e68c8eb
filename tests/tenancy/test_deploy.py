"""deploy/teapot/: the manifests parse, their arguments are the commands', and the RBAC
gives an agent its tenant's namespace only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from teapot_lb.cli.manager import manager
from teapot_lb.cli.tenant_agent import tenant_agent
from teapot_lb.model import parse_object
from teapot_lb.webhook.server import VALIDATE_PATH

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "teapot"


def objects(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind]
    return found


def args_of(deployment: dict[str, Any]) -> tuple[str, list[str]]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    return args[1], args[2:]


@pytest.mark.parametrize(
    ("file", "command", "name"),
    [("management.yaml", manager, "manager"), ("tenant-agent.yaml", tenant_agent, "tenant-agent")],
)
def test_the_deployment_arguments_are_accepted_by_the_command(
    file: str, command: click.Command, name: str
) -> None:
    got, rest = args_of(one(objects(file), "Deployment"))
    assert got == name
    # Paths that exist only in the pod are not checked here.
    command.make_context(name, rest, resilient_parsing=True)


def test_the_agent_role_is_namespaced_and_covers_only_its_requests_nodes_and_events() -> None:
    objs = objects("tenant-namespace.yaml")
    role = one(objs, "Role")
    assert role["metadata"]["namespace"] == one(objs, "Tenant")["spec"]["namespace"]
    # Events: the refusals it records for the manager, the relay's about its nodes.
    resources = [r["resources"] for r in role["rules"]]
    assert resources == [["tenantloadbalancers"], ["tenantnodes"], ["events"]]
    assert "delete" not in role["rules"][1]["verbs"]
    assert not [o for o in objs if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_the_example_tenant_is_valid() -> None:
    parsed, problems = parse_object(one(objects("tenant-namespace.yaml"), "Tenant"))
    assert parsed is not None and problems == []


def test_the_manager_webhook_covers_the_tenancy_kinds_and_reaches_the_manager() -> None:
    objs = objects("management.yaml")
    (hook,) = one(objs, "ValidatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == VALIDATE_PATH
    (rule,) = hook["rules"]
    assert sorted(rule["resources"]) == ["tenantloadbalancers", "tenants"]
    service = one(objs, "Service")
    labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
