"""Full garbage collections stay short: what survives a slow one is frozen; large freed
blocks go back to the system (teapot_lb.longlived)."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from teapot_lb.longlived import collect_young_rarely, freeze_after_slow_full_passes


class Cached:
    """Stands for a cached model: tracked by the collector, no reference cycle."""


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()  # leave the other tests a collector as they know it


def test_survivors_of_a_slow_full_collection_are_frozen(unfrozen: None) -> None:
    stop = freeze_after_slow_full_passes(slow_s=0.0)  # every full pass counts as slow
    try:
        kept = Cached()
        gc.collect(0)
        assert gc.get_freeze_count() == 0  # young collections never freeze
        gc.collect()
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(kept)
    finally:
        stop()


def test_fast_full_collections_freeze_nothing(unfrozen: None) -> None:
    stop = freeze_after_slow_full_passes(slow_s=3600.0)
    try:
        gc.collect()
        assert gc.get_freeze_count() == 0
    finally:
        stop()


def test_a_frozen_object_is_still_freed_when_dropped(unfrozen: None) -> None:
    stop = freeze_after_slow_full_passes(slow_s=0.0)
    try:
        kept = Cached()
        ref = weakref.ref(kept)
        gc.collect()
        assert gc.get_freeze_count() > 0
        del kept
        assert ref() is None  # reference counting, no collection needed
    finally:
        stop()


def test_stopping_removes_the_callback() -> None:
    before = list(gc.callbacks)
    stop = freeze_after_slow_full_passes()
    stop()
    assert gc.callbacks == before


# Run in a process of its own (the setting is process-wide): a large block freed, then a
# smaller one made and freed; how much of the second the process still holds (MB).
_KEPT_AFTER_FREE = """
import sys
from teapot_lb.longlived import release_large_blocks
print(release_large_blocks(), end=" ")
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
block = bytearray(8 << 20); del block  # glibc's threshold would rise to 8 MB here
before = rss()
block = bytearray(6 << 20); del block
print((rss() - before) // 1024)
"""


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="mallopt's threshold is glibc's (Linux)",
)
def test_a_large_block_goes_back_to_the_system_after_a_larger_one_was_freed() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _KEPT_AFTER_FREE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "True"  # the threshold was set
    assert int(out[1]) < 2, f"{out[1]} MB of a freed 6-MB block still held"


def test_young_collections_run_every_given_count_of_new_objects_until_put_back() -> None:
    before = gc.get_threshold()
    restore = collect_young_rarely(every=50_000)
    try:
        assert gc.get_threshold() == (50_000, *before[1:])
        young = gc.get_count()[0]
        kept = [Cached() for _ in range(10_000)]  # far fewer than 50,000: no young pass
        assert gc.get_count()[0] >= young + len(kept)
    finally:
        restore()
    assert gc.get_threshold() == before
