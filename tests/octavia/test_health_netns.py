"""Health monitors that probe, and the provider agent keeping Octavia current, through
the real Octavia API (openstacksdk): an HTTP listener, a pool of 2 members with an HTTP
health monitor, served by the real `teapot-lb gateway` (HAProxy in a lab namespace, its
control plane reading the management API the driver writes); the teapot provider agent
runs in octavia-driver-agent and reads the gateway's `/gateway/backends`.

Stopping a member's server turns it ERROR and its pool and load balancer DEGRADED;
starting it again turns them ONLINE; requests show in the listener's statistics."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.octavia import OCTAVIA_BIN, missing
from teapot_lb.lab.octavia_probed import HOST, MEMBERS, WITHIN, World, probed, until
from teapot_lb.lab.wait import wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.daemon,
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_root()
    require_binary("haproxy", "curl")
    with probed(tmp_path_factory.mktemp("ohealth")) as found:
        yield found


def test_probed_members_come_online_and_the_gateway_serves_them(world: World) -> None:
    everyone = {"lb": "ONLINE", "listener": "ONLINE", "pool": "ONLINE", "m1": "ONLINE",
                "m2": "ONLINE"}  # fmt: skip
    until(world, everyone, "every object ONLINE through the provider agent")
    seen = wait_for(
        lambda: {world.lab.served_by("/", HOST) for _ in range(10)} >= set(MEMBERS) or None,
        timeout=WITHIN,
        what="both members served through the gateway",
    )
    assert seen


def test_listener_statistics_count_the_requests_and_their_bytes(world: World) -> None:
    lbs = world.conn.load_balancer
    before = lbs.get_listener_statistics(world.listener_id).total_connections
    n = 20
    codes = [world.lab.curl(f"http://{HOST}/stats/{i}", host=HOST).code for i in range(n)]
    assert codes == [200] * n

    def counted() -> Any:
        stats = lbs.get_listener_statistics(world.listener_id)
        return stats if stats.total_connections >= before + n else None

    stats = wait_for(
        counted, timeout=WITHIN, what=f"{n} more connections counted", every=0.1,
        detail=lambda: str(lbs.get_listener_statistics(world.listener_id)),
    )  # fmt: skip
    assert stats.bytes_in > 0 and stats.bytes_out > 0
    lb_stats = lbs.get_load_balancer_statistics(world.lb_id)
    assert lb_stats.total_connections >= stats.total_connections


def test_a_stopped_member_is_error_and_its_pool_and_lb_degraded_until_it_returns(
    world: World,
) -> None:
    until(world, {"m1": "ONLINE", "m2": "ONLINE"}, "both members ONLINE")
    world.stop("m2")
    until(world, {"m2": "ERROR", "m1": "ONLINE", "pool": "DEGRADED", "lb": "DEGRADED"},
           "m2 ERROR, its pool and load balancer DEGRADED")  # fmt: skip
    assert {world.lab.served_by("/", HOST) for _ in range(6)} == {"m1"}
    world.start("m2")
    until(world, {"m2": "ONLINE", "pool": "ONLINE", "lb": "ONLINE", "listener": "ONLINE"},
           "m2 ONLINE again, the pool and load balancer ONLINE")  # fmt: skip


# One round of the agent, in Octavia's environment, with a recording DriverLibrary and a
# gateway URL nothing listens on; the management API is the world's.
_AGENT_ROUND = """
import asyncio, json, sys, types
import aiohttp
from teapot_lb.octavia.agent import Agent
class Lib:
    def __init__(self):
        self.calls = []
    def update_loadbalancer_status(self, body):
        self.calls.append(["statuses", body])
    def update_listener_statistics(self, body):
        self.calls.append(["statistics", body])
options = types.SimpleNamespace(
    gateway_status_urls=["http://127.0.0.1:9"], gateway_service="", gateway_status_port="7475",
    status_interval=0.3, resync_interval=300.0,
    kubeconfig=sys.argv[1], context=None, request_timeout=5.0, answer_timeout=10.0)
lib = Lib()
agent = Agent(options, lib)
async def main():
    async with aiohttp.ClientSession() as session:
        await agent.round(session)
    await agent.client.close()
asyncio.run(main())
print(json.dumps({"calls": lib.calls, "unreachable": sorted(agent.unreachable)}))
"""


def test_an_unreachable_gateway_is_logged_by_name_and_no_member_status_is_made_up(
    world: World,
) -> None:
    ran = subprocess.run(
        [str(OCTAVIA_BIN / "python"), "-c", _AGENT_ROUND, str(world.stack.kubeconfig)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = json.loads(ran.stdout.splitlines()[-1])
    assert found["unreachable"] == ["http://127.0.0.1:9"]
    assert "gateway unreachable" in ran.stdout + ran.stderr
    statuses = [body for kind, body in found["calls"] if kind == "statuses"]
    assert statuses, "the load balancer's own statuses are still sent"
    assert not any("members" in body or "pools" in body for body in statuses), statuses
