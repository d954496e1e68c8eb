"""The Helm chart, rendered by real Helm (tests/controller/chart.py), and the plain manifests.

What this proves: `helm lint` passes on both charts; the templates render to objects with
the properties below; the controller's rendered arguments are accepted by the real
command; the rendered RBAC allows every request the controller makes against the fake API
server in a realistic run, and nothing broad. The real control plane tier
(tests/realapi) applies what Helm renders to a real API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import click
import pytest
import yaml

from fakeapi.wait import until
from model.builders import NS, pool, service
from teapot_lb.cli import main as cli_main
from teapot_lb.cli.controller import controller as controller_command
from teapot_lb.controller import ControllerOptions
from teapot_lb.controller.kube_runner import KubeController, RunnerConfig, running
from teapot_lb.kube import resources
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.leader import LeaseConfig
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.model.kinds import KINDS
from teapot_lb.webhook import VALIDATE_PATH

from .chart import CHART, helm, render_manifest, render_notes, render_objects
from .test_kube_controller import ips_of

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "teapot-lb.yaml"
NAMESPACE_DOC = (
    "---\n# The namespace of the components and of their configuration.\n"
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: teapot-lb-system\n"
)
# The controller's webhook covers the one-cluster kinds; Teapot's management kinds
# (Tenant, TenantLoadBalancer) are the manager's (deploy/teapot/).
_MANAGEMENT = {info.resource for info in KINDS if info.management}
LB_PLURALS = sorted(
    r.plural
    for r in vars(resources).values()
    if isinstance(r, resources.Resource) and r.custom and r not in _MANAGEMENT
)


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def container(obj: dict[str, Any]) -> dict[str, Any]:
    (c,) = obj["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_the_default_render_has_every_component() -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in render_objects())
    assert ("Deployment", "teapot-lb-controller") in kinds
    assert ("DaemonSet", "teapot-lb-speaker") in kinds
    assert ("Service", "teapot-lb-webhook") in kinds
    assert ("ValidatingWebhookConfiguration", "teapot-lb") in kinds
    assert ("PodDisruptionBudget", "teapot-lb-controller") in kinds


def test_the_controller_runs_two_leader_elected_replicas_with_matching_probes() -> None:
    objects = render_objects()
    deployment = one(objects, "Deployment", "teapot-lb-controller")
    assert deployment["spec"]["replicas"] == 2
    c = container(deployment)
    assert "--no-leader-elect" not in c["args"]
    assert {e["name"] for e in c["env"]} >= {"POD_NAME", "POD_NAMESPACE"}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--metrics-address=:{ports['metrics']}" in c["args"]
    assert f"--webhook-addr=:{ports['webhook']}" in c["args"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_rendered_controller_arguments_are_accepted_by_the_command() -> None:
    c = container(one(render_objects({"classOnly": True}), "Deployment", "teapot-lb-controller"))
    global_args, command, rest = c["args"][:1], c["args"][1], c["args"][2:]
    assert command == "controller" and "--class-only" in rest
    cli_main.make_context("teapot-lb", [*global_args, "validate", "x"], resilient_parsing=True)
    ctx = controller_command.make_context("controller", list(rest))
    assert ctx.params["class_only"] is True
    assert ctx.params["webhook_cert"] == Path("/etc/teapot-lb/webhook/tls.crt")
    with pytest.raises(click.UsageError):
        controller_command.make_context("controller", ["--no-such-flag"])


def test_the_speaker_runs_on_the_host_network_with_only_the_network_capabilities() -> None:
    daemonset = one(render_objects(), "DaemonSet", "teapot-lb-speaker")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    c = container(daemonset)
    assert c["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": ["NET_RAW", "NET_ADMIN", "NET_BIND_SERVICE"],  # BGP listens on 179
    }
    assert "privileged" not in c["securityContext"]
    assert "--node=$(NODE_NAME)" in c["args"]
    assert "--config-namespace=teapot-lb-system" in c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert f"--metrics-address=:{ports['metrics']}" in c["args"]
    assert pod["tolerations"] == [{"operator": "Exists"}]


def test_the_speaker_has_a_readiness_probe_on_readyz() -> None:
    """A speaker refused by RBAC (or that never listed a kind) shows as not ready."""
    c = container(one(render_objects(), "DaemonSet", "teapot-lb-speaker"))
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_the_speaker_defaults_to_the_namespace_the_rbac_grants() -> None:
    speaker_command = pytest.importorskip("teapot_lb.cli.speaker").speaker
    ctx = speaker_command.make_context("speaker", ["--node", "n1"])
    assert ctx.params["config_namespace"] == "teapot-lb-system"


def test_the_rendered_speaker_arguments_are_accepted_by_the_command(tmp_path: Path) -> None:
    speaker_command = pytest.importorskip("teapot_lb.cli.speaker").speaker
    c = container(one(render_objects(), "DaemonSet", "teapot-lb-speaker"))
    assert c["args"][1] == "speaker"
    # The command reads the key file while parsing: one stands in for the mounted Secret.
    key = tmp_path / "secretkey"
    key.write_text("k" * 172 + "\n")
    key_arg = f"--heartbeat-key-file={MEMBERLIST_KEY}"
    args = [f"--heartbeat-key-file={key}" if a == key_arg else a for a in c["args"][2:]]
    ctx = speaker_command.make_context("speaker", args)
    assert ctx.params["config_namespace"] == "teapot-lb-system"
    assert ctx.params["heartbeat_key"] == b"k" * 172
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert str(ctx.params["state_dir"]) in mounts


MEMBERLIST_KEY = "/etc/teapot-lb/memberlist/secretkey"


def test_the_speaker_authenticates_heartbeats_with_the_memberlist_secret() -> None:
    """MetalLB's layout: Secret teapot-lb-memberlist, key secretkey, mounted read-only and
    required (no pod runs with forgeable heartbeats because the Secret was forgotten)."""
    daemonset = one(render_objects(), "DaemonSet", "teapot-lb-speaker")
    c = container(daemonset)
    assert f"--heartbeat-key-file={MEMBERLIST_KEY}" in c["args"]
    (mount,) = [m for m in c["volumeMounts"] if MEMBERLIST_KEY.startswith(m["mountPath"] + "/")]
    assert mount["readOnly"] is True
    volumes = {v["name"]: v for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == "teapot-lb-memberlist" and not secret.get("optional")
    assert secret["items"] == [{"key": "secretkey", "path": "secretkey"}]
    assert secret["defaultMode"] == 0o400


def test_an_empty_memberlist_secret_value_turns_authentication_off() -> None:
    daemonset = one(render_objects({"speaker": {"memberlistSecret": ""}}), "DaemonSet",
                    "teapot-lb-speaker")  # fmt: skip
    c = container(daemonset)
    assert not [a for a in c["args"] if a.startswith("--heartbeat-key-file")]
    assert [v["name"] for v in daemonset["spec"]["template"]["spec"]["volumes"]] == ["state"]


def state_volume(daemonset: dict[str, Any]) -> dict[str, Any]:
    """The volume mounted at the speaker's --state-dir."""
    c = container(daemonset)
    (state_dir,) = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--state-dir=")]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == state_dir]
    assert not mount.get("readOnly") and "mountPropagation" not in mount and "subPath" not in mount
    (volume,) = [
        v for v in daemonset["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    ]
    return dict(volume)


def test_the_speaker_state_dir_is_a_host_directory_that_outlives_the_pod() -> None:
    """The restart marker and VRIDs survive a rollout; the marker's boot id handles reboots."""
    daemonset = one(render_objects(), "DaemonSet", "teapot-lb-speaker")
    volume = state_volume(daemonset)
    assert volume["hostPath"] == {"path": "/var/lib/teapot-lb", "type": "DirectoryOrCreate"}
    # Only that directory of the host, and no privilege added for it.
    host_paths = [v for v in daemonset["spec"]["template"]["spec"]["volumes"] if "hostPath" in v]
    assert host_paths == [volume]
    security = container(daemonset)["securityContext"]
    assert security["capabilities"]["add"] == ["NET_RAW", "NET_ADMIN", "NET_BIND_SERVICE"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False and "privileged" not in security


def test_values_move_the_speaker_state_dir_or_make_it_an_empty_dir() -> None:
    def speaker_with(host_path: str) -> dict[str, Any]:
        objects = render_objects({"speaker": {"stateHostPath": host_path}})
        return one(objects, "DaemonSet", "teapot-lb-speaker")

    moved = state_volume(speaker_with("/srv/teapot"))
    assert moved["hostPath"] == {"path": "/srv/teapot", "type": "DirectoryOrCreate"}
    assert state_volume(speaker_with("")) == {"name": "state", "emptyDir": {}}


def test_the_webhook_covers_every_lb_kind_and_reaches_the_controller() -> None:
    objects = render_objects()
    config = one(objects, "ValidatingWebhookConfiguration", "teapot-lb")
    (hook,) = config["webhooks"]
    assert hook["admissionReviewVersions"] == ["v1"] and hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Fail"
    (rule,) = hook["rules"]
    assert sorted(rule["resources"]) == LB_PLURALS
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert hook["clientConfig"]["service"]["path"] == VALIDATE_PATH
    svc = one(objects, "Service", "teapot-lb-webhook")
    assert svc["spec"]["ports"][0]["targetPort"] == "webhook"
    deployment = one(objects, "Deployment", "teapot-lb-controller")
    assert svc["spec"]["selector"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )


def test_values_switch_the_webhook_and_cert_manager() -> None:
    without = render_objects({"webhook": {"enabled": False}})
    assert not [o for o in without if o["kind"] == "ValidatingWebhookConfiguration"]
    args = container(one(without, "Deployment", "teapot-lb-controller"))["args"]
    assert not [a for a in args if a.startswith("--webhook")]
    managed = render_objects({"webhook": {"certManager": {"enabled": True}}}, namespace="lb")
    cert = one(managed, "Certificate", "teapot-lb-webhook")
    assert "teapot-lb-webhook.lb.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"]["name"] == "teapot-lb-selfsigned"
    config = one(managed, "ValidatingWebhookConfiguration", "teapot-lb")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "lb/teapot-lb-webhook"
    )


def test_no_role_grants_wildcards_or_deletes_and_the_speaker_writes_only_reports() -> None:
    for obj in render_objects():
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], obj
            assert not {"delete", "deletecollection", "escalate", "bind"} & set(rule["verbs"])
            if obj["metadata"]["name"] == "teapot-lb-speaker":
                writes = set(rule["verbs"]) - {"get", "list", "watch"}
                # Events, and its announcement annotation on Services: nothing else.
                allowed = {"events": {"create", "patch"}, "services": {"patch"}}
                for resource in rule["resources"]:
                    assert writes <= allowed.get(resource, set()), rule


