"""Full garbage collections stay short: what survives a slow one is frozen (teapot_lb.longlived)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from teapot_lb.longlived import freeze_after_slow_full_passes


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
