"""The relay's deployment: the chart's `relay.*` values (off by default) render a
Deployment on the host network with only NET_BIND_SERVICE, the command's own arguments,
and the same least-privilege RBAC as deploy/teapot/relay.yaml; on the real tier both are
dry-run by the API server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.tenancy.test_chart_tenancy import container_args, rules, server_dry_run

from controller.chart import render_manifest, render_objects
from teapot_lb.cli.relay import relay
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.relay.kube import RELAY_KINDS

PLAIN = Path(__file__).resolve().parents[2] / "deploy" / "teapot" / "relay.yaml"
ON = {"relay": {"enabled": True, "routerId": "192.0.2.2"}}


def shipped() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(PLAIN.read_text()) if d]


def relay_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"] == "teapot-lb-relay"]


def test_the_relay_is_off_by_default() -> None:
    assert relay_objects(render_objects()) == []


def test_on_it_runs_on_the_host_network_with_only_net_bind_service() -> None:
    (deployment,) = [o for o in relay_objects(render_objects(ON)) if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == "teapot-lb-relay"
    (container,) = pod["containers"]
    assert container["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": ["NET_BIND_SERVICE"],
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"bgp": 179, "metrics": 7476}


def test_its_arguments_are_the_commands() -> None:
    values = {
        "relay": {
            "enabled": True,
            "routerId": "192.0.2.2",
            "gtsm": False,
            "maxPrefixAction": "drop",
            "extraArgs": ["--protect=192.0.2.60/30", "--community=64500:100"],
        },
        "configNamespace": "lb-config",
    }
    args = container_args(render_objects(values), "teapot-lb-relay")
    assert args[1] == "relay"
    assert {"--config-namespace=lb-config", "--no-gtsm", "--protect=192.0.2.60/30"} <= set(args)
    ctx = relay.make_context("relay", args[2:])  # parses: every option exists and is valid
    assert ctx.params["max_prefix_action"] == "drop" and ctx.params["community"] == ("64500:100",)
    plain = shipped()
    deployment = next(o for o in plain if o["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    relay.make_context("relay", [str(a) for a in container["args"]][2:])


def test_its_rbac_is_what_it_reads_and_matches_the_shipped_manifest() -> None:
    chart = relay_objects(render_objects(ON))
    plain = shipped()
    for kinds in (("ClusterRole",), ("Role",)):
        assert rules(chart, *kinds) == rules(plain, *kinds)
    granted = {r for o in plain if o["kind"] in ("Role", "ClusterRole") for r in
               (res for rule in o["rules"] for res in rule["resources"])}  # fmt: skip
    # Exactly the kinds its informers watch, and events.
    assert granted == {info.resource.plural for info in RELAY_KINDS} | {"events"}
    verbs = {v for o in plain if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]
             for v in r["verbs"]}  # fmt: skip
    assert verbs == {"list", "watch", "create", "patch"}


@pytest.mark.parametrize("variant", ["chart", "plain"])
def test_the_relay_manifests_pass_a_server_side_dry_run(
    kube_plane: ControlPlane, variant: str
) -> None:
    namespace = f"relay-{uuid.uuid4().hex[:6]}"
    kube_plane.kubectl("create", "namespace", namespace)
    if variant == "chart":
        values = {**ON, "speaker": {"enabled": False}}
        text = render_manifest(values, namespace=namespace)
        docs = [d for d in yaml.safe_load_all(text) if d and "teapot-lb-relay" in json.dumps(d)]
    else:
        docs = [
            yaml.safe_load(yaml.safe_dump(d).replace("teapot-lb-system", namespace))
            for d in shipped()
        ]
    server_dry_run(kube_plane, docs)
    kube_plane.kubectl("delete", "namespace", namespace, "--wait=false")
