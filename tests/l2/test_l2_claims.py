"""Split-brain arbitration: both sides of a conflict reach the same verdict without talking."""

from __future__ import annotations

from ipaddress import IPv4Address

from teapot_lb.l2.claims import ClaimArbiter, ClaimTiming, Verdict

IP = IPv4Address("192.0.2.100")
MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
RANKING = ("node-a", "node-b", "node-c")


def judge(
    arb: ClaimArbiter, claimant: str | None, cmac: bytes, omac: bytes, owned: bool, now: float = 0.0
) -> Verdict:
    return arb.judge(
        IP,
        claimant=claimant,
        claimant_mac=cmac,
        own_mac=omac,
        ranking=RANKING,
        owned=owned,
        now=now,
    )


def test_the_better_ranked_owner_defends_and_the_other_yields() -> None:
    a, b = ClaimArbiter("node-a"), ClaimArbiter("node-b")
    assert judge(a, "node-b", MAC_B, MAC_A, owned=True) is Verdict.DEFEND
    assert judge(b, "node-a", MAC_A, MAC_B, owned=True) is Verdict.YIELD
    assert b.silenced(IP, 1.0) and not a.silenced(IP, 1.0)


def test_a_yielded_node_stays_silent_while_it_hears_the_winner_then_returns() -> None:
    timing = ClaimTiming(hold=3.0)
    b = ClaimArbiter("node-b", timing)
    judge(b, "node-a", MAC_A, MAC_B, owned=True, now=0.0)
    assert judge(b, "node-a", MAC_A, MAC_B, owned=False, now=2.0) is Verdict.YIELD
    assert b.silenced(IP, 4.9)
    assert not b.silenced(IP, 5.0)


def test_a_standby_is_not_silenced_by_the_owners_routine_announcements() -> None:
    b = ClaimArbiter("node-b")
    assert judge(b, "node-a", MAC_A, MAC_B, owned=False) is Verdict.IGNORE
    assert not b.silenced(IP, 0.1)


def test_an_unknown_claimant_is_ranked_by_mac_on_both_sides() -> None:
    a, b = ClaimArbiter("node-a"), ClaimArbiter("node-b")
    assert judge(a, None, MAC_B, MAC_A, owned=True) is Verdict.DEFEND
    assert judge(b, None, MAC_A, MAC_B, owned=True) is Verdict.YIELD


def test_claims_by_our_own_other_interfaces_are_ignored() -> None:
    a = ClaimArbiter("node-a")
    assert judge(a, "node-a", MAC_B, MAC_A, owned=True) is Verdict.IGNORE


def test_a_defended_ip_stays_contested_while_the_claimant_is_dead_in_our_view() -> None:
    a = ClaimArbiter("node-a")
    judge(a, "node-b", MAC_B, MAC_A, owned=True)
    assert a.still_contested(alive={"node-a", "node-c"}) == [IP]
    assert a.still_contested(alive={"node-a", "node-b"}) == []  # healed: settled
    assert a.still_contested(alive={"node-a"}) == []


def test_an_unknown_claimant_is_not_defended_against_beyond_the_memory() -> None:
    a = ClaimArbiter("node-a")
    judge(a, None, MAC_B, MAC_A, owned=True)
    assert a.still_contested(alive={"node-a"}) == []
