"""The speaker's pure parts and its BGP diffing, with a fake BGP speaker."""

from __future__ import annotations

import asyncio
import threading
from ipaddress import ip_address, ip_network
from typing import Any

from structlog.testing import capture_logs

from model.builders import parse
from teapot_lb.announce.announcement import BGPRoute, Decision, L2Claim, Mode
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.bgp import RouteAttributes, State
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST
from teapot_lb.cluster import Kind
from teapot_lb.speaker import node as node_module
from teapot_lb.speaker.backend import Step
from teapot_lb.speaker.bgp_backend import (
    ANNOTATION_ROUTER_ID,
    BGPBackend,
    RouterID,
    peer_setup,
    router_id_for,
    router_id_of,
)
from teapot_lb.speaker.desired import bgp_routes, diff_mappings, l2_claims
from teapot_lb.speaker.l2_backend import peer_addresses
from teapot_lb.speaker.node import NodeSpeaker, StepResult, announced_ips
from teapot_lb.speaker.report import (
    REASON_ANNOUNCING,
    REASON_FAILED,
    Announcing,
    announcing,
    events,
)

from .builders import FakeFactory, bgp_setup, lb_service, node, ours, put, store_of

P10 = "203.0.113.10/32"  # the backend hands the speaker prefixes as text
P11 = "203.0.113.11/32"


# --- desired state -------------------------------------------------------------------------


def test_two_advertisements_of_one_prefix_to_one_peer_merge_into_one_route() -> None:
    routes = bgp_routes(
        [
            BGPRoute("r1", "203.0.113.10/32", RouteAttributes(communities=(1,), local_pref=100)),
            BGPRoute("r1", "203.0.113.10/32", RouteAttributes(communities=(2,), local_pref=200)),
            BGPRoute("r2", "203.0.113.10/32"),
        ]
    )
    assert routes["r1"] == {"203.0.113.10/32": RouteAttributes(communities=(1, 2), local_pref=200)}
    assert routes["r2"] == {"203.0.113.10/32": RouteAttributes()}


def test_an_unrestricted_l2_claim_wins_over_interface_lists() -> None:
    claims = l2_claims([L2Claim("192.0.2.200", ("eth1",)), L2Claim("192.0.2.200")])
    assert claims == {"192.0.2.200": ()}
    assert l2_claims([L2Claim("192.0.2.201", ("eth1", "eth0"))]) == {
        "192.0.2.201": ("eth0", "eth1")
    }


def test_mapping_diff_names_added_removed_and_changed_keys() -> None:
    d = diff_mappings({"a": 1, "b": 2, "c": 3}, {"b": 2, "c": 4, "d": 5})
    assert (d.added, d.removed, d.changed) == ({"d"}, {"a"}, {"c"})
    assert not diff_mappings({"a": 1}, {"a": 1})


# --- peers ----------------------------------------------------------------------------------


def test_peer_password_comes_from_the_referenced_secret() -> None:
    peer = parse(
        ours(
            "BGPPeer",
            "r1",
            {
                "myASN": 64512,
                "peerASN": 64500,
                "peerAddress": "192.0.2.1",
                "passwordSecret": {"name": "bgp"},
            },
        )
    )
    setup = peer_setup(peer, {"lb-system/bgp": {"password": b"s3cret"}})
    assert setup.error is None and setup.config is not None
    assert setup.config.password == "s3cret"
    missing = peer_setup(peer, {})
    assert missing.config is None
    assert "Secret lb-system/bgp" in str(missing.error)


def test_other_family_next_hop_is_the_nodes_address_of_that_family() -> None:
    dual = node("n1", "192.0.2.11")
    dual["status"]["addresses"].append({"type": "InternalIP", "address": "2001:db8::11"})
    v4_session = parse(ours("BGPPeer", "r", {"myASN": 1, "peerASN": 2, "peerAddress": "192.0.2.1"}))
    setup = peer_setup(v4_session, {}, parse(dual))
    assert setup.config is not None
    assert setup.config.next_hop_v4 is None  # the session's own address: next hop self
    assert str(setup.config.next_hop_v6) == "2001:db8::11"
    v6_session = parse(
        ours("BGPPeer", "r", {"myASN": 1, "peerASN": 2, "peerAddress": "2001:db8::1"})
    )
    setup6 = peer_setup(v6_session, {}, parse(dual))
    assert setup6.config is not None
    assert str(setup6.config.next_hop_v4) == "192.0.2.11" and setup6.config.next_hop_v6 is None