def test_the_install_notes_render() -> None:
    keyed = {"speaker": {"memberlistSecret": "teapot-lb-memberlist"}}
    notes = render_notes(keyed, namespace="lb")
    assert "kubectl get addresspools -n lb" in notes and "{{" not in notes
    assert "kubectl -n lb create secret generic teapot-lb-memberlist" in notes
    unkeyed = render_notes({"speaker": {"memberlistSecret": ""}}, namespace="lb")
    assert "secret" not in unkeyed


@pytest.mark.parametrize(
    "chart", [CHART, CHART.parent / "teapot-tenant-agent"], ids=lambda c: c.name
)
def test_helm_lint_passes_on_the_chart(chart: Path) -> None:
    out = helm("lint", str(chart), "--strict")
    assert "0 chart(s) failed" in out, out


def test_the_chart_ships_the_generated_crds() -> None:
    assert (CHART / "crds").resolve() == (ROOT / "deploy" / "crds").resolve()
    assert sorted(p.name for p in (CHART / "crds").glob("*.yaml"))


def test_the_plain_manifest_is_the_default_render() -> None:
    """deploy/teapot-lb.yaml is generated: UPDATE_MANIFESTS=1 pytest this test rewrites it."""
    header = (
        "# Generated from deploy/helm/teapot-lb with its default values "
        "(tests/controller/test_deploy.py); do not edit.\n"
    )
    expected = header + NAMESPACE_DOC + render_manifest()
    if os.environ.get("UPDATE_MANIFESTS"):
        MANIFEST.write_text(expected)
    assert MANIFEST.read_text() == expected, "run UPDATE_MANIFESTS=1 pytest " + __file__
    assert all(doc for doc in yaml.safe_load_all(expected) if doc is not None)


