"""max-prefix through real sessions, a tenant speaker's routes judged against a limit of 8.

What it counts: by default the routes the policy accepted (BIRD's `import limit`), so a
speaker announcing junk keeps its session and its valid routes, and trips the limit only
with a ninth valid route; counting every route received (`--max-prefix-count received`,
BIRD's `receive limit`) the junk tears the session down and its valid routes leave the
routers' FIBs.

The milder actions: a speaker sends 12 of its own host routes. With `warn` the session stays
up, every route reaches both routers' FIBs and a MaxPrefixReached event is logged; with
`drop` the session stays up, the first 8 reach the FIBs and the 4 over the limit are
rejected (counted with reason max-prefix) and never advertised. One world, the relay
restarted with each setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from teapot_lb.lab.wait import wait_for

from .hijacks import announce
from .test_relay_hijack import Attacker
from .world import World, v4, world_in

LIMIT = 8
SENT = [f"203.0.113.{i}/32" for i in range(1, 13)]  # acme's own host routes, 12 of them
SPEAKER = "ah"  # a speaker in acme's node network (the hijack suite's attacker process)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world_in("maxpfx", tmp_path_factory.mktemp("relay-max-prefix")) as w:
        yield w


def restart_relay(world: World, action: str, *options: str) -> int:
    """The relay with this action (and options); returns where its log starts."""
    start = len(log(world))
    world.restart_relay("--max-prefixes", str(LIMIT), "--max-prefix-action", action, *options)
    return start


def log(world: World) -> str:
    path = world.workdir / "relay.log"
    return path.read_text() if path.exists() else ""


def flood(world: World, routes: list[str] = SENT) -> Attacker:
    speaker = Attacker(world.hosts[SPEAKER], src=v4(SPEAKER), dst=v4("relay"), asn=64601)
    speaker.wait("established")
    speaker.send(*(announce(p) for p in routes))  # one UPDATE each, in this order
    return speaker


VALID = SENT[:4]
JUNK = [f"198.18.0.{i}/32" for i in range(50)]  # bogons


def rejected(world: World, reason: str) -> float:
    return world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme", reason=reason)


def session_state(world: World) -> str | None:
    doc = world.explain("acme")
    return next((s["state"] for s in doc.get("sessions", ()) if s["address"] == v4(SPEAKER)),
                None)  # fmt: skip


def in_fibs(world: World, prefix: str) -> bool:
    return all(h == frozenset({v4(SPEAKER)}) for h in world.fib(prefix).values())


def test_warn_keeps_the_session_and_every_route_and_logs_the_event(world: World) -> None:
    start = restart_relay(world, "warn")
    speaker = flood(world)
    try:
        wait_for(lambda: all(in_fibs(world, p) for p in SENT), timeout=60,
                 what=f"all {len(SENT)} routes in both FIBs",
                 detail=lambda: str({p: world.fib(p) for p in SENT[-2:]}))  # fmt: skip
        assert session_state(world) == "Established"
        assert "MaxPrefixReached" in log(world)[start:]
        assert world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme",
                            reason="max-prefix") == 0  # fmt: skip
        assert world.metric("teapot_lb_relay_routes_accepted", tenant="acme") == len(SENT)
    finally:
        speaker.close()


def test_drop_keeps_the_session_and_rejects_only_the_excess(world: World) -> None:
    start = restart_relay(world, "drop")
    speaker = flood(world)
    try:
        wait_for(lambda: world.metric("teapot_lb_relay_routes_rejected_total", tenant="acme",
                                      reason="max-prefix") == len(SENT) - LIMIT,
                 timeout=30, what="the 4 routes over the limit rejected as max-prefix",
                 detail=world.relay_log)  # fmt: skip
        kept, excess = SENT[:LIMIT], SENT[LIMIT:]
        wait_for(lambda: all(in_fibs(world, p) for p in kept), timeout=60,
                 what=f"the first {LIMIT} routes in both FIBs")  # fmt: skip
        # Decided before the first 8 were advertised: the excess never reaches a router.
        assert {p: world.fib(p) for p in excess} == {
            p: {"rbird": None, "rfrr": None} for p in excess
        }
        assert session_state(world) == "Established"
        assert world.metric("teapot_lb_relay_routes_accepted", tenant="acme") == LIMIT
        assert "MaxPrefixReached" in log(world)[start:]
    finally:
        speaker.close()


def test_counting_accepted_routes_junk_keeps_the_session_and_a_ninth_valid_route_trips_it(
    world: World,
) -> None:
    restart_relay(world, "teardown")  # --max-prefix-count accepted: the default
    speaker = flood(world, VALID + JUNK)
    try:
        wait_for(lambda: rejected(world, "bogon") == len(JUNK), timeout=30,
                 what="the junk rejected as bogons", detail=world.relay_log)  # fmt: skip
        wait_for(lambda: all(in_fibs(world, p) for p in VALID), timeout=60,
                 what="the valid routes in both FIBs")  # fmt: skip
        assert session_state(world) == "Established"
        assert world.explain("acme")["max_prefix"] == {
            "limit": LIMIT, "counts": "accepted", "action": "teardown"
        }  # fmt: skip
        speaker.send(*(announce(p) for p in SENT[4 : LIMIT + 1]))  # valid routes 5 to 9
        note = speaker.wait("notification", timeout=60)  # generous: a loaded CI
        assert (note["code"], note["subcode"]) == (6, 1)  # Cease / Max Prefixes Reached
    finally:
        speaker.close()
    assert "more than 8 routes accepted" in world.relay_log()


def test_counting_received_routes_junk_tears_the_session_down_and_its_valid_routes_go(
    world: World,
) -> None:
    restart_relay(world, "teardown", "--max-prefix-count", "received")
    speaker = flood(world, VALID)
    try:
        wait_for(lambda: all(in_fibs(world, p) for p in VALID), timeout=60,
                 what="the valid routes in both FIBs")  # fmt: skip
        speaker.send(*(announce(p) for p in JUNK))
        note = speaker.wait("notification", timeout=60)  # generous: a loaded CI
        assert (note["code"], note["subcode"]) == (6, 1)  # Cease / Max Prefixes Reached
        for prefix in VALID:
            world.wait_fib(prefix, None)
    finally:
        speaker.close()
    assert "more than 8 routes received" in world.relay_log()
