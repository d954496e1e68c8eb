"""The `teapot-lb` command line."""

from __future__ import annotations

from click.testing import CliRunner

from teapot_lb import __version__
from teapot_lb.cli import COMMANDS, main


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_help_lists_the_components() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for component in ("controller", "speaker", "run", "lab", "explain", "validate"):
        assert component in result.output


def test_every_listed_command_loads() -> None:
    for name in COMMANDS:
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output


def test_explain_says_which_bfd_profile_watches_each_peer_announced_to() -> None:
    from model.builders import bfd_profile, parse, peer
    from teapot_lb.announce.announcement import Decision, Mode
    from teapot_lb.cli.explain import bfd_of_peers
    from teapot_lb.cluster import Store

    store = Store()
    for doc in (
        bfd_profile("fast", receiveInterval=100, transmitInterval=50, minimumTtl=250),
        peer("tor", bfdProfile="fast", ebgpMultiHop=True),
        peer("edge", "192.0.2.253"),
        peer("old", "192.0.2.252", bfdProfile="gone"),
        peer("idle", "192.0.2.251", bfdProfile="fast"),
    ):
        store.put_object(parse(doc))

    def to(*peers: str) -> Decision:
        return Decision("default/web", "203.0.113.1", "n1", Mode.BGP, True, "ok", peers)

    assert bfd_of_peers(store.view(), [to("tor", "edge", "old")]) == {
        "edge": "no BFD",
        "old": "BFD profile 'gone' not found",
        "tor": "BFD profile fast: transmit 50 ms, receive 100 ms, multiplier 3,"
        " multihop, minimum TTL 250",
    }
    assert bfd_of_peers(store.view(), [to("edge")]) == {}  # no BFD anywhere: nothing said