def test_router_id_is_the_nodes_ipv4_address_unless_a_peer_sets_one() -> None:
    n = parse(node("n1", "192.0.2.11"))
    assert str(router_id_of(n, "n1", [])) == "192.0.2.11"
    p = parse(ours("BGPPeer", "r", {"myASN": 1, "peerASN": 2, "routerID": "198.51.100.9"}))
    assert str(router_id_of(n, "n1", [p])) == "198.51.100.9"
    assert router_id_of(None, "n1", []) == router_id_of(None, "n1", [])


def test_heartbeat_peers_are_the_other_nodes_addresses() -> None:
    view = store_of(*bgp_setup(), node("n3", "192.0.2.13")).view()
    assert peer_addresses(view, "n1") == ["192.0.2.12", "192.0.2.13"]
    assert peer_addresses(view, "unknown") == []


def test_heartbeat_peers_kept_between_steps_follow_node_changes() -> None:
    store = store_of(*bgp_setup(), node("n3", "192.0.2.13"))
    known: dict[str, Any] = {}
    assert peer_addresses(store.view(), "n1", known) == ["192.0.2.12", "192.0.2.13"]
    store.put_object(parse(node("n3", "192.0.2.33")))
    store.put_object(parse(node("n4", "192.0.2.14")))
    view = store.view()
    assert peer_addresses(view, "n1", known) == peer_addresses(view, "n1")
    assert peer_addresses(view, "n1", known) == ["192.0.2.12", "192.0.2.33", "192.0.2.14"]
    store.delete(Kind.NODE, "n4")
    assert peer_addresses(store.view(), "n1", known) == ["192.0.2.12", "192.0.2.33"]
    assert sorted(known) == ["n1", "n2", "n3"]


# --- the BGP backend through the node speaker ----------------------------------------------


async def test_each_selected_peer_gets_the_services_routes_with_next_hop_self() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(["64512:7"]), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    (bgp,) = factory.made
    assert bgp.started and bgp.local_as == 64512 and str(bgp.router_id) == "192.0.2.11"
    assert set(bgp.peers) == {"192.0.2.1", "192.0.2.2"}
    for addr in ("192.0.2.1", "192.0.2.2"):
        attrs = bgp.routes[addr][P10]
        assert attrs is not None
        assert attrs.communities == (64512 << 16 | 7,)
        assert attrs.next_hop is None  # next hop self


async def test_a_service_change_updates_routes_without_touching_sessions() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    bgp = factory.made[0]
    bgp.calls.clear()
    put(store, lb_service("api", "203.0.113.11"))
    await speaker.step()
    assert [c[0] for c in bgp.calls] == ["change", "change"]  # the changed prefix only
    assert set(bgp.routes["192.0.2.1"]) == {P10, P11}
    bgp.calls.clear()
    await speaker.step()  # nothing changed: nothing sent
    assert bgp.calls == []


async def test_changing_communities_resends_routes_but_keeps_the_session() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(["64512:1"]), lb_service("web", "203.0.113.10"))
    backend = BGPBackend(factory)
    speaker = NodeSpeaker("n1", store, bgp=backend)
    await speaker.step()
    bgp = factory.made[0]
    bgp.calls.clear()
    put(
        store,
        ours(
            "BGPAdvertisement", "public", {"addressPools": ["public"], "communities": ["64512:2"]}
        ),
    )
    await speaker.step()
    assert ("remove", "192.0.2.1") not in bgp.calls
    attrs = bgp.routes["192.0.2.1"][P10]
    assert attrs is not None and attrs.communities == (64512 << 16 | 2,)
    assert backend.session_resets == 0


