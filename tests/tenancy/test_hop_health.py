"""Route mode's liveness check of tenant next hops: the sans-I/O core, the rule that never
withholds a route's last hop, the plan with failing hops (pure), and the prober backend
with a stand-in for its TCP connects."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from teapot_lb.addresses import IPAddress
from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.hop_health import (
    ROUND,
    HealthParameters,
    HopHealth,
    HopVerdict,
    Probe,
    VerdictChanged,
    live_routes,
    probe_targets,
)
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.cluster import Store
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.speaker.backend import Step
from teapot_lb.speaker.hop_prober import TenantHopProber
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.tenancy.programmed import programmed_routes
from teapot_lb.tenancy.routes import TenantRoute
from teapot_lb.timers import ArmTimer, CancelTimer

from .builders import TENANTS, tlb_body
from .test_route_mode import config, managed, view

N1, N2, N3 = (ip_address(a) for a in TENANTS["acme"]["node_ips"])
PARAMS = HealthParameters(interval_s=0.1, timeout_s=0.2, fail_after=3, pass_after=2)


def round_of(health: HopHealth, **oks: bool) -> list[object]:
    """One round: the timer expires, each probe answers (n1=True...), the round ends."""
    probes = health.timer_expired(ROUND)
    assert all(isinstance(p, Probe) for p in probes)
    out: list[object] = []
    for p in probes:
        assert isinstance(p, Probe)
        name = {N1: "n1", N2: "n2", N3: "n3"}[p.address]
        out += health.probe_result(p.round, p.address, oks[name])
    return out


def test_the_hops_are_probed_together_in_rounds() -> None:
    health = HopHealth(PARAMS)
    assert health.set_targets({N2: 30080, N1: 30080}) == [ArmTimer(ROUND, 0.0)]
    assert health.timer_expired(ROUND) == [Probe(1, N1, 30080, 0.2), Probe(1, N2, 30080, 0.2)]
    assert health.probe_result(1, N1, True) == []  # the round waits for n2
    ended = health.probe_result(1, N2, True)
    assert ended == [VerdictChanged(HopVerdict(answering=frozenset({N1, N2}))),
                     ArmTimer(ROUND, 0.1)]  # fmt: skip


def test_a_hop_fails_after_three_failed_rounds_in_a_row_and_passes_after_two() -> None:
    health = HopHealth(PARAMS)
    health.set_targets({N1: 30080, N2: 30080})
    for n2 in (True, False, False, True, False, False):  # never three in a row
        round_of(health, n1=True, n2=n2)
        assert health.verdict.failing == frozenset()
    round_of(health, n1=True, n2=False)
    assert health.verdict == HopVerdict(frozenset({N2}), frozenset({N1}))
    round_of(health, n1=True, n2=True)
    assert health.verdict.failing == {N2}
    round_of(health, n1=True, n2=True)
    assert health.verdict == HopVerdict(frozenset(), frozenset({N1, N2}))


def test_late_answers_and_forgotten_hops_are_ignored() -> None:
    health = HopHealth(PARAMS)
    health.set_targets({N1: 30080, N2: 30080})
    for _ in range(3):
        round_of(health, n1=True, n2=False)
    assert health.verdict.failing == {N2}
    probes = health.timer_expired(ROUND)
    assert health.probe_result(1, N1, False) == []  # round 1 is long over
    orders = health.set_targets({N1: 30081})  # n2 no longer routed: forgotten
    assert VerdictChanged(HopVerdict(answering=frozenset({N1}))) in orders
    assert health.probe_result(probes[1].round, N2, True) == []  # type: ignore[union-attr]
    assert ArmTimer(ROUND, 0.1) in health.probe_result(4, N1, True)  # the round ends
    assert health.timer_expired(ROUND) == [Probe(5, N1, 30081, 0.2)]  # the port followed
    assert health.stop() == [CancelTimer(ROUND)]


@pytest.mark.parametrize(
    "bad", [{"interval_s": 0}, {"fail_after": 1}, {"pass_after": 0}, {"timeout_s": -1}]
)
def test_parameters_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HealthParameters(**bad)  # type: ignore[arg-type]


ROUTE = TenantRoute("198.51.100.0/32", (N1, N2, N3), "acme", "tenant-acme/web")


def verdict(failing: set[IPAddress], answering: set[IPAddress]) -> HopVerdict:
    return HopVerdict(frozenset(failing), frozenset(answering))


def test_failing_hops_are_withheld_while_another_hop_of_the_route_answers() -> None:
    [route] = live_routes([ROUTE], verdict({N2}, {N1, N3}))
    assert route.next_hops == (N1, N3)
    [route] = live_routes([ROUTE], verdict({N1, N2}, {N3}))
    assert route.next_hops == (N3,)


def test_when_no_hop_of_a_route_answers_all_are_kept_as_on_a_partition() -> None:
    assert live_routes([ROUTE], verdict({N1, N2, N3}, set())) == (ROUTE,)
    # n1 judged failing while n2, n3 have not failed three rounds yet but answer no more
    # (the speaker just got cut off): nothing is withheld either
    assert live_routes([ROUTE], verdict({N1}, set())) == (ROUTE,)


@pytest.mark.parametrize("fail_after", [2, 3])
def test_a_partition_starting_mid_round_withholds_nothing_at_any_round(fail_after: int) -> None:
    health = HopHealth(HealthParameters(fail_after=fail_after))
    health.set_targets({N1: 30080, N2: 30080, N3: 30080})
    round_of(health, n1=False, n2=True, n3=True)  # the cut-off lands mid-round
    assert live_routes([ROUTE], health.verdict) == (ROUTE,)
    for _ in range(5):
        round_of(health, n1=False, n2=False, n3=False)
        assert live_routes([ROUTE], health.verdict) == (ROUTE,)
    assert health.verdict.failing == {N1, N2, N3}


def test_probe_targets_use_the_lowest_tcp_node_port_and_skip_udp_only_requests() -> None:
    web = tlb_body("acme", "web", ports=[
        {"protocol": "TCP", "port": 443, "nodePort": 30443},
        {"protocol": "UDP", "port": 53, "nodePort": 30053},
        {"protocol": "TCP", "port": 80, "nodePort": 30080}])  # fmt: skip
    dns = tlb_body("acme", "dns", ports=[{"protocol": "UDP", "port": 53, "nodePort": 30054}])
    dns["spec"]["backends"] = dns["spec"]["backends"][:1]
    v = view(managed(config(web, dns)))
    assert probe_targets(v, programmed_routes(v)) == {N1: 30080, N2: 30080, N3: 30080}


def test_the_plan_withholds_a_failing_hops_paths_and_never_the_last() -> None:
    v = view(managed(config(tlb_body("acme", "web"))))

    def hops(failing: set[IPAddress]) -> set[str]:
        options = PlanOptions(tenant_hops=verdict(failing, {N1, N2, N3} - failing))
        routes = plan(v, "m1", options).of_mode(Mode.BGP)
        return {str(r.attributes.next_hop) for r in routes if isinstance(r, BGPRoute)}

    assert hops({N2}) == {str(N1), str(N3)}
    assert hops({N1, N2, N3}) == {str(N1), str(N2), str(N3)}


async def test_the_prober_probes_the_views_next_hops_and_hands_the_planner_its_verdict() -> None:

    dead = {N2}
    probed: list[Probe] = []
    woken: list[bool] = []

    async def connect(probe: Probe) -> bool:
        probed.append(probe)
        return probe.address not in dead

    prober = TenantHopProber(lambda: woken.append(True), PARAMS, connect=connect)
    speaker = NodeSpeaker("m1", Store(), backends=[prober])
    v = view(managed(config(tlb_body("acme", "web"))))
    options = PlanOptions()
    await prober.apply_plan(Step("m1", v, plan(v, "m1"), options, PlanCache()))
    await wait_for_async(lambda: prober.health.verdict.failing == {N2} or None, within=10,
                         what="n2 failing after three rounds")  # fmt: skip
    assert {p.address for p in probed} == {N1, N2, N3} and {p.port for p in probed} == {30080}
    assert woken  # the speaker is asked to plan again
    assert prober.plan_options(options).tenant_hops.failing == {N2}
    text = "\n".join(
        f"{m.name} {s.labels} {s.value}" for m in speaker_registry(speaker).collect()
        for s in m.samples if m.name.endswith("tenant_next_hops")
    )  # fmt: skip
    assert "{'state': 'probed'} 3\n" in text and text.endswith("{'state': 'failing'} 1")
    await prober.withdraw()


async def test_a_probe_that_raises_counts_as_failed_and_the_rounds_go_on() -> None:

    async def connect(probe: Probe) -> bool:
        if probe.address == N3:
            raise RuntimeError("a bug in the probe")
        return True

    prober = TenantHopProber(lambda: None, PARAMS, connect=connect)
    v = view(managed(config(tlb_body("acme", "web"))))
    await prober.apply_plan(Step("m1", v, plan(v, "m1"), PlanOptions(), PlanCache()))
    await wait_for_async(lambda: prober.health.verdict.failing == {N3} or None, within=10,
                         what="n3 failing")  # fmt: skip
    assert prober.health.verdict.answering == {N1, N2}
    await prober.withdraw()
