"""The supervisor's process handling, against a stand-in keepalived (no root needed).

The stand-in speaks keepalived's process interface as the supervisor uses it: it
writes its pid files, reports every instance of the config it was given on the
notify FIFO (BACKUP, then MASTER), re-reads the config on SIGHUP and exits on
SIGTERM. Real keepalived is exercised by test_keepalived_netns.py.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from teapot_lb.lab.wait import wait_for_async
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.vrrp.group import VipGroup
from teapot_lb.vrrp.notify import Transition, VrrpState
from teapot_lb.vrrp.render import Rendered, render
from teapot_lb.vrrp.supervisor import KeepalivedSupervisor

FAKE = r"""#!PYTHON
import os, re, signal, sys, time
args = sys.argv[1:]
conf = args[args.index("--use-file") + 1]
for flag in ("--pid", "--vrrp_pid"):
    open(args[args.index(flag) + 1], "w").write(str(os.getpid()))
log = os.path.join(os.path.dirname(conf), "fake.log")

def report(state):
    text = open(conf).read()
    fifo = re.search(r'vrrp_notify_fifo "([^"]+)"', text).group(1)
    with open(fifo, "w") as f:
        for name in re.findall(r"^vrrp_instance (\S+) \{", text, re.M):
            f.write(f'INSTANCE "{name}" {state} 254\n')

def on_hup(*_):
    open(log, "a").write("HUP\n")
    if not os.environ.get("FAKE_SILENT_RELOAD"):  # real keepalived: no transition on reload
        report("MASTER")

