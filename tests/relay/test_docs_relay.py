"""docs/relay.md's "Running it" as a user runs it: the operator's directory, the relay,
the router's and the tenant speaker's BIRD configurations, and `explain relay`, its marked
blocks as written and in order, on hosts of their own (network namespaces at the
addresses the docs use: router 192.0.2.1, relay 192.0.2.2, tenant node 192.0.2.9). A step
that fails fails the test, named by its line in the document.

The test stands in for what the docs leave to the user's hosts and nothing else: it
starts BIRD with each configuration file the docs give (`bird -c FILE`), and runs the
relay's command on the relay's host; the commands are run unedited."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bgp.interop.peers import Bird, fib_next_hops
from needs import require_binary, require_root
from realapi.docblocks import DocBlock, documented, run_commands, start_commands
from realapi.release import ROOT
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.netlab.topology import Host

DOC = ROOT / "docs" / "relay.md"
HOSTS = {"router": "192.0.2.1", "relay": "192.0.2.2", "node": "192.0.2.9"}
STEPS = ["file", "relay", "file", "file", "relay"]
SERVICE_IP = "203.0.113.5/32"  # what the tenant's BIRD announces in the docs


class DocBird(Bird):
    """BIRD with a configuration file the docs give, as written."""

    def __init__(self, host: Host, workdir: Path, conf: Path) -> None:
        super().__init__(host, workdir, asn=0, router_id=HOSTS[host.name], neighbors=[])
        self.given = conf

    def _write_config(self) -> None:
        self.conf.write_text(self.given.read_text())


@pytest.fixture
def hosts() -> Iterator[dict[str, Host]]:
    require_root()
    require_binary("bird")
    with Topology("rdoc") as topo:
        switch = topo.add_switch("lan")
        made = {}
        for name, address in HOSTS.items():
            made[name] = topo.add_host(name)
            topo.connect(made[name], switch, addrs=[f"{address}/24"])
        yield made


async def test_running_it_runs_as_written_and_the_tenants_route_reaches_the_router(
    hosts: dict[str, Host], tmp_path: Path
) -> None:
    blocks: list[DocBlock] = documented(DOC, {})
    assert [b.target for b in blocks] == STEPS
    directory, relay, router_conf, tenant_conf, explain = blocks
    env = dict(os.environ)
    await run_commands(DOC, directory, tmp_path, {}, env)
    start_commands(relay, tmp_path, {}, hosts["relay"], tmp_path / "relay.log")
    for block, host in ((router_conf, "router"), (tenant_conf, "node")):
        await run_commands(DOC, block, tmp_path, {}, env)
        assert block.file is not None
        DocBird(hosts[host], tmp_path / host, tmp_path / block.file).start()

    wait_for(
        lambda: fib_next_hops(hosts["router"], SERVICE_IP) == frozenset({HOSTS["node"]}),
        timeout=60,
        what=f"{SERVICE_IP} via the tenant node in the router's FIB",
        detail=lambda: (tmp_path / "relay.log").read_text()[-3000:],
    )
    said = await run_commands(DOC, explain, tmp_path, {}, env, host=hosts["relay"])
    [line] = [ln for ln in said.splitlines() if ln.startswith(SERVICE_IP)]
    assert line.endswith("accepted"), said
    assert "192.0.2.9 Established" in said, said
