"""The backend table: --modes picks backends by name, in the table's order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from teapot_lb.announce.announcement import Mode
from teapot_lb.cli.run import RunConfig
from teapot_lb.cluster import Store
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.node import DEBOUNCE_S
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.speaker.wiring import BACKENDS, MODES, build_speaker


def config(tmp_path: Path, modes: tuple[str, ...]) -> RunConfig:
    return RunConfig(manifests=tmp_path, node="n1", state_dir=tmp_path / "state", modes=modes)


def test_every_mode_name_is_a_line_of_the_backend_table() -> None:
    assert MODES == tuple(BACKENDS) == ("bgp", "l2", "vip")


def test_the_speaker_runs_the_chosen_backends_in_table_order(tmp_path: Path) -> None:
    speaker = build_speaker(config(tmp_path, ("vip", "bgp")), Store())
    assert [type(b) for b in speaker.backends] == [BGPBackend, VIPBackend]
    assert [b.mode for b in speaker.backends] == [Mode.BGP, Mode.VIP]
    assert speaker.l2 is None and isinstance(speaker.vip, VIPBackend)


async def test_without_debounce_triggers_of_one_loop_turn_are_still_one_step(
    tmp_path: Path,
) -> None:
    """`teapot-lb run` steps at once (its manifest watch already merges bursts); membership,
    BGP and keepalived triggers raised together still make one step, not three."""
    speaker = build_speaker(config(tmp_path, ()), Store(), debounce_s=0.0)
    task = asyncio.create_task(speaker.run())
    try:
        for _ in range(3):
            speaker.notify()
        await wait_for_async(lambda: speaker.stats.steps, within=5, what="a step")
        for _ in range(20):  # loop turns in which a wrong second step would have run
            await asyncio.sleep(0)
        assert speaker.stats.steps == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_kubernetes_speaker_keeps_its_debounce(tmp_path: Path) -> None:
    """Informer events arrive one object at a time: they wait a little for each other."""
    assert build_speaker(config(tmp_path, ()), Store()).debounce_s == DEBOUNCE_S > 0
