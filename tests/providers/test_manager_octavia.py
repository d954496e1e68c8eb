"""End to end: a tenant's load balancer built by Octavia (the real ovn-octavia-provider on
a real OVN) through the manager (docs/teapot.md, "Providers").

The real manager (`KubeManager`, in-process) on the in-repo fake API server, the octavia
provider built from a config file as `teapot-lb manager --provider octavia=FILE` builds
it, a Tenant listing `octavia` whose allocation lies in the stack's VIP subnet, and
TenantLoadBalancers whose backends are the stack's member hosts m1 and m2 (HTTP on 8080,
as their "nodePort"). The stack is the session's (tests/conftest.py), the networks and
hosts this module's own (test_octavia_provider.py's module fixture `lab`). Needs root,
OVN, PostgreSQL and the virtualenv of lab.neutron_server.venv() (skipped naming what is
missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.builders import noauth_config
from providers.test_octavia_provider import M1, M2, Lab, answered_by, lab, tagged
from teapot_lb.cli.manager import external_providers
from teapot_lb.controller.kube_runner import running
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.neutron_nets import rows
from teapot_lb.lab.neutron_server import NOAUTH_PROJECT
from teapot_lb.lab.octavia_ovn import OctaviaOVN
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from tenancy import test_provider_loop as provider_loop
from tenancy.builders import CONFIG_NS, TENANTS, pool_body, tenant_body, tlb_body

__all__ = ["lab"]  # (test_octavia_provider's module fixture: this module's own hosts)

pytestmark = pytest.mark.timeout(900)  # (the session's first test starts the stack: 1-3 min)

NAMESPACE = str(TENANTS["acme"]["namespace"])
VIPS = "198.51.100.96/28"  # the Tenant's allocation: inside the members' (the VIP) subnet
WITHIN = 90.0
RESTARTED = 180.0  # octavia-api started again (20-60 s under load), then the manager's retry
SWEEP_S = 5.0  # the manager's sweep period where a test waits for it (300 s by default)
BACKENDS = {"m1": M1, "m2": M2}


def backends(*nodes: str) -> list[dict[str, Any]]:
    return [{"node": n, "addresses": [BACKENDS[n]], "ready": True} for n in nodes]


class Management(provider_loop.Management):
    """The fake API server with the Tenant acme (providers: octavia) and its admin client."""

    async def until(
        self, name: str, kind: str, status: str, reason: str, within: float = WITHIN
    ) -> str:
        return await super().until(name, kind, status, reason, within)

    def addresses(self, name: str) -> list[str]:
        obj = self.api.get("tenantloadbalancers", name, NAMESPACE) or {}
        return list(obj.get("status", {}).get("addresses") or [])

    async def request(self, name: str, *nodes: str) -> str:
        """A TenantLoadBalancer `name`: TCP 80 to `nodes` at 8080; its uid."""
        body = tlb_body("acme", name, ports=[{"protocol": "TCP", "port": 80, "nodePort": 8080}],
                        backends=backends(*nodes))  # fmt: skip
        created = await self.admin.create(TENANT_LOAD_BALANCERS, body)
        return str(created["metadata"]["uid"])

    async def backends(self, name: str, *nodes: str) -> None:
        obj = await self.admin.get(TENANT_LOAD_BALANCERS, name, NAMESPACE)
        obj["spec"]["backends"] = backends(*nodes)
        await self.admin.replace(TENANT_LOAD_BALANCERS, obj)


@contextlib.asynccontextmanager
async def management(tmp: Path) -> AsyncIterator[Management]:
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NAMESPACE))
    await api.start()
    try:
        api.add_token("fake-token")
        api.write_kubeconfig(tmp / "management")
        api.seed(pool_body("octavia-vips", [VIPS]))
        api.seed(tenant_body("acme", allocations=[{"addressPool": "octavia-vips", "cidrs": [VIPS]}],
                             nodeNetworks=["198.51.100.32/28"], providers=["octavia"],
                             defaultProvider="octavia"))  # fmt: skip
        assert api.kubeconfig_path is not None
        async with await connect(api.kubeconfig_path, request_timeout_s=5.0) as admin:
            yield Management(api, admin)
    finally:
        await api.stop()


def config_file(tmp: Path, lab: Lab, endpoint: str) -> Path:
    """The operator's config file of the octavia provider: noauth Octavia at `endpoint`,
    VIPs on the members' subnet, no health monitor (see Lab)."""
    body = noauth_config(endpoint, lab.subnet["id"], NOAUTH_PROJECT,
                         healthMonitor={"enabled": False})  # fmt: skip
    path = tmp / "octavia.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def manager(world: Management, config: Path, **more: Any) -> KubeManager:
    """The manager with the octavia provider built as `--provider octavia=FILE` builds it
    (`more`: other ManagerConfig fields)."""
    providers = external_providers((f"octavia={config}",))
    config_ = ManagerConfig(config_namespace=CONFIG_NS, providers=providers,
                            provider_retry_base_s=0.2, provider_retry_cap_s=2.0,
                            provider_resync_s=5.0, **more)  # fmt: skip
    return KubeManager(world.admin, config_, watch_timeout_s=30)


