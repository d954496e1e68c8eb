"""The run marker tells a restart in the same boot from a start after a node reboot.

The marker records the kernel boot id; these tests give RunMarker a boot-id file of their
own (``boot_id_path``), so "rebooting" is rewriting that file. No root needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from teapot_lb.speaker.run_marker import RunMarker

BOOT_A = "4b0c2a53-0d9e-4a55-9a3e-6f1f3c2d7a01"
BOOT_B = "9e7d1c44-51aa-4f0b-8c6e-2a9b0e1f3d02"
REBOOT_LOG = "the node rebooted"


def marker_in(tmp_path: Path, boot_id: str) -> RunMarker:
    """A marker under tmp_path/state reading its boot id from tmp_path/boot_id."""
    boot = tmp_path / "boot_id"
    boot.write_text(boot_id + "\n")  # as the kernel writes it
    return RunMarker(tmp_path / "state", boot_id_path=boot)


def crash_in_boot(tmp_path: Path, boot_id: str) -> None:
    """What a run killed with SIGKILL in boot ``boot_id`` leaves behind."""
    marker = marker_in(tmp_path, boot_id)
    marker.begin()


def test_no_marker_is_a_fresh_start(tmp_path: Path) -> None:
    marker = marker_in(tmp_path, BOOT_A)
    assert marker.begin() is False


def test_a_marker_from_the_same_boot_means_restarting(tmp_path: Path) -> None:
    crash_in_boot(tmp_path, BOOT_A)
    marker = marker_in(tmp_path, BOOT_A)
    assert marker.begin() is True


def test_a_marker_from_an_earlier_boot_is_a_fresh_start_and_says_why(tmp_path: Path) -> None:
    crash_in_boot(tmp_path, BOOT_A)
    marker = marker_in(tmp_path, BOOT_B)  # the node rebooted
    with structlog.testing.capture_logs() as logs:
        assert marker.begin() is False
    (event,) = [e for e in logs if REBOOT_LOG in str(e["event"])]
    assert event["previous_boot_id"] == BOOT_A and event["boot_id"] == BOOT_B


def test_the_marker_records_the_current_boot_id(tmp_path: Path) -> None:
    marker = marker_in(tmp_path, BOOT_B)
    marker.begin()
    assert json.loads(marker.path.read_text())["boot_id"] == BOOT_B


def test_a_crash_after_a_reboot_is_a_restart_again(tmp_path: Path) -> None:
    """The start after a reboot rewrites the marker with the new boot id."""
    crash_in_boot(tmp_path, BOOT_A)
    marker = marker_in(tmp_path, BOOT_B)
    assert marker.begin() is False  # rebooted
    assert marker.begin() is True  # then crashed within boot B


def test_a_clean_stop_makes_the_next_start_fresh_in_the_same_boot(tmp_path: Path) -> None:
    marker = marker_in(tmp_path, BOOT_A)
    marker.begin()
    marker.end()
    assert marker.begin() is False


def test_a_pid_only_marker_from_an_older_version_still_means_restarting(tmp_path: Path) -> None:
    marker = marker_in(tmp_path, BOOT_A)
    marker.path.parent.mkdir(parents=True)
    marker.path.write_text("4242\n")
    assert marker.begin() is True


def test_without_a_readable_boot_id_a_leftover_marker_means_restarting(tmp_path: Path) -> None:
    crash_in_boot(tmp_path, BOOT_A)
    marker = RunMarker(tmp_path / "state", boot_id_path=tmp_path / "missing")
    assert marker.begin() is True


def test_by_default_the_marker_records_the_kernels_boot_id(tmp_path: Path) -> None:
    kernel = Path("/proc/sys/kernel/random/boot_id")
    if not kernel.exists():
        pytest.skip(f"{kernel} does not exist here (not Linux?)")
    marker = RunMarker(tmp_path / "state")
    marker.begin()
    assert json.loads(marker.path.read_text())["boot_id"] == kernel.read_text().strip()
