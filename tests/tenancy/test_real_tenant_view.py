"""Real tier: what a tenant reads of the management cluster holding its agent's token
(skipped when ../shared/kube is absent; CI has it).

A hostile tenant uses the token the operator handed its agent directly, with kubectl: it
asks the API server what it may read (`kubectl auth can-i --list`, the shipped RBAC of
deploy/teapot/tenant-namespace.yaml and gateway.yaml as it is in force: its requests,
TenantNodes, Events, mirrored Ingresses, Gateway API objects, EndpointSlices and Secrets)
and reads all of it. After a
provider failure whose operator's message names the provider's internal URL, host and
the tenant's project, none of that is in anything it reads; the operator (admin) finds it
on the Tenant's Events. Anything outside its namespace is refused (403).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import connect
from teapot_lb.kube.leader import LeaseConfig
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS, TENANT_NODES
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import OPERATOR_EVENTS_NAMESPACE, KubeManager, ManagerConfig
from teapot_lb.tenancy.nodes import desired_tenant_nodes

from .builders import TENANTS as FACTS
from .builders import tlb_body
from .memlb import ENDPOINT, UNREACHABLE, MemoryLB, project
from .real import Real, management

WITHIN = 30.0
HOST = "memlb.mgmt.example"  # the provider's internal host (in ENDPOINT)
REPLICA = "teapot-lb-manager-5f7c9d-mgmt0"  # the manager's pod (its lease identity)
POOL = "shared-v4"  # the operator's AddressPool (tests/tenancy/real.py)


@pytest.fixture(scope="module")
def real(kube_plane: ControlPlane) -> Iterator[Real]:
    # (with deploy/teapot/gateway.yaml's Role too: the agent's widest shipped RBAC)
    with management(kube_plane, gateway=True, providers=["route", "memlb"]) as world:
        yield world


def as_agent(real: Real, tenant: str, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl with `tenant`'s agent token only (its kubeconfig's context: its namespace)."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not installed (scripts/setup.sh installs it)"
    return subprocess.run(
        [kubectl, f"--kubeconfig={real.agents[tenant]}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def readable(real: Real, tenant: str) -> list[str]:
    """The resources `tenant`'s agent may get or list in its namespace, as the API server
    says (its RBAC in force, not our reading of the manifests)."""
    listed = as_agent(real, tenant, "auth", "can-i", "--list", "-n", real.ns(tenant))
    assert listed.returncode == 0, listed.stderr
    kinds = []
    for line in listed.stdout.splitlines()[1:]:
        resource, _, rest = line.partition(" ")
        verbs = rest[rest.rfind("[") :]
        if resource and not resource.startswith("[") and ("list" in verbs or "*" in verbs):
            kinds.append(resource)
    return kinds


def read_all(real: Real, tenant: str) -> dict[str, Any]:
    """Every object of every kind `tenant`'s agent may read in its namespace, whole."""
    seen: dict[str, Any] = {}
    for kind in readable(real, tenant):
        got = as_agent(real, tenant, "get", kind, "-n", real.ns(tenant), "-o", "json")
        assert got.returncode == 0, f"{kind}: {got.stderr}"
        seen[kind] = json.loads(got.stdout)["items"]
    return seen


def operator_events(real: Real, tenant: str) -> list[dict[str, Any]]:
    """What the admin reads of the Events on Tenant `tenant` (kubectl describe tenant)."""
    selector = f"involvedObject.kind=Tenant,involvedObject.name={real.tenant(tenant)}"
    out = real.plane.kubectl("get", "events", "-n", OPERATOR_EVENTS_NAMESPACE,
                             f"--field-selector={selector}", "-o", "json")  # fmt: skip
    return list(json.loads(out)["items"])


def status(real: Real, namespace: str, name: str) -> dict[str, Any]:
    out = real.plane.kubectl("get", "tenantloadbalancers", name, "-n", namespace, "-o", "json")
    return dict(json.loads(out).get("status") or {})