@pytest.fixture
def reachable(tmp_path: Path, lab: Lab, openstack: OctaviaOVN) -> Iterator[Path]:
    yield config_file(tmp_path, lab, openstack.octavia_url)


async def served_by(lab: Lab, vip: str, nodes: set[str], count: int = 16) -> None:
    """Wait (the manager's loop running) until exactly `nodes` answer on `vip`:80."""
    await wait_for_async(lambda: answered_by(lab, vip, count) == nodes, within=WITHIN,
                         what=f"{sorted(nodes)} answering on {vip}:80", every=0.5)  # fmt: skip


async def gone(world: Management, lab: Lab, name: str, uid: str) -> None:
    """Delete request `name` and wait until Octavia has no load balancer tagged `uid`
    (its VIP is free again for the next test's request)."""
    await world.admin.delete(TENANT_LOAD_BALANCERS, name, NAMESPACE)
    await wait_for_async(lambda: not tagged(lab, uid), within=WITHIN,
                         what=f"no load balancer tagged {uid}", every=0.5)  # fmt: skip


async def test_a_request_gets_its_address_and_is_served_by_both_backends_through_the_vip(
    tmp_path: Path, lab: Lab, reachable: Path
) -> None:
    async with management(tmp_path) as world, running(manager(world, reachable)):
        uid = await world.request("web", "m1", "m2")

        message = await world.until("web", "Programmed", "True", "Active")

        [vip] = world.addresses("web")
        assert vip in message, message
        [lb] = tagged(lab, uid)
        assert lb.vip_address == vip
        await served_by(lab, vip, {"m1", "m2"})
        await gone(world, lab, "web", uid)


async def test_a_backend_removed_from_the_request_gets_no_new_connections(
    tmp_path: Path, lab: Lab, reachable: Path
) -> None:
    async with management(tmp_path) as world, running(manager(world, reachable)):
        uid = await world.request("web", "m1", "m2")
        await world.until("web", "Programmed", "True", "Active")
        [vip] = world.addresses("web")
        await served_by(lab, vip, {"m1", "m2"})

        await world.backends("web", "m2")

        await served_by(lab, vip, {"m2"})
        assert answered_by(lab, vip, 24) == {"m2"}, "m1 again after the change"
        await gone(world, lab, "web", uid)


async def test_a_deleted_request_leaves_no_octavia_load_balancer_and_no_northbound_row(
    tmp_path: Path, lab: Lab, reachable: Path, openstack_ovn: OVNStack
) -> None:
    async with management(tmp_path) as world, running(manager(world, reachable)):
        uid = await world.request("web", "m1")
        await world.until("web", "Programmed", "True", "Active")
        [lb] = tagged(lab, uid)
        assert rows(openstack_ovn, "load_balancer", f"name={lb.id}"), "built in OVN"

        await gone(world, lab, "web", uid)

        await wait_for_async(lambda: not rows(openstack_ovn, "load_balancer", f"name={lb.id}"),
                             within=WITHIN, what=f"the Load_Balancer row of {lb.id} deleted",
                             every=0.5)  # fmt: skip
        assert rows(openstack_ovn, "logical_switch_port", f"name={lb.vip_port_id}") == []


