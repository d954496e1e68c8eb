"""The heartbeat key: read from --heartbeat-key-file, refused with a reason, wired to the
membership, and forged heartbeats counted and reported by source over real UDP."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import click
import pytest
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from teapot_lb.cli.run import RunConfig, run
from teapot_lb.cli.speaker import speaker as speaker_command
from teapot_lb.cluster import Store
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.membership.core import Membership, Timing
from teapot_lb.membership.key import KeyFileError, read_key_file
from teapot_lb.membership.udp import UdpHeartbeats
from teapot_lb.speaker.metrics import speaker_registry
from teapot_lb.speaker.wiring import build_speaker

KEY = b"0123456789abcdef-shared"


def key_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "secretkey"
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("content", "key"),
    [(KEY, KEY), (KEY + b"\n", KEY), (KEY + b"\r\n", KEY), (KEY + b"\n\n", KEY + b"\n")],
)
def test_the_key_is_the_file_less_one_trailing_newline(
    tmp_path: Path, content: bytes, key: bytes
) -> None:
    assert read_key_file(key_file(tmp_path, content)) == key


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"", "is empty"), (b"\n", "is empty"), (b"short-key\n", "is 9 bytes; at least 16")],
)
def test_an_empty_or_short_key_is_refused_naming_the_file(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = key_file(tmp_path, content)
    with pytest.raises(KeyFileError, match=why) as err:
        read_key_file(path)
    assert str(path) in str(err.value)


def test_a_missing_key_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot read the heartbeat key"):
        read_key_file(tmp_path / "absent")


@pytest.mark.parametrize("command", [run, speaker_command], ids=["run", "speaker"])
def test_both_commands_refuse_a_bad_key_file_with_a_usage_error(
    tmp_path: Path, command: click.Command
) -> None:
    path = key_file(tmp_path, b"tiny")
    args = ["--node", "n1", "--heartbeat-key-file", str(path)]
    if command is run:
        args += ["--manifests", str(tmp_path)]
    with pytest.raises(click.BadParameter) as err:
        command.make_context(command.name or "", args)
    message = err.value.format_message()
    assert "--heartbeat-key-file" in message and str(path) in message
    assert "4 bytes; at least 16" in message


@pytest.mark.parametrize("command", [run, speaker_command], ids=["run", "speaker"])
def test_both_commands_read_the_key_file(tmp_path: Path, command: click.Command) -> None:
    args = ["--node", "n1", "--heartbeat-key-file", str(key_file(tmp_path, KEY + b"\n"))]
    if command is run:
        args += ["--manifests", str(tmp_path)]
    assert command.make_context(command.name or "", args).params["heartbeat_key"] == KEY


def test_the_key_reaches_the_l2_membership_and_never_a_repr(tmp_path: Path) -> None:
    config = RunConfig(
        manifests=tmp_path, node="n1", state_dir=tmp_path, modes=("l2",), heartbeat_key=KEY
    )
    speaker = build_speaker(config, Store())
    assert speaker.l2 is not None and speaker.l2.membership.key == KEY
    assert KEY.decode() not in repr(config)
    unkeyed = build_speaker(RunConfig(manifests=tmp_path, node="n1", state_dir=tmp_path), Store())
    assert unkeyed.l2 is not None and unkeyed.l2.membership.key is None


async def test_forged_heartbeats_are_counted_and_logged_once_per_source(tmp_path: Path) -> None:
    """Over loopback UDP: a node with another key is never a member, its heartbeats are
    counted, and the warning names its address once (rate-limited), not 50 times a second."""
    port = random.randint(20000, 40000)
    timing = Timing(interval=0.01)
    ours = Membership("a", 1, timing=timing, key=KEY)
    theirs = Membership("b", 1, timing=timing, key=b"another-key-of-16-bytes")
    a = UdpHeartbeats(ours, ["127.0.0.3"], on_change=lambda _: None, port=port, bind="127.0.0.2")
    b = UdpHeartbeats(theirs, ["127.0.0.2"], on_change=lambda _: None, port=port, bind="127.0.0.3")
    tasks = [asyncio.create_task(h.run()) for h in (a, b)]
    try:
        with capture_logs() as logs:
            await wait_for_async(
                lambda: ours.counters.unauthenticated >= 10, within=5, what="10 forged beats"
            )
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        a.close()
        b.close()
    assert ours.alive() == {"a"} and ours.counters.received == 0
    warnings = [r for r in logs if r["event"] == "heartbeat_rejected" and r["node"] == "a"]
    assert len(warnings) == 1, warnings
    assert warnings[0]["source"] == "127.0.0.3" and warnings[0]["log_level"] == "warning"
    assert warnings[0]["reason"] == "heartbeat authentication tag mismatch"


async def test_the_speaker_exports_the_heartbeat_counters(tmp_path: Path) -> None:
    config = RunConfig(
        manifests=tmp_path, node="n1", state_dir=tmp_path, modes=("l2",), heartbeat_key=KEY
    )
    speaker = build_speaker(config, Store())
    assert speaker.l2 is not None
    counters = speaker.l2.membership.counters
    counters.unauthenticated, counters.rejected = 3, 4
    text = generate_latest(speaker_registry(speaker)).decode()
    assert "teapot_lb_speaker_l2_heartbeats_unauthenticated_total 3.0" in text
    assert "teapot_lb_speaker_l2_heartbeats_rejected_total 4.0" in text
    assert "teapot_lb_speaker_l2_heartbeats_received_total 0.0" in text
