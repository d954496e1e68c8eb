"""The work queue: deduplication, one worker per key, rate-limited requeues."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Hashable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
from teapot_lb.kube.reconciler import ReconcileLoop
from teapot_lb.kube.workqueue import QueueShutDown, WorkQueue


async def test_a_key_added_many_times_is_queued_once() -> None:
    q = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_key_added_while_processing_waits_for_done() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    assert len(q) == 0  # not handed to a second worker
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"


async def test_waiting_worker_wakes_on_add() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")
    assert await asyncio.wait_for(getter, 5) == "a"


async def test_rate_limited_requeue_delays_grow_and_forget_resets() -> None:
    q = WorkQueue(base_delay_s=0.01, max_delay_s=0.04)
    delays = [q.add_rate_limited("a") for _ in range(4)]
    assert delays == [0.01, 0.02, 0.04, 0.04]
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    await until(lambda: len(q) == 1, what="delayed key queued")


async def test_add_after_keeps_the_earliest_time() -> None:
    q = WorkQueue()
    q.add_after("a", 60)
    q.add_after("a", 0.01)
    await until(lambda: len(q) == 1, within=5, what="earlier delay wins")
    q.shut_down()


async def test_shut_down_wakes_workers() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(getter, 5)


def test_backoff_grows_caps_and_jitters_within_bounds() -> None:
    low = Backoff(1.0, 8.0, jitter=0.5, rand=lambda: 0.0)
    assert [low.next() for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    high = Backoff(1.0, 8.0, jitter=0.5, rand=lambda: 1.0)
    assert [high.next() for _ in range(2)] == [1.5, 3.0]
    high.reset()
    assert high.next() == 1.5


# --- fairness between groups (a key's tenant) ---------------------------------------------


def by_tenant(key: str) -> str:
    return key.partition("/")[0]


async def drain(q: WorkQueue[str]) -> list[str]:
    taken = []
    while len(q):
        key = await q.get()
        q.done(key)
        taken.append(key)
    return taken


async def test_without_a_group_keys_are_taken_first_in_first_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("noisy/1", "noisy/2", "quiet/1", "noisy/3"):
        q.add(key)
    assert await drain(q) == ["noisy/1", "noisy/2", "quiet/1", "noisy/3"]


async def test_groups_take_turns_and_keep_their_own_order() -> None:
    q: WorkQueue[str] = WorkQueue(group=by_tenant)
    for i in range(1, 5):
        q.add(f"noisy/{i}")
    q.add("quiet/1")
    q.add("quiet/2")
    assert await drain(q) == ["noisy/1", "quiet/1", "noisy/2", "quiet/2", "noisy/3", "noisy/4"]


async def test_a_flooding_group_is_deferred_and_its_repeats_coalesced() -> None:
    deferred: Counter[Hashable] = Counter()
    coalesced: Counter[Hashable] = Counter()
    q: WorkQueue[str] = WorkQueue(
        group=by_tenant,
        on_deferred=lambda g: deferred.update([g]),
        on_coalesced=lambda g: coalesced.update([g]),
    )
    for _ in range(3):
        for i in range(100):
            q.add(f"noisy/{i}")
    q.add("quiet/1")
    assert len(q) == 101
    assert coalesced == {"noisy": 200}
    assert await q.get() == "noisy/0"
    assert await q.get() == "quiet/1"  # before the 99 older keys of noisy's
    assert deferred == {"noisy": 1}
    assert [await q.get() for _ in range(99)] == [f"noisy/{i}" for i in range(1, 100)]
    assert deferred == {"noisy": 1}  # nobody else waited


GROUPS = ["a", "b", "c", "d"]
Op = tuple[str, str]  # ("add", key) | ("take", "") | ("done", "")


FLOOD_THEN_ONE: list[Op] = [*(("add", f"b/{i}") for i in range(6)), ("add", "a/1"),
                             *(("take", "") for _ in range(7))]  # fmt: skip


@example(FLOOD_THEN_ONE)
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.sampled_from(GROUPS).flatmap(
                    lambda g: st.integers(0, 20).map(lambda n: f"{g}/{n}")
                ),
            ),
            st.tuples(st.sampled_from(["take", "done"]), st.just("")),
        ),
        max_size=200,
    )
)
def test_no_key_is_lost_or_queued_twice_and_a_group_waits_at_most_one_round(
    ops: list[Op],
) -> None:
    """Adds, takes and dones interleaved, against a model: the queue holds exactly the keys
    added since they were last taken (each once, a key being processed not handed out
    again), every one of them is taken in the end, and a group with keys queued sees at
    most one key of each other group taken before its own next one."""

    async def run() -> None:
        q: WorkQueue[str] = WorkQueue(group=by_tenant)
        dirty: set[str] = set()
        processing: list[str] = []
        waited = dict.fromkeys(GROUPS, 0)  # other groups' takes since this group's last

        def waiting() -> set[str]:
            return {by_tenant(k) for k in dirty - set(processing)}

        for op, key in ops:
            before = waiting()
            if op == "add":
                q.add(key)
                dirty.add(key)
            elif op == "take" and len(q):
                got = await q.get()
                assert got in dirty and got not in processing
                dirty.discard(got)
                processing.append(got)
                for group in GROUPS:
                    waited[group] = 0 if group == by_tenant(got) else waited[group] + 1
            elif op == "done" and processing:
                q.done(processing.pop(0))
            assert len(q) == len(dirty - set(processing))
            for group in waiting():
                if group not in before:
                    waited[group] = 0  # queued from now
                assert waited[group] <= len(GROUPS) - 1
        for key in processing:
            q.done(key)
        taken = await drain(q)
        assert sorted(taken) == sorted(dirty)

    asyncio.run(run())


async def test_a_reconcile_loop_serves_a_quiet_groups_key_before_a_floods_backlog() -> None:
    """One worker held on a noisy key while 50 more noisy keys and then a quiet one are
    queued: once released, the quiet key waits for one noisy key (the group's turn came
    first), not for fifty."""
    gate = asyncio.Event()
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)
        if key == "noisy/0":
            await gate.wait()

    loop = ReconcileLoop("fair", reconcile, workers=1, queue=WorkQueue(group=by_tenant))
    loop.queue.add("noisy/0")
    working = asyncio.create_task(loop.work())
    try:
        await until(lambda: seen == ["noisy/0"], what="the noisy key held")
        for i in range(1, 51):
            loop.queue.add(f"noisy/{i}")
        loop.queue.add("quiet/1")
        gate.set()
        await until(lambda: len(seen) == 52, what="every key reconciled")
        assert seen[:4] == ["noisy/0", "noisy/1", "quiet/1", "noisy/2"]
    finally:
        loop.queue.shut_down()
        await working