async def test_octavia_unreachable_is_programmed_false_with_why_and_recovers_once_reachable(
    tmp_path: Path, lab: Lab, openstack: OctaviaOVN
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    async with management(tmp_path) as world:
        async with running(manager(world, config_file(tmp_path, lab, closed))) as down:
            uid = await world.request("web", "m1")

            message = await world.until("web", "Programmed", "False", "OctaviaUnreachable")

            assert closed not in message, message  # the request is read by the tenant's agent
            said = await world.operator_told("OctaviaUnreachable")  # on the Tenant
            assert closed in said, said
            errors = down.metrics.provider_errors.labels("octavia", "ensure")
            await wait_for_async(lambda: errors._value.get() >= 2, within=WITHIN,
                                 what="ensure retried")  # fmt: skip
            assert tagged(lab, uid) == []
        # the operator fixes the endpoint and restarts the manager
        fixed = config_file(tmp_path, lab, openstack.octavia_url)
        async with running(manager(world, fixed)):
            await world.until("web", "Programmed", "True", "Active")
            [vip] = world.addresses("web")
            await served_by(lab, vip, {"m1"}, 4)
            await gone(world, lab, "web", uid)


async def test_octavia_stopped_under_a_running_manager_is_programmed_false_then_served_once_back(
    tmp_path: Path, lab: Lab, reachable: Path, openstack: OctaviaOVN
) -> None:
    async with management(tmp_path) as world, running(manager(world, reachable)) as loop:
        with openstack.stack.down("octavia-api"):
            uid = await world.request("web", "m1")

            message = await world.until("web", "Programmed", "False", "OctaviaUnreachable")

            assert openstack.octavia_url not in message, message
            said = await world.operator_told("OctaviaUnreachable")
            assert openstack.octavia_url in said, said
            errors = loop.metrics.provider_errors.labels("octavia", "ensure")
            await wait_for_async(lambda: errors._value.get() >= 2, within=WITHIN,
                                 what="ensure retried while Octavia is down")  # fmt: skip
        # octavia-api started again with the same command; the manager is not restarted
        await world.until("web", "Programmed", "True", "Active", within=RESTARTED)
        [vip] = world.addresses("web")
        [lb] = tagged(lab, uid)
        assert lb.vip_address == vip
        await served_by(lab, vip, {"m1"}, 4)
        await gone(world, lab, "web", uid)


KILLED_CYCLES = 10  # (bench/providers.py --cycles 100 is the figure)


def leftovers(lab: Lab, ovn: OVNStack) -> tuple[set[str], set[str], set[str]]:
    """Every Octavia load balancer id, Northbound Load_Balancer row and
    Logical_Switch_Port name there is (a VIP's port is one)."""
    lbs = {str(lb.id) for lb in lab.conn.load_balancer.load_balancers()}
    lb_rows = {str(r["name"]) for r in rows(ovn, "load_balancer")}
    ports = {str(r["name"]) for r in rows(ovn, "logical_switch_port")}
    return lbs, lb_rows, ports


async def test_create_delete_cycles_with_the_manager_killed_at_random_points_leave_nothing(
    tmp_path: Path, lab: Lab, reachable: Path, openstack_ovn: OVNStack
) -> None:
    """Each cycle: a manager starts, a request is made, the manager's task is cancelled
    (no cleanup of ours runs: what it had sent Octavia goes on there) at a random point
    of the build; the request is deleted with no manager running, or under a new one
    killed again at a random point of the delete. Then one manager runs: once its sweep
    has run, no load balancer, Load_Balancer row nor VIP port is left that was not there
    before. Seeded: a failure replays."""
    rng = random.Random(38)
    before = leftovers(lab, openstack_ovn)
    async with management(tmp_path) as world:
        for cycle in range(KILLED_CYCLES):
            name = f"cycle{cycle}"
            async with running(manager(world, reachable, provider_sweep_s=SWEEP_S)):
                await world.request(name, "m1")
                await asyncio.sleep(rng.uniform(0.0, 4.0))  # the kill point, not a wait
            if rng.random() < 0.5:
                await world.admin.delete(TENANT_LOAD_BALANCERS, name, NAMESPACE)
                continue
            async with running(manager(world, reachable, provider_sweep_s=SWEEP_S)):
                await world.admin.delete(TENANT_LOAD_BALANCERS, name, NAMESPACE)
                await asyncio.sleep(rng.uniform(0.0, 2.0))  # the kill point
        async with running(manager(world, reachable, provider_sweep_s=SWEEP_S)):

            def clean() -> bool:
                lbs, lb_rows, ports = leftovers(lab, openstack_ovn)
                return lbs <= before[0] and lb_rows <= before[1] and ports <= before[2]

            await wait_for_async(clean, within=RESTARTED, every=1.0,
                                 what="no load balancer, row nor VIP port left by the cycles"
                                 )  # fmt: skip
