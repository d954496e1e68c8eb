"""The Southbound watch against a real Southbound ovsdb-server and ovn-northd (no root):
ovn-controller's claim of a gateway port is played by ovn-sbctl."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from model.builders import bgp_advertisement, peer
from ovn.builders import POOL, ovn, web
from teapot_lb.cli.explain import explain_command
from teapot_lb.cli.run import RunConfig, run
from teapot_lb.cluster import Store
from teapot_lb.lab.ovnstack import DATABASE_BINARIES, OVNDatabases, _which, missing
from teapot_lb.lab.wait import wait_for, wait_for_async
from teapot_lb.ovn.gateways import GatewayPort, Gateways
from teapot_lb.ovn.nbdb import Connection, NorthboundError
from teapot_lb.ovn.sbdb import SouthboundWatch, read_once
from teapot_lb.speaker.ovn_gateways import OVNGateways
from teapot_lb.speaker.wiring import build_speaker


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OVNDatabases]:
    """NB, SB and northd; router lr0 with a distributed gateway port on chassis-1 > -2,
    and a switch with an ordinary port (a VIF the watch must not receive)."""
    reason = missing((*DATABASE_BINARIES, "ovn-northd", "ovn-sbctl"))
    if reason:
        pytest.skip(reason)
    with OVNDatabases(tmp_path_factory.mktemp("sb")) as dbs:
        dbs.spawn("northd", [_which("ovn-northd"), f"--ovnnb-db={dbs.nb_remote}",
                             f"--ovnsb-db={dbs.sb_remote}",
                             f"--unixctl={dbs.workdir / 'northd.ctl'}"])  # fmt: skip
        for i in (1, 2):
            dbs.sbctl("chassis-add", f"chassis-{i}", "geneve", f"127.0.0.{i}")
            dbs.sbctl("set", "chassis", f"chassis-{i}", f"hostname=node-{i}")
        dbs.nbctl("lr-add", "lr0")
        dbs.nbctl("lrp-add", "lr0", "lr0-ext", "02:00:00:00:02:01", "192.0.2.1/24")
        dbs.nbctl("lrp-set-gateway-chassis", "lr0-ext", "chassis-1", "20")
        dbs.nbctl("lrp-set-gateway-chassis", "lr0-ext", "chassis-2", "10")
        dbs.nbctl("ls-add", "ls0")
        dbs.nbctl("lsp-add", "ls0", "vif0")
        dbs.nbctl("--wait=sb", "sync")
        yield dbs


def claim(dbs: OVNDatabases, chassis: str) -> None:
    """What ovn-controller of `chassis` does when it takes the gateway port."""
    uuid = dbs.sbctl("--bare", "--columns=_uuid", "find", "chassis", f"name={chassis}").strip()
    dbs.sbctl("set", "port_binding", "cr-lr0-ext", f"chassis={uuid}")


def test_a_claimed_gateway_port_reaches_the_watch_and_a_move_follows(sb: OVNDatabases) -> None:
    seen: list[Gateways] = []
    watch = SouthboundWatch(Connection(sb.sb_remote), seen.append)
    watch.start()
    try:
        wait_for(lambda: watch.latest.synced, timeout=10, what="the Southbound read")
        assert watch.latest.hostname("chassis-2") == "node-2"
        claim(sb, "chassis-1")
        wait_for(lambda: watch.latest.ports == (GatewayPort("lr0", "cr-lr0-ext", "chassis-1"),),
                 timeout=10, what="chassis-1's claim seen")  # fmt: skip
        claim(sb, "chassis-2")
        wait_for(lambda: watch.latest.ports == (GatewayPort("lr0", "cr-lr0-ext", "chassis-2"),),
                 timeout=10, what="the port moved to chassis-2")  # fmt: skip
        wait_for(lambda: seen[-1] == watch.latest, timeout=10, what="on_change told the move")
        # The monitor condition: the switch's VIF never reaches us.
        assert {row.type for row in watch._idl.tables["Port_Binding"].rows.values()} <= {
            "chassisredirect",
            "l3gateway",
        }
    finally:
        watch.stop()


def test_read_once_gives_the_current_gateways(sb: OVNDatabases) -> None:
    claim(sb, "chassis-1")
    assert read_once(Connection(sb.sb_remote)).ports == (
        GatewayPort("lr0", "cr-lr0-ext", "chassis-1"),
    )


def test_an_unreachable_southbound_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(NorthboundError, match=r"none\.sock"):
        read_once(Connection(f"unix:{tmp_path / 'none.sock'}"), timeout_s=1)


def test_explain_with_the_southbound_says_which_node_announces_and_why(
    sb: OVNDatabases, tmp_path: Path
) -> None:
    claim(sb, "chassis-2")
    manifests = tmp_path / "m"
    manifests.mkdir()
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"}}
             for i in (1, 2)]  # fmt: skip
    docs = [POOL, ovn(gatewayRouters=[{"name": "lr0"}]), bgp_advertisement("bgp", "public"),
            peer("up"), web("203.0.113.1", ips="203.0.113.1"), *nodes]  # fmt: skip
    (manifests / "all.yaml").write_text(yaml.safe_dump_all(docs))
    args = ["default/web", "--manifests", str(manifests), "--ovn-sb", sb.sb_remote, "-o", "json"]
    got = CliRunner().invoke(explain_command, args)
    assert got.exit_code == 0, got.output
    bgp = {d["node"]: d for d in json.loads(got.output)["decisions"] if d["mode"] == "bgp"}
    assert bgp["node-2"]["announces"] and not bgp["node-1"]["announces"]
    assert "router lr0: cr-lr0-ext on chassis chassis-2 (node node-2)" in bgp["node-1"]["reason"]


def test_a_speaker_with_ovn_sb_plans_again_when_the_port_moves(
    sb: OVNDatabases, tmp_path: Path
) -> None:
    async def scenario() -> None:
        config = RunConfig(manifests=tmp_path, node="node-1", state_dir=tmp_path, modes=(),
                           ovn_sb=sb.sb_remote)  # fmt: skip
        speaker = build_speaker(config, Store())
        (watcher,) = speaker.backends
        assert isinstance(watcher, OVNGateways)
        try:
            await wait_for_async(lambda: watcher.gateways.synced, within=10,
                                 what="the speaker's Southbound read")  # fmt: skip
            speaker._wake.clear()
            claim(sb, "chassis-1" if on(watcher.gateways) == "chassis-2" else "chassis-2")
            await wait_for_async(speaker._wake.is_set, within=10, what="the speaker notified")
            assert speaker.plan_options().ovn_gateways == watcher.gateways
        finally:
            await speaker.shutdown()

    asyncio.run(scenario())


def on(gateways: Gateways) -> str | None:
    return gateways.ports[0].chassis if gateways.ports else None


def test_a_watch_started_before_the_southbound_is_up_reads_it_when_it_comes(
    tmp_path: Path,
) -> None:
    dbs = OVNDatabases(tmp_path / "late", southbound=True)
    watch = SouthboundWatch(Connection(dbs.sb_remote), lambda _: None)
    watch.start(timeout_s=1)
    try:
        wait_for(lambda: watch.last_error, timeout=10, what="the unreachable Southbound noted")
        assert not watch.latest.synced  # gated pools are announced nowhere meanwhile
        with dbs:
            wait_for(lambda: watch.latest.synced, timeout=10, what="the Southbound read")
        assert watch.last_error is None
    finally:
        watch.stop()


def test_a_malformed_ovn_sb_is_refused_by_the_command_naming_it(tmp_path: Path) -> None:
    got = CliRunner().invoke(run, ["--manifests", str(tmp_path), "--node", "n1",
                                   "--ovn-sb", "ssl:sb:6642"])  # fmt: skip
    assert got.exit_code == 2
    assert "--ovn-sb" in got.output and "'ssl:sb:6642': write unix:PATH or tcp:HOST:PORT" in (
        got.output
    )