signal.signal(signal.SIGHUP, on_hup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
open(log, "a").write("START\n")
report("BACKUP")
report("MASTER")
while True:
    time.sleep(1)
"""


def groups(*vips: str) -> list[VipGroup]:
    return [
        VipGroup(
            name=f"ns/s{i}",
            interface="eth0",
            vips=(ipaddress.ip_address(v),),
            candidate_nodes=("n1", "n2"),
        )
        for i, v in enumerate(vips)
    ]


def events(state_dir: Path) -> list[str]:
    try:
        return (state_dir / "fake.log").read_text().split()
    except FileNotFoundError:
        return []


@pytest.fixture
async def supervised(tmp_path: Path) -> AsyncIterator[tuple[KeepalivedSupervisor, list[object]]]:
    fake = tmp_path / "fake-keepalived"
    fake.write_text(FAKE.replace("PYTHON", sys.executable, 1))
    fake.chmod(0o755)
    seen: list[object] = []
    removed: list[Rendered] = []

    def remove(rendered: Rendered) -> int:
        removed.append(rendered)
        return len(rendered.instances)

    sup = KeepalivedSupervisor(
        tmp_path / "state",
        binary=str(fake),
        on_transition=seen.append,
        backoff_initial_s=0.05,
        remove_addresses=remove,
    )
    seen.append(removed)
    try:
        yield sup, seen
    finally:
        await sup.stop()


def plan(sup: KeepalivedSupervisor, *vips: str) -> Rendered:
    return render("n1", groups(*vips), paths=sup.paths)


async def test_apply_starts_keepalived_and_reports_masters_from_the_fifo(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, seen = supervised
    rendered = plan(sup, "192.0.2.10")
    await sup.apply(rendered)
    (name,) = [i.name for i in rendered.instances]
    await wait_for_async(lambda: name in sup.masters(), within=10, what="MASTER reported")
    assert [str(v) for v in sup.masters()[name]] == ["192.0.2.10"]
    assert sup.states[name].state is VrrpState.MASTER
    assert [(e.name, e.state) for e in seen if isinstance(e, Transition)][:2] == [
        (name, VrrpState.BACKUP),
        (name, VrrpState.MASTER),
    ]
    assert sup.dirs.config.read_text() == rendered.text
    assert sup.counters.starts == 1


async def test_reload_only_when_the_rendered_text_changes(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, _ = supervised
    await sup.apply(plan(sup, "192.0.2.10"))
    await wait_for_async(lambda: events(sup.dirs.root) == ["START"], within=10, what="start")
    await sup.apply(plan(sup, "192.0.2.10"))
    assert sup.counters.reloads == 0
    await sup.apply(plan(sup, "192.0.2.10", "192.0.2.11"))
    await wait_for_async(
        lambda: events(sup.dirs.root) == ["START", "HUP"], within=10, what="one SIGHUP"
    )
    assert sup.counters.reloads == 1
    assert "192.0.2.11/32" in sup.dirs.config.read_text()


async def test_vips_added_by_a_reload_are_reported_without_a_new_transition(
    supervised: tuple[KeepalivedSupervisor, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SILENT_RELOAD", "1")
    sup, _ = supervised
    await sup.apply(plan(sup, "192.0.2.10"))
    (name,) = [i.name for i in plan(sup, "192.0.2.10").instances]
    await wait_for_async(lambda: name in sup.masters(), within=10, what="MASTER reported")
    await sup.apply(plan(sup, "192.0.2.10", "192.0.2.11"))
    await wait_for_async(
        lambda: events(sup.dirs.root) == ["START", "HUP"], within=10, what="one SIGHUP"
    )
    assert sorted(str(v) for v in sup.masters()[name]) == ["192.0.2.10", "192.0.2.11"]
    assert sorted(str(v) for v in sup.states[name].vips) == ["192.0.2.10", "192.0.2.11"]


async def test_a_dead_keepalived_is_cleaned_up_after_and_restarted(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, seen = supervised
    removed = seen[0]
    assert isinstance(removed, list)
    rendered = plan(sup, "192.0.2.10")
    await sup.apply(rendered)
    first = sup.pid
    assert first is not None
    await wait_for_async(lambda: bool(sup.masters()), within=10, what="MASTER")
    os.killpg(first, signal.SIGKILL)
    await wait_for_async(
        lambda: sup.counters.starts == 2 and sup.pid not in (None, first),
        within=10,
        what="restart",
    )
    assert sup.counters.unexpected_exits == 1
    assert removed == [rendered]  # the VIPs it held were removed before the restart
    stops = [e for e in seen if isinstance(e, Transition) and e.state is VrrpState.STOP]
    assert len(stops) == 1
    await wait_for_async(lambda: bool(sup.masters()), within=10, what="MASTER again")


async def test_stop_terminates_keepalived(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, _ = supervised
    await sup.apply(plan(sup, "192.0.2.10"))
    pid = sup.pid
    assert pid is not None
    await sup.stop()
    assert sup.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert sup.states == {}


async def test_an_empty_plan_stops_keepalived(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, _ = supervised
    await sup.apply(plan(sup, "192.0.2.10"))
    assert sup.pid is not None
    await sup.apply(render("n3", groups("192.0.2.10"), paths=sup.paths))  # not a candidate
    await wait_for_async(lambda: sup.pid is None, within=10, what="keepalived stopped")
    assert sup.counters.unexpected_exits == 0


async def test_track_files_hold_zero_for_ok_and_one_for_fault(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, _ = supervised
    track = sup.dirs.track_dir / "ns_local"
    sup.set_track(track, ok=False)
    assert track.read_text() == "1\n"
    sup.set_track(track, ok=True)
    assert track.read_text() == "0\n"


async def test_backend_writes_track_files_and_endpoint_changes_do_not_reload(
    supervised: tuple[KeepalivedSupervisor, list[object]],
) -> None:
    sup, _ = supervised
    local = VipGroup(
        name="ns/local",
        interface="eth0",
        vips=(ipaddress.ip_address("192.0.2.20"),),
        candidate_nodes=("n1", "n2"),
        local_traffic_policy=True,
    )
    backend = VIPBackend("n1", sup.dirs.root / "vip")
    backend.supervisor = sup  # the one running the fake keepalived
    await backend.apply([local], {}, ["eth0"], local={"192.0.2.20": frozenset({"n1"})})
    assert backend.rendered is not None
    (plan_,) = backend.rendered.instances
    assert plan_.track_file is not None
    track = sup.dirs.track_dir / plan_.track_file.name
    assert track.read_text() == "0\n"
    await backend.apply([local], {}, ["eth0"], local={"192.0.2.20": frozenset({"n2"})})
    assert track.read_text() == "1\n"
    assert sup.counters.reloads == 0 and sup.counters.starts == 1
