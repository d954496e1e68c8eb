"""The agent's entry point for the speaker: changing IPs and node views at run time."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from ipaddress import ip_address

from teapot_lb.announce.election import EXCLUDE_LABEL, Node, ServiceIP
from teapot_lb.l2.agent import Agent, AgentConfig
from teapot_lb.l2.lab import V4, V6, build, in_netns
from teapot_lb.l2.responder import interfaces
from teapot_lb.membership.core import Timing
from teapot_lb.netlab import Topology


async def _until(cond: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):  # poll: the state changes inside the agent's callbacks
        for _ in itertools.count():
            if cond():
                return
            await asyncio.sleep(0.01)


def test_update_moves_ownership_with_the_ip_set_and_the_node_view(topology: Topology) -> None:
    lab = build(topology, n_nodes=1, serve=False)
    v4, v6 = ip_address(V4), ip_address(V6)

    async def scenario() -> None:
        config = AgentConfig(
            node="node-a", ips=[v4], peers=[], timing=Timing(interval=0.01, dead_after=3)
        )
        agent = Agent(config, await interfaces())
        task = asyncio.ensure_future(agent.run())
        try:
            eth0 = agent.responders["eth0"]
            await _until(lambda: eth0.owned == {v4})
            agent.update([ServiceIP(v6)])  # V4 removed, V6 added
            assert eth0.owned == {v6}
            agent.update([ServiceIP(v6)], nodes=[Node("node-a", {EXCLUDE_LABEL: "true"})])
            assert eth0.owned == set()
            assert agent.desired(0.0)[v6].startswith("excluded")
            agent.update([ServiceIP(v6)], nodes=[Node("node-a")])
            assert eth0.owned == {v6}
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            agent.shutdown()

    in_netns(lab.nodes["node-a"].ns, lambda: asyncio.run(scenario()))
