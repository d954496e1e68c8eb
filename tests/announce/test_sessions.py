"""BGP sessions laid over decisions planned as if every session were up (sessions.py):
the words and peers a decision gets are those of a plan made knowing the sessions."""

from __future__ import annotations

from teapot_lb.announce.announcement import Decision, Mode
from teapot_lb.announce.sessions import ALL_UP, Sessions, lay, with_sessions

HELD = "(session not Established: not received there)"


def planned(reason: str, *peers: str) -> Decision:
    return Decision("default/web", "192.0.2.10", "node-a", Mode.BGP, True, reason, peers)


def test_a_decision_whose_peers_are_all_established_is_the_same_object() -> None:
    d = planned("announced to tor1, tor2", "tor1", "tor2")
    assert with_sessions(d, Sessions.of({"tor1", "tor2", "tor3"}, ())) is d
    assert with_sessions(d, ALL_UP) is d
    assert Sessions.of(None, ()) is ALL_UP


def test_a_peer_down_is_held_for_and_the_bounds_and_notes_stay_at_the_end() -> None:
    d = planned("announced to tor1, tor2 (among 2 of 3 nodes); via gateway gw1", "tor1", "tor2")

    got = with_sessions(d, Sessions.of(None, {"tor2"}))

    assert got.announces
    assert got.peers == ("tor1",)
    assert got.waiting == ("tor2",)
    assert got.reason == (
        f"announced to tor1; held for tor2 {HELD} (among 2 of 3 nodes); via gateway gw1"
    )


def test_no_session_established_announces_to_nobody_and_holds_for_all() -> None:
    d = planned("announced to tor1, tor2 (among 2 of 3 nodes)", "tor1", "tor2")

    got = with_sessions(d, Sessions.of((), ()))

    assert not got.announces
    assert got.peers == ()
    assert got.waiting == ("tor1", "tor2")
    assert got.reason == f"no session Established: held for tor1, tor2 {HELD} (among 2 of 3 nodes)"


def test_only_announced_bgp_decisions_change_and_unchanged_tuples_are_kept() -> None:
    not_bgp = Decision("default/web", "192.0.2.10", "node-a", Mode.L2, True, "owner", ())
    refused = Decision("default/web", "192.0.2.10", "node-a", Mode.BGP, False, "no BGPPeer")
    decisions = (not_bgp, refused)
    assert lay(decisions, Sessions.of((), ())) is decisions
    both = (*decisions, planned("announced to tor1", "tor1"))
    laid = lay(both, Sessions.of((), ()))
    assert laid[:2] == decisions and not laid[2].announces
