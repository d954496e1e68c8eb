"""Split-brain arbitration: both sides of a conflict reach the same verdict without talking."""

from __future__ import annotations

from ipaddress import IPv4Address

from teapot_lb.l2.claims import ClaimArbiter, ClaimTiming, Judgement, Verdict
from teapot_lb.timers import ArmTimer

IP = IPv4Address("192.0.2.100")
MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
RANKING = ("node-a", "node-b", "node-c")


def judgement(
    arb: ClaimArbiter, claimant: str | None, cmac: bytes, omac: bytes, owned: bool
) -> Judgement:
    return arb.judge(
        IP, claimant=claimant, claimant_mac=cmac, own_mac=omac, ranking=RANKING, owned=owned
    )


def judge(
    arb: ClaimArbiter, claimant: str | None, cmac: bytes, omac: bytes, owned: bool
) -> Verdict:
    return judgement(arb, claimant, cmac, omac, owned).verdict


def test_the_better_ranked_owner_defends_and_the_other_yields() -> None:
    a, b = ClaimArbiter("node-a"), ClaimArbiter("node-b")
    assert judge(a, "node-b", MAC_B, MAC_A, owned=True) is Verdict.DEFEND
    assert judge(b, "node-a", MAC_A, MAC_B, owned=True) is Verdict.YIELD
    assert b.silenced(IP) and not a.silenced(IP)


def test_yielding_orders_the_silence_timer_and_defending_orders_none() -> None:
    a, b = ClaimArbiter("node-a"), ClaimArbiter("node-b", ClaimTiming(hold=3.0))
    assert judgement(a, "node-b", MAC_B, MAC_A, owned=True).timers == ()
    assert judgement(b, "node-a", MAC_A, MAC_B, owned=True).timers == (ArmTimer(IP, 3.0),)


def test_a_yielded_node_stays_silent_while_it_hears_the_winner_then_returns() -> None:
    b = ClaimArbiter("node-b", ClaimTiming(hold=3.0))
    judge(b, "node-a", MAC_A, MAC_B, owned=True)
    # The winner's next announcement re-arms the silence (the adapter restarts the timer).
    again = judgement(b, "node-a", MAC_A, MAC_B, owned=False)
    assert again == Judgement(Verdict.YIELD, (ArmTimer(IP, 3.0),))
    assert b.silenced(IP)
    b.timer_expired(IP)  # hold passed without hearing the winner
    assert not b.silenced(IP)
    assert judge(b, "node-a", MAC_A, MAC_B, owned=False) is Verdict.IGNORE


def test_a_standby_is_not_silenced_by_the_owners_routine_announcements() -> None:
    b = ClaimArbiter("node-b")
    assert judge(b, "node-a", MAC_A, MAC_B, owned=False) is Verdict.IGNORE
    assert not b.silenced(IP)


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
