"""Keep the garbage collector's full passes short in a process with a large, lasting heap.

CPython's full (generation 2) collection walks every tracked object and holds the GIL
while it does. A controller's cache at 100k Services is millions of objects, and one full
pass stopped its event loop for 0.5 to 0.9 s at 20k Services and 1.3 to 1.8 s at 35k (measured
under load, growing with the heap); two of them inside one Lease renewal (a GET and a PUT)
and the renew deadline passed, the leader stepped down and the next term reconciled
everything again (issue 19). A thread does not help: the collector stops every thread.

What survived a slow full pass is the cache: it is moved to the permanent generation
(`gc.freeze`), so the next full pass walks only what came since. Frozen objects are still
freed by reference counting when dropped (the cache's models hold no reference cycles);
only cyclic garbage among them is never collected, and that stays bounded: a freeze needs a
slow pass first, i.e. that much new lasting heap.

A process that builds such a heap in bursts (the relay takes 200,000 paths in a few
seconds, about six tracked objects each) also pays for the young collections: CPython runs
one every 700 new tracked objects and walks the survivors again in the middle generation,
so most of the burst is walked two or three times before the full pass freezes it. None of
those objects is part of a cycle; :func:`collect_young_rarely` makes the young passes
rare, and the young generation's cyclic garbage waits longer to be freed (it stays
bounded by the threshold).

Such a process also makes large temporary blocks over and over (a 100k-entry dict is 3.7
MB: a view's copy, a status file, a re-read manifest file). glibc maps a block above its
mmap threshold on its own and unmaps it when freed, but it raises that threshold to the
size of each mapped block freed (up to 32 MB), so after the first few such blocks they are
carved from the heap instead, and the memory around the lasting objects is never given
back: `teapot-lb run` at 100k Services held ~60 MB more after a few reloads
(docs/performance.md). :func:`release_large_blocks` fixes the threshold where it starts.
"""

from __future__ import annotations

import ctypes
import gc
import time
from collections.abc import Callable

SLOW_FULL_PASS_S = 0.05
YOUNG_PASS_EVERY = 100_000  # new tracked objects between young collections (CPython: 700)
LARGE_BLOCK = 128 * 1024  # glibc's default mmap threshold, kept fixed
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


class _FreezeAfterSlowPass:
    def __init__(self, slow_s: float) -> None:
        self.slow_s = slow_s
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self.started = time.perf_counter()
        elif time.perf_counter() - self.started >= self.slow_s:
            gc.freeze()


def freeze_after_slow_full_passes(slow_s: float = SLOW_FULL_PASS_S) -> Callable[[], None]:
    """Freeze what survives each full collection that took `slow_s` or longer; returns
    the function that stops doing so (what was frozen stays frozen)."""
    callback = _FreezeAfterSlowPass(slow_s)
    gc.callbacks.append(callback)

    def stop() -> None:
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)

    return stop


def collect_young_rarely(every: int = YOUNG_PASS_EVERY) -> Callable[[], None]:
    """Run the youngest generation's collection every `every` new tracked objects
    (the older generations' thresholds are kept); returns the function that puts the
    thresholds back."""
    before = gc.get_threshold()
    gc.set_threshold(every, *before[1:])
    return lambda: gc.set_threshold(*before)


def release_large_blocks(threshold: int = LARGE_BLOCK) -> bool:
    """Have the C allocator map each block of `threshold` bytes or more on its own and
    give it back to the system when freed, whatever was freed before (glibc's `mallopt`,
    which also stops the threshold from moving). False where it cannot (another C library):
    nothing changed. Call once, at the start of a long-running command."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


__all__ = [
    "LARGE_BLOCK",
    "SLOW_FULL_PASS_S",
    "YOUNG_PASS_EVERY",
    "collect_young_rarely",
    "freeze_after_slow_full_passes",
    "release_large_blocks",
]