async def test_changing_one_peers_settings_resets_only_that_peer() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    backend = BGPBackend(factory)
    speaker = NodeSpeaker("n1", store, bgp=backend)
    await speaker.step()
    bgp = factory.made[0]
    bgp.calls.clear()
    put(
        store,
        ours(
            "BGPPeer",
            "r1",
            {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1", "holdTime": "9s"},
        ),
    )
    await speaker.step()
    assert bgp.calls == [("remove", "192.0.2.1"), ("add", "192.0.2.1"), ("routes", "192.0.2.1")]
    assert bgp.peers["192.0.2.1"].config.hold_time == 9
    assert backend.session_resets == 1


async def test_a_peer_that_stops_selecting_the_node_is_removed() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    bgp = factory.made[0]
    put(
        store,
        ours(
            "BGPPeer",
            "r2",
            {
                "myASN": 64512,
                "peerASN": 64500,
                "peerAddress": "192.0.2.2",
                "nodeSelectors": [{"matchLabels": {"rack": "b"}}],
            },
        ),
    )
    await speaker.step()
    assert set(bgp.peers) == {"192.0.2.1"}


async def test_shutdown_withdraws_before_closing_sessions() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    await speaker.shutdown()
    assert factory.made[0].shut_down == {"withdraw": True, "graceful_restart": False}


async def test_shutdown_reports_that_the_node_stopped_announcing() -> None:
    seen: list[StepResult] = []

    async def reporter(result: StepResult) -> None:
        seen.append(result)

    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(FakeFactory()), reporter=reporter)
    await speaker.step()
    await speaker.shutdown()
    final = seen[-1]
    assert final.announcing == {}
    assert [e.message for e in final.events] == [
        "node n1 stopped announcing bgp 203.0.113.10 to r1,r2"
    ]


