"""The hijack suite: a hostile tenant (acme) tries to take, steer, blackhole or drown
another tenant's (bolt's) routes through the relay, IPv4 and IPv6. Each attempt is dropped
or refused, counted in the relay's metrics by tenant and reason, explained (``explain
relay``, or the kernel's counters for what never reaches BGP), and bolt's routes stay in
both routers' FIBs with bolt's nodes as next hops the whole time (a monitor samples them
from before the first attempt to after the last). One world for the module.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.bgp.wire.aspath import SegmentType
from teapot_lb.lab.peers import Origination
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab.topology import Host

from .hijacks import COUNTED, PASSED, ROUTE_HIJACKS, SCRUBBED, announce
from .world import (
    BOLT_NODES,
    BOLT_PASSWORD,
    BOLT_V4,
    BOLT_V6,
    REGISTERED,
    GtsmTeapot,
    World,
    acme_doc,
    manifests,
    tenant_speaker,
    v4,
    v6,
    world_in,
)

HERE = Path(__file__).resolve().parent
MAX_PREFIXES = 100
BOLT_FIB = {
    BOLT_V4: frozenset(v4(n) for n in BOLT_NODES),
    BOLT_V6: frozenset(v6(n) for n in BOLT_NODES),
}


class Attacker:
    """tests/relay/attacker.py in a host's namespace."""

    def __init__(self, host: Host, **cfg: Any) -> None:
        cfg.setdefault("router_id", cfg["src"] if ":" not in cfg["src"] else "192.0.2.250")
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.proc = host.popen(
            [sys.executable, str(HERE / "attacker.py"), json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait(self, kind: str, timeout: float = 15) -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def next_of_kind() -> dict[str, Any] | None:
            try:
                event = self.events.get(timeout=0.05)
            except queue.Empty:
                return None
            seen.append(event)
            return event if event["event"] == kind else None

        return wait_for(next_of_kind, timeout=timeout, what=f"attacker event {kind}",
                        detail=lambda: f"seen: {seen}")  # fmt: skip

    def send(self, *messages: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"send": b"".join(messages).hex()}).encode() + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


class Monitor:
    """Samples bolt's routes in both FIBs until stopped; keeps every deviation."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.want = BOLT_FIB
        self.deviations: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for prefix, hops in self.want.items():
                for router, got in self.world.fib(prefix).items():
                    if got != hops:
                        self.deviations.append(f"{router}: {prefix} via {got}")
            self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def netstat(host: Host) -> dict[str, int]:
    """The namespace's TcpExt counters (/proc/net/netstat is per network namespace)."""
    lines = [ln.split() for ln in host.run("cat", "/proc/net/netstat").splitlines()]
    out: dict[str, int] = {}
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names and names[0] == "TcpExt:":
            out.update(zip(names[1:], map(int, values[1:]), strict=False))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world_in("hijack", tmp_path_factory.mktemp("relay-hijack")) as w:
        # Counting received routes: the flood of junk below trips the limit (counting
        # accepted ones, the default, it would not: tests/relay/test_relay_max_prefix.py).
        w.start_relay("--max-prefixes", str(MAX_PREFIXES), "--max-prefix-restart", "2",
                      "--max-prefix-count", "received")  # fmt: skip
        for name in BOLT_NODES:
            tenant_speaker(
                w, name, GtsmTeapot, "bolt", [Origination(BOLT_V4), Origination(BOLT_V6)],
                password=BOLT_PASSWORD,
            )  # fmt: skip
        for prefix, hops in BOLT_FIB.items():
            w.wait_fib(prefix, hops, timeout=60)
        yield w


@pytest.fixture(scope="module")
def monitor(world: World) -> Iterator[Monitor]:
    m = Monitor(world)
    yield m
    m.stop()


@pytest.fixture(scope="module")
def route_attempts(world: World, monitor: Monitor) -> Iterator[dict[str, Any]]:
    """acme's hostile speaker sends every UPDATE attempt over one session (the counted
    ones first: withdrawing bolt's routes before it announced them itself)."""
    attacker = Attacker(world.hosts["ah"], src=v4("ah"), dst=v4("relay"), asn=64601)
    try:
        attacker.wait("established")
        for attempt in (*COUNTED, *ROUTE_HIJACKS, *SCRUBBED, *PASSED):
            attacker.send(attempt.message)
        want = {h.prefix for h in ROUTE_HIJACKS}
        doc = wait_for(
            lambda: (d := world.explain("acme"))
            and want <= {r["prefix"] for r in d["routes"]}
            and d,
            timeout=20, what="every attempt in explain relay acme",
        )  # fmt: skip
        yield {"explain": doc, "metrics": world.metrics_text(), "attacker": attacker}
    finally:
        attacker.close()


def rejected(metrics: str, reason: str) -> float:
    key = f'teapot_lb_relay_routes_rejected_total{{reason="{reason}",tenant="acme"}}'
    for line in metrics.splitlines():
        if line.startswith(key + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("attempt", ROUTE_HIJACKS, ids=lambda h: h.name)
def test_each_hijacked_route_is_dropped_counted_and_explained(
    world: World, route_attempts: dict[str, Any], monitor: Monitor, attempt: Any
) -> None:
    routes = [r for r in route_attempts["explain"]["routes"] if r["prefix"] == attempt.prefix]
    assert [r["reason"] for r in routes] == [attempt.reason], routes
    assert routes[0]["verdict"] == "filtered" and routes[0]["rule"] >= 1
    same = sum(1 for h in ROUTE_HIJACKS if h.reason == attempt.reason)
    assert rejected(route_attempts["metrics"], attempt.reason) >= same
    # Not in any router (bolt's own prefixes are there with bolt's nodes only).
    for router, hops in world.fib(attempt.prefix).items():
        if attempt.prefix in monitor.want:
            assert hops == monitor.want[attempt.prefix], router
        else:
            assert hops is None, (router, hops)
    assert monitor.deviations == []


@pytest.mark.parametrize("attempt", SCRUBBED, ids=lambda h: h.name)
def test_blackhole_set_by_a_tenant_without_rtbh_is_scrubbed_and_counted(
    world: World, route_attempts: dict[str, Any], monitor: Monitor, attempt: Any
) -> None:
    for name, router in world.routers.items():
        entry = router.wait_routes(lambda rib: attempt.prefix in rib, what=attempt.prefix)
        assert entry[attempt.prefix].communities == frozenset(), name
    metrics = route_attempts["metrics"]
    assert 'teapot_lb_relay_routes_communities_scrubbed_total{tenant="acme"}' in metrics
    assert monitor.deviations == []


# NO_EXPORT as each router prints it: BIRD by value, FRR by name.
NO_EXPORT_SHOWN = {"65535:65281", "noExport"}


@pytest.mark.parametrize("attempt", PASSED, ids=lambda h: h.name)
def test_no_export_set_by_a_tenant_reaches_the_routers(
    world: World, route_attempts: dict[str, Any], monitor: Monitor, attempt: Any
) -> None:
    for name, router in world.routers.items():
        entry = router.wait_routes(lambda rib: attempt.prefix in rib, what=attempt.prefix)
        assert entry[attempt.prefix].communities & NO_EXPORT_SHOWN, (name, entry[attempt.prefix])
    assert monitor.deviations == []


def test_a_confederation_segment_withdraws_the_sessions_earlier_path(
    world: World, route_attempts: dict[str, Any], monitor: Monitor
) -> None:
    """RFC 5065 §5 / RFC 7606 §7.2: from a tenant (no member of the relay's confederation)
    the AS_PATH is malformed and the UPDATE treated as a withdrawal of its routes."""
    prefix, attacker = "203.0.113.14/32", route_attempts["attacker"]
    attacker.send(announce(prefix))
    world.wait_fib(prefix, frozenset({v4("ah")}))
    before = rejected(world.metrics_text(), "as-confed-segment")
    attacker.send(announce(prefix, confed=SegmentType.AS_CONFED_SEQUENCE))
    world.wait_fib(prefix, None)
    routes = [r for r in world.explain("acme")["routes"] if r["prefix"] == prefix]
    assert [(r["from"], r["reason"]) for r in routes] == [(v4("ah"), "as-confed-segment")]
    assert rejected(world.metrics_text(), "as-confed-segment") == before + 1
    assert monitor.deviations == []


@pytest.mark.parametrize("attempt", COUNTED, ids=lambda h: h.name)
def test_withdrawals_of_others_routes_and_malformed_updates_change_nothing_and_are_counted(
    world: World, route_attempts: dict[str, Any], monitor: Monitor, attempt: Any
) -> None:
    assert rejected(route_attempts["metrics"], attempt.reason) >= 1
    assert world.fib(attempt.prefix) == dict.fromkeys(
        world.routers, monitor.want.get(attempt.prefix)
    )
    # RFC 7606: the session survived its malformed UPDATEs.
    assert world.explain("acme")["sessions"] == [{"address": v4("ah"), "state": "Established"}]
    assert monitor.deviations == []


@pytest.mark.parametrize("host", ["x", "x6"])
def test_a_session_from_an_address_of_no_tenant_is_refused_at_open(
    world: World, monitor: Monitor, host: str
) -> None:
    src, dst = (v4("x"), v4("relay")) if host == "x" else (v6("x"), v6("relay"))
    before = world.metric("teapot_lb_relay_sessions_refused_total", tenant="",
                          reason="unknown-address")  # fmt: skip
    attacker = Attacker(world.hosts["x"], src=src, dst=dst, asn=64666)
    try:
        note = attacker.wait("notification")
        assert (note["code"], note["subcode"]) == (6, 5)  # Cease / Connection Rejected
    finally:
        attacker.close()
    after = world.metric("teapot_lb_relay_sessions_refused_total", tenant="",
                         reason="unknown-address")  # fmt: skip
    assert after == before + 1
    assert f"BGP connection from {src} refused" in world.relay_log()
    assert monitor.deviations == []


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_a_session_from_an_unregistered_address_in_a_tenants_subnet_is_refused_at_open(
    world: World, monitor: Monitor, family: str
) -> None:
    src, dst = (v4("au"), v4("relay")) if family == "v4" else (v6("au"), v6("relay"))
    labels = {"tenant": "acme", "reason": "unregistered-address"}
    before = world.metric("teapot_lb_relay_sessions_refused_total", **labels)
    attacker = Attacker(world.hosts["au"], src=src, dst=dst, asn=64601)
    try:
        note = attacker.wait("notification")
        assert (note["code"], note["subcode"]) == (6, 5)  # Cease / Connection Rejected
    finally:
        attacker.close()
    assert world.metric("teapot_lb_relay_sessions_refused_total", **labels) == before + 1
    assert f"BGP connection from {src} refused" in world.relay_log()
    assert "SessionRefusedUnregistered" in world.relay_log()
    assert monitor.deviations == []


def test_a_session_with_another_asn_from_a_tenants_address_is_refused_bad_peer_as(
    world: World, monitor: Monitor
) -> None:
    attacker = Attacker(world.hosts["ah2"], src=v6("ah2"), dst=v6("relay"), asn=64602)
    try:
        note = attacker.wait("notification")
        assert (note["code"], note["subcode"]) == (2, 2)  # OPEN / Bad Peer AS
    finally:
        attacker.close()
    assert world.metric("teapot_lb_relay_sessions_refused_total", tenant="acme",
                        reason="bad-peer-as") >= 1  # fmt: skip
    assert monitor.deviations == []


def test_a_session_without_the_tenants_md5_key_never_connects(
    world: World, monitor: Monitor
) -> None:
    before = netstat(world.hosts["relay"])
    attacker = Attacker(world.hosts["bh"], src=v4("bh"), dst=v4("relay"), asn=64602)
    try:
        attacker.wait("connect-failed")
    finally:
        attacker.close()
    after = netstat(world.hosts["relay"])
    assert after["TCPMD5NotFound"] > before["TCPMD5NotFound"]
    assert monitor.deviations == []


def test_a_session_with_ttl_below_255_never_connects(world: World, monitor: Monitor) -> None:
    before = netstat(world.hosts["relay"])
    attacker = Attacker(world.hosts["ah2"], src=v4("ah2"), dst=v4("relay"), asn=64601, ttl=64)
    try:
        attacker.wait("connect-failed")
    finally:
        attacker.close()
    after = netstat(world.hosts["relay"])
    assert after["TCPMinTTLDrop"] > before["TCPMinTTLDrop"]
    assert monitor.deviations == []


def test_a_prefix_flood_trips_max_prefix_and_the_session_is_torn_down(
    world: World, monitor: Monitor
) -> None:
    attacker = Attacker(world.hosts["ah2"], src=v4("ah2"), dst=v4("relay"), asn=64601)
    try:
        attacker.wait("established")
        flood = [announce(f"198.18.{i // 256}.{i % 256}/32") for i in range(MAX_PREFIXES + 50)]
        attacker.send(*flood)
        note = attacker.wait("notification")
        assert (note["code"], note["subcode"]) == (6, 1)  # Cease / Max Prefixes Reached
    finally:
        attacker.close()
    assert world.metric("teapot_lb_relay_sessions_refused_total", tenant="acme",
                        reason="max-prefix") >= 1  # fmt: skip
    assert "MaxPrefixReached" in world.relay_log()
    assert monitor.deviations == []


def test_a_tenant_flapping_ten_thousand_routes_a_second_disturbs_nobody(
    world: World, monitor: Monitor
) -> None:
    before = world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme",
                          reason="outside-allocation")  # fmt: skip
    attacker = Attacker(world.hosts["ah2"], src=v6("ah2"), dst=v6("relay"), asn=64601)
    try:
        attacker.wait("established")
        up, down = announce(BOLT_V4), announce(BOLT_V4, path=(64601, 64601))
        attacker.send(*([up, down] * 5000))  # 10,000 UPDATEs for bolt's prefix at once
        wait_for(
            lambda: world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme",
                                 reason="outside-allocation") >= before + 10_000,
            timeout=30, what="10,000 flapped routes counted",
        )  # fmt: skip
    finally:
        attacker.close()
    assert monitor.samples > 0 and monitor.deviations == []