def programmed(real: Real, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = status(real, namespace, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Programmed"), None)


async def test_nothing_the_agent_can_read_names_the_operators_detail_which_the_operator_finds(
    real: Real,
) -> None:
    acme_ns = real.ns("acme")
    mem = MemoryLB(down=True)  # its operator's message: ENDPOINT, the tenant's project
    lease = LeaseConfig(real.config_ns, "teapot-lb-manager", REPLICA)
    config = ManagerConfig(config_namespace=real.config_ns, providers={mem.name: mem},
                           lease=lease, provider_retry_base_s=0.05,
                           provider_resync_s=0.5)  # fmt: skip
    async with (
        await connect(real.manager, request_timeout_s=10.0) as manager_client,
        await connect(real.agents["acme"], request_timeout_s=10.0) as agent,
    ):
        # What acme's agent writes: a request built by memlb, a taken address (IPInUse:
        # the IPAM's own message names the AddressPool), and its cluster's nodes (one
        # outside its node networks: refused, in the TenantNodes' status).
        await agent.create(TENANT_LOAD_BALANCERS, tlb_body("acme", "web", namespace=acme_ns,
                                                           provider=mem.name))  # fmt: skip
        await agent.create(TENANT_LOAD_BALANCERS, tlb_body("acme", "first", namespace=acme_ns))
        nodes = desired_tenant_nodes({}, "c1", acme_ns)
        nodes["spec"]["nodes"] = [{"name": "n0", "addresses": [FACTS["acme"]["node_ips"][0]]},
                                  {"name": "n9", "addresses": ["203.0.113.9"]}]  # fmt: skip
        await agent.create(TENANT_NODES, nodes)
        async with running(KubeManager(manager_client, config)):
            [ip] = await wait_for_async(
                lambda: status(real, acme_ns, "first").get("addresses"),
                within=WITHIN,
                what="the first request's address",
            )
            await agent.create(TENANT_LOAD_BALANCERS, tlb_body(
                "acme", "second", namespace=acme_ns, requestedIPs=[ip]))  # fmt: skip

            def failed() -> bool:
                web = programmed(real, acme_ns, "web") or {}
                second = programmed(real, acme_ns, "second") or {}
                return web.get("reason") == "MemUnreachable" and second.get("reason") == "IPInUse"

            await wait_for_async(failed, within=WITHIN, what="web MemUnreachable, second IPInUse")

            def told_operator() -> list[dict[str, Any]] | None:
                said = {e["reason"]: e for e in operator_events(real, "acme")}
                return [said[r] for r in ("MemUnreachable", "IPInUse") if r in said] or None

            said = await wait_for_async(
                lambda: (e := told_operator()) and len(e) == 2 and e,
                within=WITHIN,
                what="the operator's words on Tenant acme",
            )

    # The operator (admin) reads the detail on the Tenant, naming the request.
    assert said[0]["message"].startswith(f"{acme_ns}/web: ") and ENDPOINT in said[0]["message"]
    assert project("acme") in said[0]["message"] and POOL in said[1]["message"]
    assert said[0]["reportingInstance"] == REPLICA  # which replica said it: the operator's

    # The hostile tenant reads everything its token may read, and none of it.
    seen = read_all(real, "acme")
    assert {"tenantloadbalancers.lb.teapot.io", "tenantnodes.lb.teapot.io", "events",
            "secrets", "ingresses.networking.k8s.io"} <= set(seen), sorted(seen)  # fmt: skip
    text = json.dumps(seen)
    assert UNREACHABLE in text  # its own request's condition and Event: in its words
    assert "203.0.113.9" in text  # its refused node address, in the TenantNodes' status
    for detail in (ENDPOINT, HOST, project("acme"), POOL, real.config_ns, REPLICA):
        assert detail not in text, f"acme's agent reads {detail!r}"

    # Outside its namespace, nothing: not the Tenants (nor their Events), not other
    # namespaces, not the same Events through the events.k8s.io group.
    for attempt in (
        ["get", "tenants"],
        ["get", "events", "-n", OPERATOR_EVENTS_NAMESPACE],
        ["get", "events", "--all-namespaces"],
        ["get", "tenantloadbalancers", "--all-namespaces"],
        ["get", "events.events.k8s.io", "-n", acme_ns],
        ["get", "addresspools", "-n", real.config_ns],
        ["get", "secrets,configmaps,services", "-n", real.config_ns],
    ):
        refused = as_agent(real, "acme", *attempt)
        assert refused.returncode != 0 and "Forbidden" in refused.stderr, (attempt, refused)

    # bolt's agent, in its own namespace, reads nothing of acme's.
    theirs = json.dumps(read_all(real, "bolt"))
    for of_acme in (real.tenant("acme"), acme_ns, "web", ip, FACTS["acme"]["node_ips"][0]):
        assert of_acme not in theirs, f"bolt's agent reads {of_acme!r} of acme"
