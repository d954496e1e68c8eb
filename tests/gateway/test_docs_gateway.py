"""docs/gateway.md's "Trying it on one host" as a user runs it: the config file, the
check and explain, the gateway's command and the client's request, its marked blocks as
written and in order, each on the host the docs say (network namespaces of their own:
the gateway at 192.0.2.10 with real HAProxy, a client, the web server at
198.51.100.2:8080). A step that fails fails the test, named by its line in the document.

The test stands in only for the web server the docs assume (tests/gateway/backends.py,
answering its name); the commands are run unedited."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from needs import require_binary, require_root
from realapi.docblocks import DocBlock, documented, run_commands, start_commands
from realapi.release import ROOT
from teapot_lb.lab.gateway_lab import GatewayLab, gateway_lab
from teapot_lb.lab.wait import wait_for

DOC = ROOT / "docs" / "gateway.md"
STEPS = ["file", "gateway", "gateway", "client"]
WEB = "http:shop:198.51.100.2:8080"  # the web server the docs assume, answering "shop"


@pytest.fixture
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl")
    # A short directory: HAProxy's socket paths (under --state-dir) take 97 bytes at most.
    with gateway_lab(tmp_path_factory.mktemp("gwdoc"), "gwdoc") as lab:
        lab.start_backends(WEB)
        yield lab


@pytest.mark.root
@pytest.mark.daemon
async def test_trying_it_on_one_host_runs_as_written_and_serves_the_tenants_host(
    lab: GatewayLab,
) -> None:
    workdir = lab.work
    blocks: list[DocBlock] = documented(DOC, {})
    assert [b.target for b in blocks] == STEPS
    config, check, run, request = blocks
    env = dict(os.environ)
    await run_commands(DOC, config, workdir, {}, env)
    said = await run_commands(DOC, check, workdir, {}, env)
    assert "gateway.yaml: ok" in said, said
    assert "backend shop (weight 1): 198.51.100.2:8080" in said, said

    start_commands(run, workdir, {}, lab.gateway, workdir / "gateway.log")
    wait_for(
        lambda: lab.served_by("/", "shop.example") == "shop",
        timeout=60,  # a loaded CI machine: the gateway's start, then HAProxy's
        what="shop.example served by the gateway the docs started",
        detail=lambda: (workdir / "gateway.log").read_text()[-3000:],
    )
    answer = await run_commands(DOC, request, workdir, {}, env, host=lab.client)
    assert json.loads(answer)["name"] == "shop", answer
    other = lab.curl("http://other.example/", host="other.example")
    assert other.code == 404, other
