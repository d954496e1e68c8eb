"""`teapot-lb relay` is registered, and `explain relay TENANT` prints each route with the
rule that decided it."""

from __future__ import annotations

from click.testing import CliRunner

from teapot_lb.cli import main
from teapot_lb.cli.relay import explain_text

DOC = {
    "tenant": "acme",
    "asn": 64601,
    "allocation": ["203.0.113.0/28"],
    "node_networks": ["192.0.2.8/29"],
    "nodes": ["192.0.2.13"],
    "sessions": [{"address": "192.0.2.13", "state": "Established"}],
    "max_prefix": {"limit": 1000, "counts": "accepted", "action": "teardown"},
    "communities": {"allowed": ["64601:100"], "large_allowed": [], "well_known": "pass",
                    "rtbh": False},
    "routes": [
        {"prefix": "203.0.113.5/32", "from": "192.0.2.13", "next_hop": "192.0.2.13",
         "as_path": [64601], "verdict": "accepted"},
        {"prefix": "203.0.113.20/32", "from": "192.0.2.13", "next_hop": "192.0.2.13",
         "as_path": [64601], "verdict": "filtered", "reason": "outside-allocation",
         "rule": 3, "why": "the prefix is outside the tenant's allocation"},
    ],
}  # fmt: skip


def test_explain_text_shows_accepted_and_filtered_routes_with_the_deciding_rule() -> None:
    text = explain_text(DOC)
    assert "Tenant acme (AS64601)" in text and "192.0.2.13 Established" in text
    accepted = next(line for line in text.splitlines() if line.startswith("203.0.113.5/32"))
    filtered = next(line for line in text.splitlines() if line.startswith("203.0.113.20/32"))
    assert accepted.endswith("accepted")
    assert "filtered by rule 3 (outside-allocation)" in filtered
    assert "Max prefix per session: 1000 routes accepted (then teardown)" in text
    assert "Communities: allowed 64601:100; NO_EXPORT and kin pass; RTBH off" in text


def test_the_relay_refuses_to_allowlist_a_community_it_governs_by_an_option() -> None:
    for community, option in (("no-export", "--well-known-communities"), ("65535:666", "RTBH")):
        result = CliRunner().invoke(
            main, ["relay", "--asn", "64500", "--router-id", "192.0.2.2", "--community", community]
        )
        assert result.exit_code == 2 and option in result.output, result.output


def test_explain_text_lists_the_registered_nodes_and_says_when_there_are_none() -> None:
    assert "Registered nodes: 192.0.2.13" in explain_text(DOC)
    text = explain_text({**DOC, "nodes": [], "sessions": [], "routes": []})
    assert "Registered nodes: none: no session of its speakers is accepted" in text


def test_the_relay_command_is_registered_and_explain_relay_needs_a_tenant() -> None:
    runner = CliRunner()
    assert "--max-prefix-action" in runner.invoke(main, ["relay", "--help"]).output
    result = runner.invoke(main, ["explain", "relay"])
    assert result.exit_code != 0 and "name the Tenant" in result.output


def test_explain_relay_says_when_the_relay_cannot_be_reached() -> None:
    result = CliRunner().invoke(
        main, ["explain", "relay", "acme", "--relay-url", "http://127.0.0.1:9"]
    )
    assert result.exit_code != 0 and "cannot ask the relay" in result.output
