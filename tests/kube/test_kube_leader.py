"""Lease leader election: one leader, takeover after a crash, prompt loss on failed renewals;
a busy leader keeps its Lease, a stalled one stops acting."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.informer import EventType, Informer
from teapot_lb.kube.leader import LeaderElector, LeadershipLost, LeaseConfig
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.resources import SERVICES, KubeObject
from teapot_lb.lab.fakeapi import FakeApiServer

LEASE_S, RENEW_S, RETRY_S = 2.0, 1.5, 0.25


def config(identity: str, **overrides: object) -> LeaseConfig:
    values: dict[str, object] = {
        "namespace": "kube-system",
        "name": "teapot-lb-controller",
        "identity": identity,
        "lease_duration_s": LEASE_S,
        "renew_deadline_s": RENEW_S,
        "retry_period_s": RETRY_S,
    }
    values.update(overrides)
    return LeaseConfig(**values)  # type: ignore[arg-type]


class Candidate:
    """An elector whose ``lead`` runs until cancelled, recording what happened."""

    def __init__(self, client: KubeClient, cfg: LeaseConfig) -> None:
        self.changes: list[bool] = []
        self.elector = LeaderElector(client, cfg, on_change=self.changes.append)
        self.leading = asyncio.Event()
        self.lead_cancelled = False
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.leading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.lead_cancelled = True
            raise

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run(self._lead))
        return self

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await self.task


@pytest.fixture
async def clients(fake_api: FakeApiServer) -> AsyncIterator[list[KubeClient]]:
    made = [await connect(fake_api.kubeconfig_path, request_timeout_s=5.0) for _ in range(2)]
    try:
        yield made
    finally:
        for c in made:
            await c.close()


def holder(fake_api: FakeApiServer) -> str:
    lease = fake_api.get("leases", "teapot-lb-controller", "kube-system")
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


async def test_two_candidates_elect_exactly_one_leader(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    a = Candidate(clients[0], config("a")).start()
    b = Candidate(clients[1], config("b")).start()
    try:
        await until(lambda: a.elector.is_leader or b.elector.is_leader, what="a leader")
        # Stay for a few lease durations: renewals keep the same single leader.
        loop = asyncio.get_running_loop()
        end = loop.time() + 2 * LEASE_S
        first = "a" if a.elector.is_leader else "b"
        while loop.time() < end:
            assert not (a.elector.is_leader and b.elector.is_leader)
            await asyncio.sleep(0.05)
        assert holder(fake_api) == first
        assert (a if first == "a" else b).elector.is_leader
        assert not (b if first == "a" else a).leading.is_set()
    finally:
        await a.stop()
        await b.stop()


async def test_standby_takes_over_within_lease_duration_after_leader_dies(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    a = Candidate(clients[0], config("a", release_on_exit=False)).start()
    await until(a.leading.is_set, what="a leads")
    b = Candidate(clients[1], config("b")).start()
    try:
        await asyncio.sleep(RETRY_S * 2)  # b has observed a's lease
        assert not b.leading.is_set()
        await a.stop()  # a crash: no release
        assert holder(fake_api) == "a"
        loop = asyncio.get_running_loop()
        died = loop.time()
        await until(b.leading.is_set, within=LEASE_S + 3 * RETRY_S + 1.0, what="b takes over")
        assert holder(fake_api) == "b"
        # b had to wait for the lease to expire (it was not released).
        assert loop.time() - died >= LEASE_S - RENEW_S
        lease = fake_api.get("leases", "teapot-lb-controller", "kube-system")
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    finally:
        await b.stop()


async def test_graceful_shutdown_releases_the_lease_for_an_immediate_takeover(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    long_lease = {"lease_duration_s": 30.0, "renew_deadline_s": 20.0}
    a = Candidate(clients[0], config("a", **long_lease)).start()
    await until(a.leading.is_set, what="a leads")
    b = Candidate(clients[1], config("b", **long_lease)).start()
    try:
        await a.stop()
        assert a.lead_cancelled and a.changes == [True, False]
        assert holder(fake_api) == ""
        # Far sooner than the 30 s lease could expire.
        await until(b.leading.is_set, within=5.0, what="b takes over after release")
    finally:
        await b.stop()


async def test_leader_whose_renewals_fail_stops_leading_by_the_renew_deadline(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    a = Candidate(clients[0], config("a")).start()
    await until(a.leading.is_set, what="a leads")
    assert a.task is not None
    loop = asyncio.get_running_loop()
    fake_api.faults.fail_for(60, path_contains="/leases")
    failing_since = loop.time()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(a.task, RENEW_S + RETRY_S + 2.0)
    # It gave up before the lease could expire for the others.
    assert loop.time() - failing_since < LEASE_S + 1.0
    assert not a.elector.is_leader
    assert a.lead_cancelled
    assert a.changes == [True, False]


async def test_hanging_renewal_does_not_extend_leadership(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    a = Candidate(clients[0], config("a")).start()
    await until(a.leading.is_set, what="a leads")
    assert a.task is not None
    fake_api.faults.delay(30, path_contains="/leases")
    with pytest.raises(LeadershipLost, match="deadline"):
        await asyncio.wait_for(a.task, RENEW_S + RETRY_S + 2.0)
    assert not a.elector.is_leader and a.lead_cancelled


async def test_is_leader_fences_writes_as_soon_as_the_renew_deadline_passes(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    a = Candidate(clients[0], config("a")).start()
    try:
        await until(a.leading.is_set, what="a leads")
        fake_api.faults.delay(30, path_contains="/leases")
        a.elector.ensure_leader()  # leading: no error
        await until(lambda: not a.elector.is_leader, within=RENEW_S + RETRY_S + 1.0, what="fence")
        with pytest.raises(LeadershipLost):
            a.elector.ensure_leader()
    finally:
        await a.stop()


def test_config_rejects_a_renew_deadline_not_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaseConfig("ns", "l", "me", lease_duration_s=2, renew_deadline_s=2, retry_period_s=1)


# A list whose handling, done in one go, would hold the loop for more than twice the
# lease's duration (the informer's first list, or a re-list after 410 Gone while leading).
OBJECTS, EVENT_COST_S = 2500, 0.002


def stall_the_loop(seconds: float) -> None:
    """Synchronous work that holds the event loop (a parse, a long collection)."""
    time.sleep(seconds)


async def test_busy_leader_keeps_its_lease_while_its_informer_handles_a_large_list(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    for i in range(OBJECTS):
        meta = {"name": f"svc-{i}", "namespace": "default"}
        fake_api.seed({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {}})
    a = Candidate(clients[0], config("a")).start()
    await until(a.leading.is_set, what="a leads")
    b = Candidate(clients[1], config("b")).start()
    handled: list[str] = []

    def slow_handler(type_: EventType, key: str, obj: KubeObject) -> None:
        stall_the_loop(EVENT_COST_S)  # the synchronous work of one object (its parse)
        handled.append(key)

    informer = Informer(clients[0], SERVICES, backoff=Backoff(0.05, 0.5))
    informer.add_handler(slow_handler)
    watching = asyncio.create_task(informer.run())
    try:
        await until(lambda: b.elector.observed_holder == "a", what="b sees a's lease")
        await asyncio.wait_for(informer.wait_synced(), 60.0)
        assert len(handled) == OBJECTS
        assert OBJECTS * EVENT_COST_S > 2 * LEASE_S  # the handling outlasted the lease
        # One term throughout: never stepped down, the standby never led.
        assert a.changes == [True] and a.elector.is_leader
        assert not b.leading.is_set() and b.changes == []
        assert holder(fake_api) == "a"
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await a.stop()
        await b.stop()


async def test_busy_leader_keeps_its_lease_through_a_batch_of_reconciles_that_write_nothing(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    # A term's first pass: every key reconciled, nothing to write, so no reconcile awaits.
    done: list[str] = []

    async def reconcile(key: str) -> None:
        stall_the_loop(EVENT_COST_S)
        done.append(key)

    loop: ReconcileLoop[str] = ReconcileLoop("batch", reconcile, workers=4)

    async def lead() -> None:
        for i in range(OBJECTS):
            loop.queue.add(f"default/svc-{i}")
        await loop.work()

    a = LeaderElector(clients[0], config("a"))
    leading = asyncio.create_task(a.run(lead))
    await until(lambda: a.is_leader, what="a leads")
    b = Candidate(clients[1], config("b")).start()
    try:
        await until(lambda: len(done) == OBJECTS, within=60.0, what="the batch reconciled")
        assert OBJECTS * EVENT_COST_S > 2 * LEASE_S  # the batch outlasted the lease
        assert a.is_leader and not leading.done()
        assert not b.leading.is_set() and b.changes == []
        assert holder(fake_api) == "a"
    finally:
        loop.queue.shut_down()
        leading.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await leading
        await b.stop()


async def test_leader_whose_loop_stalls_past_the_renew_deadline_stops_acting_at_once(
    fake_api: FakeApiServer, clients: list[KubeClient]
) -> None:
    leader_after_stall: list[bool] = []
    stall = asyncio.Event()
    elector = LeaderElector(clients[0], config("a", release_on_exit=False))

    async def stalling_lead() -> None:
        await stall.wait()
        stall_the_loop(RENEW_S + RETRY_S)  # the whole loop held: no renewal could run
        leader_after_stall.append(elector.is_leader)
        await asyncio.Event().wait()

    a = asyncio.create_task(elector.run(stalling_lead))
    await until(lambda: elector.is_leader, what="a leads")
    b = Candidate(clients[1], config("b")).start()
    try:
        await until(lambda: b.elector.observed_holder == "a", what="b sees a's lease")
        stall.set()
        with pytest.raises(LeadershipLost, match="deadline"):
            await asyncio.wait_for(a, RENEW_S + LEASE_S + 2.0)
        # Its writes were fenced the moment the stall ended, before any renewal ran.
        assert leader_after_stall == [False]
        await until(b.leading.is_set, within=LEASE_S + 3 * RETRY_S + 1.0, what="b takes over")
    finally:
        a.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await a
        await b.stop()