# --- RBAC against the requests the controller really makes -----------------------------------


def _request_attributes(method: str, path: str, query: str) -> tuple[str, str, str, str | None]:
    """(verb, apiGroup, resource[/subresource], namespace) of an API request."""
    parts = [p for p in path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) == 3 else "")
    named = len(rest) >= 2
    verb = {
        "GET": "get" if named else ("watch" if parse_qs(query).get("watch") else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }[method]
    return verb, group, resource, namespace


def _allowed(
    rules: list[tuple[dict[str, Any], str | None]], verb: str, group: str, res: str, ns: str | None
) -> bool:
    for rule, where in rules:
        if where is not None and where != ns:
            continue
        if group in rule["apiGroups"] and res in rule["resources"] and verb in rule["verbs"]:
            return True
    return False


def rules_of(*roles: tuple[str, str]) -> list[tuple[dict[str, Any], str | None]]:
    """The rendered rules of these (name, kind) roles, each with its namespace."""
    objects = render_objects(namespace=NS)
    rules: list[tuple[dict[str, Any], str | None]] = []
    for name, kind in roles:
        role = one(objects, kind, name)
        rules += [(rule, role["metadata"].get("namespace")) for rule in role["rules"]]
    return rules


def requests_by(fake_api: FakeApiServer, user_agent: str) -> set[tuple[str, str, str, str | None]]:
    return {
        _request_attributes(r.method, r.path, r.query)
        for r in fake_api.requests
        if r.user_agent == user_agent
    }


async def test_the_controller_role_allows_every_request_the_controller_makes(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    rules = rules_of(
        ("teapot-lb-controller", "ClusterRole"),
        ("teapot-lb-controller", "Role"),
        ("teapot-lb-controller-leader", "Role"),
    )

    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await kube.create(resources.ADDRESS_POOLS, pool("blue", "192.0.2.0/30"))
    await kube.create(resources.ADDRESS_POOLS, pool("typo", "192.0.2.300/32"))
    client = await connect(fake_api.kubeconfig_path, user_agent="teapot-lb/rbac")
    config = RunnerConfig(
        options=ControllerOptions(),
        config_namespace=NS,
        lease=LeaseConfig(NS, "teapot-lb-controller", "rbac", 15.0, 10.0, 0.2),
        pool_status_delay_s=0.1,
    )
    runner = KubeController(client, config, max_backoff_s=0.5)
    fake_api.faults.conflict_next(1, path_contains="/services/a/status")
    try:
        async with running(runner):
            await kube.create(resources.SERVICES, service("a"))
            await kube.create(resources.SERVICES, service("b", ips="192.0.2.9"))
            await until(lambda: ips_of(fake_api, "a"), 15, "a assigned")
            await kube.patch(
                resources.SERVICES, "a", {"spec": {"type": "ClusterIP"}}, namespace="default"
            )
            await until(lambda: not ips_of(fake_api, "a"), 15, "a released")
            await until(
                lambda: (
                    any(
                        e["reason"] == "AllocationFailed" and e.get("count", 1) > 1
                        for e in fake_api.list("events")
                    )
                    or len(fake_api.list("events")) >= 3
                ),
                15,
                "events recorded",
            )
    finally:
        await client.close()
    made = requests_by(fake_api, "teapot-lb/rbac")
    assert ("patch", "", "services/status", "default") in made
    assert ("update", "coordination.k8s.io", "leases", NS) in made
    denied = [m for m in made if not _allowed(rules, *m)]
    assert not denied, f"requests the rendered RBAC would forbid: {denied}"


async def test_the_speaker_role_allows_every_request_the_speaker_makes(
    fake_api: FakeApiServer,
) -> None:
    """The speaker's informers and reports (annotation, Events) with a fake BGP backend."""
    builders = pytest.importorskip("speaker.builders")
    from teapot_lb.cluster import Store
    from teapot_lb.speaker.bgp_backend import BGPBackend
    from teapot_lb.speaker.kube_reporter import KubeReporter
    from teapot_lb.speaker.kube_source import KubeSource
    from teapot_lb.speaker.node import NodeSpeaker

    rules = rules_of(("teapot-lb-speaker", "ClusterRole"), ("teapot-lb-speaker", "Role"))
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for doc in (*builders.bgp_setup(), builders.lb_service("web", "203.0.113.10")):
        fake_api.seed(doc)
    client = await connect(fake_api.kubeconfig_path, user_agent="teapot-lb/speaker-rbac")
    store = Store()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(builders.FakeFactory()))
    source = KubeSource(client, store, speaker.notify, config_namespace=NS, watch_timeout_s=5)
    reporter = KubeReporter(client, "n1")
    speaker.reporter = reporter
    tasks = [asyncio.create_task(source.run()), asyncio.create_task(speaker.run())]
    try:
        await until(
            lambda: any(e["reason"] == "NodeAnnouncing" for e in fake_api.list("events")),
            15,
            "the speaker reported",
        )
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await reporter.close()
        await client.close()
    made = requests_by(fake_api, "teapot-lb/speaker-rbac")
    assert ("patch", "", "services", "default") in made
    assert ("list", "", "secrets", NS) in made
    denied = [m for m in made if not _allowed(rules, *m)]
    assert not denied, f"requests the rendered RBAC would forbid: {denied}"