def test_bolts_routes_stayed_in_both_fibs_throughout(monitor: Monitor) -> None:
    assert monitor.samples > 10
    assert monitor.deviations == []


def test_the_explain_relay_command_prints_the_filtered_routes_with_their_rules(
    world: World, route_attempts: dict[str, Any]
) -> None:
    teapot = str(Path(sys.executable).parent / "teapot-lb")
    out = world.hosts["relay"].run(
        teapot, "explain", "relay", "acme", "--relay-url", f"http://{v4('relay')}:7476"
    )
    line = next(ln for ln in out.splitlines() if ln.startswith("203.0.113.20/32"))
    assert "filtered by rule 3 (outside-allocation)" in line


def test_a_node_deregistered_loses_its_session_and_its_paths_at_the_routers(
    world: World, monitor: Monitor
) -> None:
    # Last in the module: ah's sessions (the route attempts' too) go with its registration.
    prefix = "2001:db8:100::b/128"
    speaker = Attacker(world.hosts["ah"], src=v6("ah"), dst=v6("relay"), asn=64601)
    try:
        speaker.wait("established")
        speaker.send(announce(prefix, next_hop=v6("ah")))
        world.wait_fib(prefix, frozenset({v6("ah")}))
        still = [n for n in REGISTERED["acme"] if n != "ah"]
        world.write_manifests(manifests(acme_doc(registered=still)))
        note = speaker.wait("notification", timeout=30)
        assert (note["code"], note["subcode"]) == (6, 3)  # Cease / Peer De-configured
        world.wait_fib(prefix, None)
        assert "SessionClosedNodeDeregistered" in world.relay_log()
    finally:
        speaker.close()
        world.write_manifests(manifests())
    assert monitor.deviations == []
