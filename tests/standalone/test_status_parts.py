"""A large status file keeps its entries encoded between writes (issue 19): what it
writes must be what encoding the whole document gives, less the parts it leaves out."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from dataclasses import replace
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.announcement import Mode, Plan
from teapot_lb.cluster import Store
from teapot_lb.speaker.node import StepResult
from teapot_lb.speaker.report import REASON_ANNOUNCING, Announcing, ServiceEvent
from teapot_lb.standalone import status_parts
from teapot_lb.standalone.assign import Assignment
from teapot_lb.standalone.directory import Snapshot
from teapot_lb.standalone.runner import Loaded, ManifestSource, StatusWriter

KEYS = tuple(f"default/s{i}" for i in range(6))
NONE: dict[str, str] = {}
IPS = ("203.0.113.1", "203.0.113.10", "203.0.113.9", "2001:db8::1", "2001:db8::a")

# One step changes one Service: its assignment, what this node announces for it (IPs and
# modes, possibly an IP another Service announces too), its failures, or removes it.
changes = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["assign", "announce", "fail", "remove", "nothing"]),
    st.lists(st.tuples(st.sampled_from(IPS), st.sampled_from([Mode.BGP, Mode.L2])), max_size=3),
)


def writer_for(tmp: Path) -> tuple[StatusWriter, ManifestSource]:
    source = ManifestSource(tmp / "manifests", Store())
    return StatusWriter("n1", tmp / "state", source, large_above=0), source


def result(
    announcing: dict[str, tuple[Announcing, ...]], failures: dict[str, dict[str, str]]
) -> StepResult:
    plan = Plan("n1", frozenset(), ())
    return StepResult(plan, Store().view(), dict(announcing), dict(failures), (), 0.0)


def without_the_left_out(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("time", "decisions")}


@settings(max_examples=200, deadline=None)
@given(st.lists(changes, min_size=1, max_size=30), st.sampled_from([0, 16, 10**9]))
def test_the_kept_parts_equal_encoding_everything(
    steps: list[tuple[Any, ...]], resort_share: int
) -> None:
    # (0: the sorted IPs always bisected; 10**9: always sorted anew)
    default, status_parts.RESORT_SHARE = status_parts.RESORT_SHARE, resort_share
    try:
        check_steps(steps)
    finally:
        status_parts.RESORT_SHARE = default


def check_steps(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        writer, source = writer_for(Path(tmp))
        assignments: dict[str, Assignment] = {}
        announcing: dict[str, tuple[Announcing, ...]] = {}
        failures: dict[str, dict[str, str]] = {}
        before: dict[str, tuple[object, ...]] = {}
        for n, (key, what, items) in enumerate(steps, 1):
            if what == "assign":
                ips = tuple(ip_address(ip) for ip, _ in items)
                assignments[key] = Assignment(
                    key, ips, "a" if ips else None, None if ips else "full"
                )
            elif what == "announce":
                announcing[key] = tuple(sorted({Announcing(ip, mode) for ip, mode in items},
                                               key=lambda a: (a.ip, a.mode.value)))  # fmt: skip
            elif what == "fail":
                failures[key] = {ip: "cannot" for ip, _ in items}
            elif what == "remove":
                for held in (assignments, announcing, failures):
                    held.pop(key, None)
            source.loaded = Loaded(Snapshot(), dict(assignments), n)
            step = result(announcing, failures)
            written = json.loads(writer.large_text(step))
            assert without_the_left_out(written) == without_the_left_out(writer.document(step))
            # Only an entry whose objects changed is encoded again (every one the first time).
            now = {
                k: (a, announcing.get(k, ()), failures.get(k, NONE)) for k, a in assignments.items()
            }
            changed = [k for k, objs in now.items() if not _same(objs, before.get(k))]
            assert writer._parts.encoded == len(changed)
            before = now


def _same(a: tuple[object, ...], b: tuple[object, ...] | None) -> bool:
    return b is not None and all(x is y for x, y in zip(a, b, strict=True))


def test_only_the_changed_entries_are_encoded_again(tmp_path: Path) -> None:
    writer, source = writer_for(tmp_path)
    assignments = {
        k: Assignment(k, (ip_address(f"203.0.113.{i}"),), "a") for i, k in enumerate(KEYS)
    }
    announcing = {k: (Announcing(str(a.ips[0]), Mode.BGP),) for k, a in assignments.items()}
    source.loaded = Loaded(Snapshot(), dict(assignments), 1)
    writer.large_text(result(announcing, {}))
    assert writer._parts.encoded == len(KEYS)
    announcing[KEYS[2]] = ()
    writer.large_text(result(announcing, {}))
    assert writer._parts.encoded == 1
    doc = json.loads(writer.large_text(result(announcing, {})))
    assert writer._parts.encoded == 0
    assert "203.0.113.2" not in doc["announcing"]["bgp"]
    assert doc["announcing"]["bgp"] == ["203.0.113.0", "203.0.113.1", "203.0.113.3",
                                        "203.0.113.4", "203.0.113.5"]  # fmt: skip


async def test_a_large_status_file_is_encoded_while_the_event_loop_goes_on(
    tmp_path: Path,
) -> None:
    # After a BGP session comes up every entry changes: encoding them all is a second at
    # 10,000 Services under load, longer than BFD (100 ms) or a hold time lets the loop stop.
    writer, source = writer_for(tmp_path)
    assignments = {
        k: Assignment(k, (ip_address(f"203.0.113.{i}"),), "a") for i, k in enumerate(KEYS)
    }
    announcing = {k: (Announcing(str(a.ips[0]), Mode.BGP),) for k, a in assignments.items()}
    source.loaded = Loaded(Snapshot(), dict(assignments), 1)
    loop_ran = threading.Event()
    encode = writer.large_text

    def encoding(step: StepResult | None, base: dict[str, Any] | None = None) -> str:
        assert loop_ran.wait(5.0), "the event loop stood still while the status was encoded"
        return encode(step, base)

    writer.large_text = encoding  # type: ignore[method-assign]
    asyncio.get_running_loop().call_later(0.01, loop_ran.set)  # (a keepalive's timer)
    step = replace(result(announcing, {}), events=tuple(
        ServiceEvent(k, False, REASON_ANNOUNCING, f"n1 announces {k}") for k in KEYS
    ))  # fmt: skip
    await writer(step)
    doc = json.loads((tmp_path / "state" / "status.json").read_text())
    assert doc["announcing"]["bgp"] == [f"203.0.113.{i}" for i in range(len(KEYS))]
    assert set(doc["services"]) == set(KEYS)
    # Every Service's Event at once (also written off the loop): each one line, in order.
    lines = (tmp_path / "state" / "events.log").read_text().splitlines()
    assert [json.loads(line)["service"] for line in lines] == list(KEYS)


async def test_a_worker_write_cancelled_at_stop_does_not_replace_the_status_written_at_stop(
    tmp_path: Path,
) -> None:
    # At stop the step is cancelled, but its worker thread goes on encoding: the status
    # written at stop ("stopped") must be the one left on disk.
    writer, source = writer_for(tmp_path)
    assignments = {k: Assignment(k, (ip_address("203.0.113.1"),), "a") for k in KEYS[:1]}
    source.loaded = Loaded(Snapshot(), assignments, 1)
    encoding, release, finished = threading.Event(), threading.Event(), threading.Event()
    encode, write_text = writer.large_text, writer._write_text

    def slow(step: StepResult | None, base: dict[str, Any] | None = None) -> str:
        if base is not None:  # (the worker's encoding, not the stop's)
            encoding.set()
            assert release.wait(5.0)
        return encode(step, base)

    def worker(step: StepResult | None, base: dict[str, Any], number: int) -> None:
        try:
            write_text(step, base, number)
        finally:
            finished.set()

    writer.large_text = slow  # type: ignore[method-assign]
    writer._write_text = worker  # type: ignore[method-assign]
    step = asyncio.ensure_future(writer(result({}, {})))
    assert await asyncio.to_thread(encoding.wait, 5.0)
    step.cancel()
    writer.stopped = True
    writer.write(None)
    release.set()
    assert await asyncio.to_thread(finished.wait, 5.0)
    doc = json.loads((tmp_path / "state" / "status.json").read_text())
    assert doc["stopped"] is True