async def test_a_second_bgppeer_with_the_same_address_is_refused_until_the_first_goes() -> None:
    factory = FakeFactory()
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    put(
        store, ours("BGPPeer", "r9", {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"})
    )
    backend = BGPBackend(factory)
    speaker = NodeSpeaker("n1", store, bgp=backend)
    await speaker.step()
    assert backend.errors() == {"r9": "BGPPeer r1 has the same address"}
    assert factory.made[0].calls.count(("add", "192.0.2.1")) == 1
    store.delete(Kind.BGP_PEER, "lb-system/r1")
    await speaker.step()
    assert backend.errors() == {}
    assert backend.address_of("r9") == "192.0.2.1"
    assert factory.made[0].routes["192.0.2.1"]


async def test_no_peer_no_speaker_started() -> None:
    factory = FakeFactory()
    store = store_of(node("n1", "192.0.2.11"), lb_service("web", "203.0.113.10"))
    await NodeSpeaker("n1", store, bgp=BGPBackend(factory)).step()
    assert factory.made == []


async def test_a_peer_whose_secret_is_missing_is_reported_as_announce_failed() -> None:
    factory = FakeFactory()
    docs = bgp_setup(passwordSecret={"name": "nope"})
    store = store_of(*docs, lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    result = await speaker.step()
    assert "r1" in result.failures["default/web"]["203.0.113.10"]
    assert any(e.reason == REASON_FAILED for e in result.events)
    assert set(factory.made[0].peers) == {"192.0.2.2"}


# --- reports -------------------------------------------------------------------------------


async def test_step_events_say_when_the_node_starts_and_stops_announcing() -> None:
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(FakeFactory()))
    first = await speaker.step()
    (ev,) = first.events
    assert ev.reason == REASON_ANNOUNCING and not ev.warning
    assert ev.message == "node n1 announces bgp 203.0.113.10 to r1,r2"
    store.delete(Kind.SERVICE, "default/web")
    second = await speaker.step()
    assert [e.message for e in second.events] == [
        "node n1 stopped announcing bgp 203.0.113.10 to r1,r2"
    ]


def test_events_report_a_failure_once() -> None:
    a = {"default/web": (Announcing("192.0.2.200", Mode.L2),)}
    fail = {"default/web": {"192.0.2.200": "no interface"}}
    first = events("n1", {}, a, fail, {})
    again = events("n1", a, a, fail, fail)
    assert [e.reason for e in first] == [REASON_ANNOUNCING, REASON_FAILED]
    assert again == []


def test_plan_of_a_view_without_status_announces_nothing() -> None:
    store = store_of(*bgp_setup(), lb_service("web"))
    p = plan(store.view(), "n1")
    assert p.announcements == frozenset()
    assert p.decisions[0].reason == "no IP assigned yet"


async def test_status_lists_ipv4_and_ipv6_announcements_together() -> None:
    docs = bgp_setup()
    docs[2] = ours("AddressPool", "public", {"addresses": ["203.0.113.0/28", "2001:db8:ff::/120"]})
    store = store_of(
        *docs,
        lb_service("web6", "2001:db8:ff::10", ipFamilies=["IPv6"]),
        lb_service("web", "203.0.113.10"),
    )
    result = await NodeSpeaker("n1", store, bgp=BGPBackend(FakeFactory())).step()
    assert announced_ips(result) == {"bgp": ["203.0.113.10", "2001:db8:ff::10"]}


async def test_only_sessions_going_up_or_down_trigger_a_new_plan() -> None:
    from teapot_lb.bgp import State
    from teapot_lb.bgp.fsm import StateChanged
    from teapot_lb.speaker.bgp_backend import on_session_change

    speaker = NodeSpeaker("n1", store_of(*bgp_setup()))
    on_event = on_session_change(speaker.notify)
    peer: Any = None
    on_event(peer, StateChanged(State.CONNECT, State.OPEN_SENT))
    assert not speaker._wake.is_set()
    on_event(peer, object())  # type: ignore[arg-type]  # e.g. routes learned from the router
    assert not speaker._wake.is_set()
    on_event(peer, StateChanged(State.OPEN_CONFIRM, State.ESTABLISHED))
    assert speaker._wake.is_set()


class RecordingBackend:
    """A backend of a mode of its own choosing, through the protocol only."""

    def __init__(self, mode: Mode, failing: dict[str, str] | None = None) -> None:
        self._mode = mode
        self.failing = failing or {}
        self.applied: list[int] = []
        self.withdrawn = False

    @property
    def mode(self) -> Mode:
        return self._mode

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        return options

    async def apply_plan(self, step: Step) -> None:
        self.applied.append(len(step.plan.of_mode(self._mode)))

    def failure(self, decision: Decision) -> str | None:
        return self.failing.get(decision.ip)

    def failure_inputs(self) -> object:
        return dict(self.failing)

    async def withdraw(self) -> None:
        self.withdrawn = True


async def test_a_backend_is_anything_that_follows_the_protocol() -> None:
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    backend = RecordingBackend(Mode.BGP, {"203.0.113.10": "no route to the router"})
    speaker = NodeSpeaker("n1", store, backends=[backend])
    result = await speaker.step()
    assert backend.applied == [2]  # one route to each of the two BGPPeers
    assert result.failures == {"default/web": {"203.0.113.10": "no route to the router"}}
    await speaker.shutdown()
    assert backend.withdrawn


async def test_backends_are_asked_only_about_decisions_of_their_mode() -> None:
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    other = RecordingBackend(Mode.L2, {"203.0.113.10": "not this one"})
    result = await NodeSpeaker("n1", store, backends=[other]).step()
    assert result.failures == {}


async def test_one_changed_service_is_reported_alone_and_the_report_equals_a_full_one() -> None:
    many = [lb_service(f"s{i:02d}", f"203.0.113.{i + 1}") for i in range(12)]
    store = store_of(*bgp_setup(), *many)
    backend = RecordingBackend(Mode.BGP, {})
    speaker = NodeSpeaker("n1", store, backends=[backend])
    first = await speaker.step()
    assert speaker.reporting.looked_at == 12 and first.changed == frozenset(first.announcing)
    put(store, lb_service("s03", "203.0.113.14"))  # one Service moves to another IP
    second = await speaker.step()
    assert speaker.reporting.looked_at == 1
    assert second.changed == {"default/s03"}
    assert [e.service for e in second.events] == ["default/s03", "default/s03"]  # on, off
    full = announcing(plan(store.view(), "n1"))
    assert second.announcing == full
    # What the backends answer failures from changed: every Service is looked at again.
    backend.failing["203.0.113.5"] = "no route to the router"
    third = await speaker.step()
    assert speaker.reporting.looked_at == 12
    assert third.changed == {"default/s04"}
    assert third.failures == {"default/s04": {"203.0.113.5": "no route to the router"}}
    assert [e.reason for e in third.events] == [REASON_FAILED]


async def test_a_route_is_announced_only_to_peers_whose_session_is_established() -> None:
    store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
    factory = FakeFactory()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(factory))
    await speaker.step()
    (fake,) = factory.made
    fake.peers["192.0.2.2"].state = State.ACTIVE  # r2 never reached Established
    result = await speaker.step()
    (d,) = [d for d in result.plan.decisions if d.mode is Mode.BGP]
    assert d.announces and d.peers == ("r1",) and d.waiting == ("r2",)
    assert "held for r2 (session not Established" in d.reason
    assert [a.text() for a in result.announcing["default/web"]] == ["bgp 203.0.113.10 to r1"]
    assert set(fake.routes) == {"192.0.2.1", "192.0.2.2"}  # held for r2 all the same
    fake.peers["192.0.2.1"].state = State.CONNECT  # no session up at all
    result = await speaker.step()
    (d,) = [d for d in result.plan.decisions if d.mode is Mode.BGP]
    assert not d.announces and d.waiting == ("r1", "r2")
    assert d.reason.startswith("no session Established: held for r1, r2")
    assert "default/web" not in result.announcing


# A BGP keepalive timer armed just before a step (the lab's keepalive is 1 s, its BFD
# 100 ms): it must fire while the step works, not after.
KEEPALIVE_AFTER_S = 0.01
# How long the planning thread waits for it: only reached when the loop stood still.
STOOD_STILL_S = 5.0


class WaitingForTheLoop:
    """Holds the step's work (in whatever thread it runs) until the event loop has run a
    timer armed after the step began: a loop held by the step never runs it."""

    def __init__(self) -> None:
        self.loop_ran = threading.Event()

    def hold(self) -> None:
        assert self.loop_ran.wait(STOOD_STILL_S), "the event loop stood still during the step"

    async def step_with(self, backend: RecordingBackend) -> None:
        """One step of a speaker with one Service, the timer armed as it begins."""
        store = store_of(*bgp_setup(), lb_service("web", "203.0.113.10"))
        speaker = NodeSpeaker("n1", store, backends=[backend])
        asyncio.get_running_loop().call_later(KEEPALIVE_AFTER_S, self.loop_ran.set)
        result = await speaker.step()
        assert self.loop_ran.is_set()
        assert announced_ips(result) == {"bgp": ["203.0.113.10"]}


async def test_the_event_loop_runs_timers_while_a_step_plans(monkeypatch: Any) -> None:
    # A BGP session coming up replans every Service (seconds at 10,000 under load): BFD and
    # the keepalives must go on meanwhile, or the session it replans for is lost (issue 37).
    waiting = WaitingForTheLoop()

    def planning(*args: Any, **kwargs: Any) -> Any:
        waiting.hold()
        return plan(*args, **kwargs)

    monkeypatch.setattr(node_module, "plan", planning)
    await waiting.step_with(RecordingBackend(Mode.BGP))


async def test_the_event_loop_runs_timers_while_a_step_reports() -> None:
    # Reporting looks at every Service after such a change too (what each announces).
    waiting = WaitingForTheLoop()

    class Waiting(RecordingBackend):
        def failure(self, decision: Decision) -> str | None:
            waiting.hold()
            return super().failure(decision)

    await waiting.step_with(Waiting(Mode.BGP))


V6_PEER = {"myASN": 64512, "peerASN": 64500, "peerAddress": "2001:db8::1"}


def test_an_ipv6_only_node_offers_only_ipv6_unicast_and_warns_of_no_ipv4_next_hop() -> None:
    v6_only = parse(node("n6", "2001:db8::16"))
    setup = peer_setup(parse(ours("BGPPeer", "r", V6_PEER)), {}, v6_only)
    assert setup.config is not None
    assert setup.config.families == frozenset({IPV6_UNICAST})
    dual = node("n1", "192.0.2.11")
    dual["status"]["addresses"].append({"type": "InternalIP", "address": "2001:db8::11"})
    both = peer_setup(parse(ours("BGPPeer", "r", V6_PEER)), {}, parse(dual))
    assert both.config is not None
    assert both.config.families == frozenset({IPV4_UNICAST, IPV6_UNICAST})


def test_router_id_per_node_from_an_annotation_else_derived_outside_real_addresses() -> None:
    v6_only = node("n6", "2001:db8::16")
    derived = router_id_for(parse(v6_only), "n6", [])
    assert derived.source == "derived" and derived.address in ip_network("240.0.0.0/4")
    v6_only["metadata"]["annotations"] = {ANNOTATION_ROUTER_ID: "192.0.2.16"}
    assert router_id_for(parse(v6_only), "n6", []) == RouterID(
        ip_address("192.0.2.16"), "annotation"
    )
    v6_only["metadata"]["annotations"] = {ANNOTATION_ROUTER_ID: "2001:db8::16"}
    bad = router_id_for(parse(v6_only), "n6", [])
    assert bad.source == "derived" and bad.problem is not None
    assert ANNOTATION_ROUTER_ID in bad.problem


async def test_a_derived_router_id_is_logged_as_a_warning_saying_what_to_set() -> None:
    store = store_of(node("n1", "2001:db8::11"), ours("BGPPeer", "r", V6_PEER))
    with capture_logs() as logs:
        await NodeSpeaker("n1", store, bgp=BGPBackend(FakeFactory())).step()
    (warned,) = [e for e in logs if str(e["event"]).startswith("bgp router ID derived")]
    assert warned["log_level"] == "warning" and ANNOTATION_ROUTER_ID in str(warned["event"])
