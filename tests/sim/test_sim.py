"""The simulator's parts: virtual time, timer orders on it, the network model."""

from __future__ import annotations

from teapot_lb.sim.clock import CoreTimers, VirtualClock
from teapot_lb.sim.network import Network
from teapot_lb.timers import ArmTimer, CancelTimer


def test_callbacks_run_in_due_time_order_and_ties_in_scheduling_order() -> None:
    clock = VirtualClock()
    seen: list[tuple[float, str]] = []
    for when, what in ((0.3, "c"), (0.1, "a"), (0.3, "d"), (0.2, "b")):
        clock.at(when, lambda w=what: seen.append((clock.now, w)))
    clock.run_until(0.25)
    assert seen == [(0.1, "a"), (0.2, "b")] and clock.now == 0.25
    clock.run_until(1.0)
    assert [w for _, w in seen] == ["a", "b", "c", "d"]


def test_a_rearmed_timer_fires_once_at_its_new_time_and_a_cancelled_one_never() -> None:
    clock = VirtualClock()
    fired: list[tuple[float, str]] = []
    timers: CoreTimers[str] = CoreTimers(clock, lambda t: fired.append((clock.now, t)))
    timers.apply(ArmTimer("beat", 0.1))
    timers.apply(ArmTimer("silence", 0.2))
    clock.run_until(0.05)
    timers.apply(ArmTimer("beat", 0.1))  # re-armed: due at 0.15 now
    timers.apply(CancelTimer("silence"))
    clock.run_until(1.0)
    ((when, name),) = fired
    assert name == "beat" and abs(when - 0.15) < 1e-9


def test_a_one_way_cut_drops_only_that_direction() -> None:
    net = Network(cut={("a", "b")})
    assert net.delay("a", "b") is None
    assert net.delay("b", "a") is not None


def test_a_partition_cuts_both_ways_and_heals() -> None:
    net = Network()
    net.partition(["a", "b"], ["c"])
    assert net.delay("a", "c") is None and net.delay("c", "b") is None
    assert net.delay("a", "b") is not None
    net.heal()
    assert net.delay("a", "c") is not None


def test_loss_is_seeded_and_near_its_rate() -> None:
    def lost(seed: int) -> list[bool]:
        net = Network(loss=0.1, seed=seed)
        return [net.delay("a", "b") is None for _ in range(5000)]

    assert lost(7) == lost(7)
    assert 0.08 < sum(lost(7)) / 5000 < 0.12


def test_delays_are_latency_plus_bounded_jitter() -> None:
    net = Network(latency=0.001, jitter=0.0005)
    delays = [net.delay("a", "b") for _ in range(200)]
    assert all(d is not None and 0.001 <= d <= 0.0015 for d in delays)
