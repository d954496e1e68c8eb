"""docs/relay.md's "Running it" and "Installing it on a management cluster" as a user
runs them: the operator's directory, the relay, the router's and the tenant speaker's
BIRD configurations, `explain relay`, and the install on a kube-apiserver of its own, its
marked blocks as written and in order, on hosts of their own (network namespaces at the
addresses the docs use: router 192.0.2.1, relay 192.0.2.2, tenant node 192.0.2.9). A step
that fails fails the test, named by its line in the document.

The test stands in for what the docs leave to the user's hosts and cluster and nothing
else: it starts BIRD with each configuration file the docs give (`bird -c FILE`), runs
the relay's command on the relay's host, and, installed, runs the relay as its Deployment
says (its arguments, a token of its ServiceAccount; the apiserver reached from the relay's
namespace through a forwarder, where a pod on the host network reaches it directly); the
commands are run unedited."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from needs import require_binary, require_root
from realapi.docblocks import (
    DocBlock,
    container_args,
    documented,
    fresh_planes,
    run_block,
    run_commands,
    start_commands,
)
from realapi.release import ROOT
from teapot_lb.lab.kubeplane import forward_into
from teapot_lb.lab.peers import Bird, fib_next_hops
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.netlab.topology import Host

DOC = ROOT / "docs" / "relay.md"
HOSTS = {"router": "192.0.2.1", "relay": "192.0.2.2", "node": "192.0.2.9"}
STEPS = ["file", "relay", "file", "file", "relay", "management"]
SERVICE_IP = "203.0.113.5/32"  # what the tenant's BIRD announces in the docs
NAMESPACE = "teapot-lb-system"  # deploy/teapot/relay.yaml's


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
    directory, relay, router_conf, tenant_conf, explain, _ = blocks
    env = dict(os.environ)
    await run_commands(DOC, directory, tmp_path, {}, env)
    start_commands(relay, tmp_path, {}, hosts["relay"], tmp_path / "relay.log")
    await _birds(hosts, tmp_path, router_conf, tenant_conf)
    _route_reaches_the_router(hosts, tmp_path / "relay.log")
    said = await run_commands(DOC, explain, tmp_path, {}, env, host=hosts["relay"])
    [line] = [ln for ln in said.splitlines() if ln.startswith(SERVICE_IP)]
    assert line.endswith("accepted"), said
    assert "192.0.2.9 Established" in said, said


async def _birds(hosts: dict[str, Host], workdir: Path, *confs: DocBlock) -> None:
    """The router's and the tenant node's BIRD, each with the file the docs give."""
    for block, host in zip(confs, ("router", "node"), strict=True):
        await run_commands(DOC, block, workdir, {}, os.environ)
        assert block.file is not None
        DocBird(hosts[host], workdir / host, workdir / block.file).start()


def _route_reaches_the_router(hosts: dict[str, Host], log: Path) -> None:
    wait_for(
        lambda: fib_next_hops(hosts["router"], SERVICE_IP) == frozenset({HOSTS["node"]}),
        timeout=60,
        what=f"{SERVICE_IP} via the tenant node in the router's FIB",
        detail=lambda: log.read_text()[-3000:] if log.exists() else "",
    )


async def test_installed_on_a_management_cluster_the_relay_takes_the_same_route(
    hosts: dict[str, Host], tmp_path: Path
) -> None:
    blocks: list[DocBlock] = documented(DOC, {})
    directory, _, router_conf, tenant_conf, _, install = blocks
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")  # "from a checkout"
    await run_commands(DOC, directory, tmp_path, {}, os.environ)
    with fresh_planes(tmp_path / "kube", "management") as planes:
        plane = planes["management"]
        await run_block(DOC, install, plane, tmp_path, {})
        # What the Deployment's pod would run: its arguments, its ServiceAccount's token.
        args = container_args(plane, NAMESPACE, "teapot-lb-relay")
        forwarder = forward_into(plane, hosts["relay"].ns)
        try:
            token = plane.service_account_token(NAMESPACE, "teapot-lb-relay")
            identity = plane.token_kubeconfig(token, "relay", namespace=NAMESPACE,
                                              server=forwarder.server)  # fmt: skip
            log_level, command, *rest = args
            teapot = str(Path(sys.executable).parent / "teapot-lb")
            log = tmp_path / "relay.log"
            with log.open("ab") as out:
                hosts["relay"].popen(
                    [teapot, log_level, command, f"--kubeconfig={identity}", *rest],
                    stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            await _birds(hosts, tmp_path, router_conf, tenant_conf)
            _route_reaches_the_router(hosts, log)
        finally:
            forwarder.stop()
