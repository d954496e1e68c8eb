"""The backend table: --modes picks backends by name, in the table's order."""

from __future__ import annotations

from pathlib import Path

from teapot_lb.announce.plan import Mode
from teapot_lb.cli.run import RunConfig
from teapot_lb.cluster import Store
from teapot_lb.speaker.bgp_backend import BGPBackend
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
