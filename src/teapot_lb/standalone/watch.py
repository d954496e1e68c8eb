"""The manifest watch: inotify on the manifest tree, wired to the event loop.

libc's `inotify_init1` and `inotify_add_watch` through `ctypes` (no new dependency), the
descriptor non-blocking and read from `loop.add_reader`. This file only moves bytes and
holds watch descriptors; :mod:`.inotify` parses the records and decides what each means.
The watch only *wakes* the reader of the directory: the fingerprint comparison in
:class:`~.runner.ManifestSource` stays the one judge of what changed.

Watched: the manifests' parent (the manifests appearing, going, being replaced, or — for a
single file — written), the manifest directory and each of its subdirectories but hidden
ones and the state directory (the reader reads subdirectories too).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import functools
import os
from collections.abc import Callable
from pathlib import Path

from teapot_lb.standalone.inotify import (
    DIRECTORY_MASK,
    PARENT_MASK,
    Effect,
    Mask,
    effect,
    parse_events,
)

# With inotify, the directory is still compared every few seconds: a change the watch
# cannot see (a network filesystem written by another host, a lost watch) is never missed.
RECHECK_S = 2.0
# After the first event, wait this long for the rest of a burst (an editor saving several
# files, a checkout): one reload covers them.
SETTLE_S = 0.002

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
# Room for a few hundred records per read (each is 16 bytes plus a padded name).
_READ_SIZE = 64 * 1024


class WatchUnavailable(Exception):
    """inotify cannot be used here (not Linux, ENOSYS, out of instances or watches)."""


InotifyInit = Callable[[], int]
"""Opens an inotify instance and returns its descriptor, or raises OSError."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def libc_inotify_init() -> int:
    """`inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`: the descriptor, or OSError."""
    try:
        init1 = _libc().inotify_init1
    except (OSError, AttributeError) as err:  # no libc, or a libc without inotify
        raise OSError(errno.ENOSYS, f"inotify_init1 not available: {err}") from None
    fd = int(init1(_IN_NONBLOCK | _IN_CLOEXEC))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


def _add_watch(fd: int, path: Path, mask: int) -> int:
    wd = int(_libc().inotify_add_watch(fd, os.fsencode(path), ctypes.c_uint32(mask)))
    if wd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))
    return wd


class ManifestWatch:
    """Calls ``wake()`` when something under the manifests may have changed."""

    def __init__(
        self,
        manifests: Path,
        wake: Callable[[], None],
        *,
        skip: Path | None = None,
        init: InotifyInit = libc_inotify_init,
    ) -> None:
        self.root = Path(os.path.abspath(manifests))
        self.skip = Path(os.path.abspath(skip)) if skip is not None else None
        self.wake = wake
        try:
            self.fd = init()
        except OSError as err:
            raise WatchUnavailable(f"inotify_init1: {err}") from None
        self.rescan_needed = True
        self._parent_wd: int | None = None
        self._wds: set[int] = set()
        self._rest = b""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.events_read = 0

    @property
    def watches(self) -> int:
        """How many directories are watched (the parent included)."""
        return len(self._wds)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.rescan()
        self._loop = loop
        loop.add_reader(self.fd, self._readable)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
            self._loop = None
        os.close(self.fd)

    def rescan(self) -> None:
        """Watch the parent, the manifest directory and every subdirectory (again: adding
        a watch twice keeps one; a replaced directory gets a new one). Raises
        :class:`WatchUnavailable` when the kernel refuses a watch for lack of room."""
        self.rescan_needed = False
        self._parent_wd = self._watch(self.root.parent, PARENT_MASK)
        wds = {self._parent_wd}
        if self.root.is_dir():
            # Symbolic links to directories are followed, as the reader's rglob does.
            for here, dirs, _ in os.walk(self.root, followlinks=True):
                dirs[:] = [
                    d for d in sorted(dirs) if not d.startswith(".") and not self._skipped(here, d)
                ]
                wds.add(self._watch(Path(here), DIRECTORY_MASK))
        # A directory moved away (the old copy after `mv new manifests`) keeps its watch:
        # drop it, or its events would keep waking the reader.
        for stale in self._wds - wds:
            _libc().inotify_rm_watch(self.fd, stale)
        self._wds = {wd for wd in wds if wd is not None}

    def _skipped(self, here: str, name: str) -> bool:
        return self.skip is not None and Path(here, name) == self.skip

    def _watch(self, path: Path, mask: int) -> int | None:
        try:
            return _add_watch(self.fd, path, mask)
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.ENOMEM):  # fs.inotify.max_user_watches
                raise WatchUnavailable(f"inotify_add_watch {path}: {err.strerror}") from None
            return None  # gone meanwhile (ENOENT, ENOTDIR): the next event says what came

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        events, self._rest = parse_events(self._rest + data)
        self.events_read += len(events)
        woken = False
        for event in events:
            if event.mask & Mask.IGNORED:
                if event.wd not in self._wds:
                    continue  # a watch we dropped
                self._wds.discard(event.wd)
            what = effect(event, parent_wd=self._parent_wd, root_name=self.root.name)
            if what is Effect.RESCAN:
                self.rescan_needed = True
            woken = woken or what is not Effect.NONE
        if woken:
            self.wake()
