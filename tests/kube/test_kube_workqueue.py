"""The work queue: deduplication, one worker per key, rate-limited requeues."""

from __future__ import annotations

import asyncio

import pytest

from fakeapi.wait import until
from teapot_lb.kube.backoff import Backoff
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
