"""The provider agent re-sends what never reached Octavia: a request the manager answered
whose generation the driver did not mark reported (the driver agent was down, the API
process went away mid-report) is sent whole, provisioning statuses included, once the
driver has had its time to do it, then marked; a reported one is not sent again."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.octavia import OCTAVIA_BIN, TENANT_NS, missing
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.octavia.management import Management
from teapot_lb.octavia.mapping import ANNOTATION_REPORTED, desired_request

from .builders import LB_ID, tree
from .test_management import seeded

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


# Rounds of the agent in Octavia's environment (octavia-lib is there only), with a
# recording DriverLibrary, no gateway and its clock moved on by each argument's seconds
# before each round (a live driver has answer_timeout + 2 request_timeout = 20 s to
# report); prints each round's status updates.
_ROUNDS = """
import asyncio, json, sys, types
import aiohttp
from teapot_lb.octavia.agent import Agent
class Lib:
    def __init__(self):
        self.calls = []
    def update_loadbalancer_status(self, body):
        self.calls.append(body)
    def update_listener_statistics(self, body):
        pass
options = types.SimpleNamespace(
    gateway_status_urls=[], gateway_service="", gateway_status_port="7475",
    status_interval=5.0, resync_interval=300.0,
    kubeconfig=sys.argv[1], context=None, request_timeout=5.0, answer_timeout=10.0)
lib = Lib()
now = [0.0]
agent = Agent(options, lib, clock=lambda: now[0])
rounds = []
async def main():
    async with aiohttp.ClientSession() as session:
        for step in sys.argv[2:]:
            now[0] += float(step)
            await agent.round(session)
            rounds.append(lib.calls[:])
            lib.calls.clear()
    await agent.client.close()
asyncio.run(main())
print(json.dumps(rounds))
"""


def agent_rounds(api: FakeApiServer, *steps: float) -> list[list[dict[str, Any]]]:
    """The status updates the provider agent sends in each round, one round after each
    of `steps` (seconds its clock moves on)."""
    ran = subprocess.run(
        [str(OCTAVIA_BIN / "python"), "-c", _ROUNDS, str(api.kubeconfig_path),
         *(str(s) for s in steps)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rounds: list[list[dict[str, Any]]] = json.loads(ran.stdout.splitlines()[-1])
    return rounds


async def answered_request(client: KubeClient) -> TenantLoadBalancer:
    """The driver's request for tree(), accepted by the manager; nobody marked it."""
    written = await Management(client).write(desired_request(tree(), TENANT_NS))
    conditions = [
        {"type": kind, "status": "True", "reason": kind, "message": "ok",
         "lastTransitionTime": "2026-12-03T00:00:00Z",
         "observedGeneration": written.metadata.generation}
        for kind in ("Accepted", "Programmed")
    ]  # fmt: skip
    status = {"addresses": ["198.51.100.1"], "nextHops": [], "conditions": conditions}
    await client.patch(TENANT_LOAD_BALANCERS, written.name, {"status": status},
                       namespace=TENANT_NS, status=True)  # fmt: skip
    return written


def sent_provisioning(updates: list[dict[str, Any]]) -> set[str]:
    return {e["provisioning_status"] for u in updates for entries in u.values()
            for e in entries if "provisioning_status" in e}  # fmt: skip


async def test_an_unreported_generation_is_resent_whole_after_the_drivers_time_then_marked(
    fake_api: FakeApiServer,
) -> None:
    seeded(fake_api)
    async with await connect(fake_api.kubeconfig_path) as client:
        written = await answered_request(client)
    first, early, second, third = await asyncio.to_thread(agent_rounds, fake_api, 0, 19, 2, 5)
    # While the driver may still be reporting it (20 s), it is the driver's: operating
    # statuses only, as for any request.
    assert first and sent_provisioning(first) == set()
    assert sent_provisioning(early) == set()
    [resent] = second
    assert sent_provisioning([resent]) == {"ACTIVE"}
    assert resent["loadbalancers"][0]["id"] == LB_ID
    assert third == []  # marked: nothing more of it while nothing changes
    async with await connect(fake_api.kubeconfig_path) as client:
        stored = await Management(client).request(TENANT_NS, LB_ID)
    assert stored is not None
    annotations = stored.metadata.annotations or {}
    assert annotations[ANNOTATION_REPORTED] == str(written.metadata.generation)


async def test_a_generation_the_driver_reported_is_never_resent(fake_api: FakeApiServer) -> None:
    seeded(fake_api)
    async with await connect(fake_api.kubeconfig_path) as client:
        written = await answered_request(client)
        await Management(client).mark_reported(TENANT_NS, LB_ID, written.metadata.generation or 0)
    rounds = await asyncio.to_thread(agent_rounds, fake_api, 0, 30, 30)
    assert sent_provisioning([u for r in rounds for u in r]) == set()
