"""docs/octavia.md's "Trying it" as a user runs it: its marked `openstack` blocks, as
written and in order, in one shell, against the stack the docs start
(`teapot_lb.lab.octavia.cli_stack`, what `scripts/octavia-stack` runs): each command a
real CLI process through Keystone, the Neutron stand-in and Octavia to the teapot
provider. A command that fails fails the test, named by its line in the document, and so
does the refused one if it is not refused as the docs say. The only edit of the commands
is in SUBSTITUTIONS; the test then reads what the CLI and the management API show."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from realapi.docblocks import Shell, documented, run_commands
from realapi.release import ROOT
from teapot_lb.lab.octavia import OCTAVIA_BIN, cli_missing, cli_stack
from teapot_lb.lab.wait import wait_for

pytestmark = pytest.mark.skipif(cli_missing() is not None, reason=str(cli_missing()))

DOC = ROOT / "docs" / "octavia.md"
# Where the docs start the stack (`scripts/octavia-stack /tmp/octavia-try`): here, the
# test's own directory, where cli_stack writes the openrc.
DOC_OPENRC = "/tmp/octavia-try/openrc"
STEPS = [("openstack", False), ("openstack", True), ("openstack", False)]


def openrc_env(path: Path) -> dict[str, str]:
    """The environment `source openrc` gives the CLI."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = value
    return out


def openstack(env: dict[str, str], *args: str) -> Any:
    """`openstack ARGS -f json` as the test's own look (not a documented step)."""
    done = subprocess.run([str(OCTAVIA_BIN / "openstack"), *args, "-f", "json"],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, f"openstack {' '.join(args)}:\n{done.stderr[-2000:]}"
    return json.loads(done.stdout)


# Keystone's database alone takes a minute or two to make, and each of the session's ten
# CLI processes several seconds on a loaded machine: more than the suite's 300 s default.
@pytest.mark.timeout(600)
async def test_trying_it_runs_as_written_create_listener_pool_member_refusal_and_delete(
    tmp_path: Path,
) -> None:
    substitutions = {DOC_OPENRC: str(tmp_path / "openrc")}
    blocks = documented(DOC, substitutions)
    assert [(b.target, b.refused) for b in blocks] == STEPS
    create, refused, delete = blocks
    shell = Shell(tmp_path)
    env = dict(os.environ)
    with cli_stack(tmp_path) as (_, rest, _keystone):
        said = await run_commands(DOC, create, ROOT, substitutions, env, shell)
        # What the docs' status show printed, and what the provider wrote for it.
        assert "192.0.2.41" in said and "ACTIVE" in said, said
        user = openrc_env(tmp_path / "openrc")
        lb = openstack(user, "loadbalancer", "show", "web")
        assert lb["provisioning_status"] == "ACTIVE", lb
        assert lb["vip_address"].startswith("203.0.113."), lb
        [member] = openstack(user, "loadbalancer", "member", "list", "web-pool")
        assert (member["address"], member["provisioning_status"]) == ("192.0.2.41", "ACTIVE")
        request = rest.tlb(lb["id"])
        assert request is not None
        assert [(p["protocol"], p["port"]) for p in request["spec"]["ports"]] == [("TCP", 80)]
        assert [b["addresses"] for b in request["spec"]["backends"]] == [["192.0.2.41"]]
        assert request["status"]["addresses"] == [lb["vip_address"]]

        # Refused in the call, naming the member's address and the Tenant's rule.
        await run_commands(DOC, refused, ROOT, substitutions, env, shell)

        await run_commands(DOC, delete, ROOT, substitutions, env, shell)
        assert openstack(user, "loadbalancer", "list") == []
        wait_for(lambda: rest.tlb(lb["id"]) is None, timeout=20, what="the request deleted")
