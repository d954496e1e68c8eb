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
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

SLOW_FULL_PASS_S = 0.05


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


__all__ = ["SLOW_FULL_PASS_S", "freeze_after_slow_full_passes"]
