"""The `openstack` CLI (python-openstackclient + python-octaviaclient) against the stack
docs/octavia.md's "Trying it" starts (stack.cli_stack): the user's session as written
there, each command a real CLI process through Keystone, the Neutron stand-in and
Octavia to the teapot provider."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.lab.neutron import SUBNET_ID
from teapot_lb.lab.octavia import CLI_PROJECT, OCTAVIA_BIN, cli_missing, cli_stack
from teapot_lb.lab.wait import wait_for

pytestmark = pytest.mark.skipif(cli_missing() is not None, reason=str(cli_missing()))


def openrc_env(path: Path) -> dict[str, str]:
    """The environment `source openrc` gives the CLI."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = value
    return out


class Cli:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = {**os.environ, **env}

    def __call__(self, *args: str, formatted: bool = True) -> Any:
        """`openstack ARGS -f json`, its answer parsed (a failure shows the CLI's text);
        `formatted=False`: a command that prints JSON itself (no `-f`)."""
        argv = [str(OCTAVIA_BIN / "openstack"), *args, *(["-f", "json"] if formatted else [])]
        done = self.run(argv)
        assert done.returncode == 0, f"openstack {' '.join(args)}:\n{done.stderr[-2000:]}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def refused(self, *args: str) -> str:
        """What the CLI says of a command that must fail."""
        done = self.run([str(OCTAVIA_BIN / "openstack"), *args])
        assert done.returncode != 0, f"openstack {' '.join(args)} was not refused"
        return done.stderr

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=180, check=False)  # fmt: skip


def test_a_cli_session_creates_a_load_balancer_listener_pool_and_member_and_deletes_them(
    tmp_path: Path,
) -> None:
    with cli_stack(tmp_path) as (_, rest, _keystone):
        cli = Cli(openrc_env(tmp_path / "openrc"))
        lb = cli("loadbalancer", "create", "--name", "web", "--project", CLI_PROJECT,
                 "--vip-subnet-id", SUBNET_ID, "--provider", "teapot", "--wait")  # fmt: skip
        assert lb["provisioning_status"] == "ACTIVE", lb
        assert lb["vip_address"].startswith("203.0.113."), lb
        cli("loadbalancer", "listener", "create", "--name", "web-80", "--protocol", "TCP",
            "--protocol-port", "80", "--wait", "web")  # fmt: skip
        cli("loadbalancer", "pool", "create", "--name", "web-pool", "--listener", "web-80",
            "--protocol", "TCP", "--lb-algorithm", "ROUND_ROBIN", "--wait")  # fmt: skip
        member = cli("loadbalancer", "member", "create", "--name", "m1", "--address",
                     "192.0.2.41", "--protocol-port", "80", "--wait", "web-pool")  # fmt: skip
        assert member["provisioning_status"] == "ACTIVE", member

        status = cli("loadbalancer", "status", "show", "web", formatted=False)
        tree = status["loadbalancer"]
        assert tree["provisioning_status"] == "ACTIVE"
        [listener] = tree["listeners"]
        [pool] = listener["pools"]
        [shown] = pool["members"]
        assert (shown["address"], shown["provisioning_status"]) == ("192.0.2.41", "ACTIVE")

        # What the provider wrote into the management cluster for it.
        request = rest.tlb(lb["id"])
        assert request is not None
        assert [(p["protocol"], p["port"]) for p in request["spec"]["ports"]] == [("TCP", 80)]
        assert [b["addresses"] for b in request["spec"]["backends"]] == [["192.0.2.41"]]
        assert request["status"]["addresses"] == [lb["vip_address"]]

        # Refused in the call, naming the member's address and the Tenant's rule.
        said = cli.refused("loadbalancer", "member", "create", "--address", "198.51.100.7",
                           "--protocol-port", "80", "web-pool")  # fmt: skip
        assert "outside the node networks of Tenant acme" in said, said
        assert "[BackendNotAllowed]" in said, said

        cli("loadbalancer", "delete", "--cascade", "--wait", "web", formatted=False)
        assert cli("loadbalancer", "list") == []
        wait_for(lambda: rest.tlb(lb["id"]) is None, timeout=20, what="the request deleted")
