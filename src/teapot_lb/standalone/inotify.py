"""inotify's wire format and what a manifest watch makes of it (pure: bytes in, events out).

The kernel hands `read()` a run of `struct inotify_event` records (inotify(7)): `int wd;
uint32_t mask, cookie, len; char name[len]` in native byte order, `name` NUL-padded. The
adapter (:mod:`.watch`) only reads bytes and hands them here; what a record means for the
manifest directory — reload, look for new subdirectories, ignore — is decided here too.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

_HEADER = struct.Struct("=iIII")


class Mask(enum.IntFlag):
    """The `IN_*` bits we use (linux/inotify.h)."""

    ATTRIB = 0x00000004
    CLOSE_WRITE = 0x00000008
    MOVED_FROM = 0x00000040
    MOVED_TO = 0x00000080
    CREATE = 0x00000100
    DELETE = 0x00000200
    DELETE_SELF = 0x00000400
    MOVE_SELF = 0x00000800
    Q_OVERFLOW = 0x00004000
    IGNORED = 0x00008000
    ONLYDIR = 0x01000000
    ISDIR = 0x40000000


# What a manifest directory (and each subdirectory) is watched for. No IN_MODIFY: a file
# being written in place is read at IN_CLOSE_WRITE, once, not at every write().
DIRECTORY_MASK = (
    Mask.CREATE
    | Mask.MOVED_TO
    | Mask.MOVED_FROM
    | Mask.CLOSE_WRITE
    | Mask.DELETE
    | Mask.DELETE_SELF
    | Mask.MOVE_SELF
    | Mask.ATTRIB
)
# The manifests' parent, for the manifests themselves appearing, going or being replaced
# (a checkout, `mv new manifests`), and for a single manifest file written in place.
PARENT_MASK = (
    Mask.CREATE
    | Mask.MOVED_TO
    | Mask.MOVED_FROM
    | Mask.CLOSE_WRITE
    | Mask.DELETE
    | Mask.ATTRIB
    | Mask.ONLYDIR
)


@dataclass(frozen=True)
class InotifyEvent:
    wd: int  # -1 for IN_Q_OVERFLOW
    mask: Mask
    cookie: int
    name: str  # "" when the event is about the watched directory itself


def parse_events(data: bytes) -> tuple[list[InotifyEvent], bytes]:
    """The complete records at the start of ``data``, and the bytes of an incomplete last
    one (to be prepended to the next read; the kernel never splits a record, but a parser
    that cannot be confused by one costs nothing)."""
    events: list[InotifyEvent] = []
    at = 0
    while len(data) - at >= _HEADER.size:
        wd, mask, cookie, length = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + length
        if end > len(data):
            break
        raw = data[at + _HEADER.size : end].split(b"\0", 1)[0]
        name = raw.decode("utf-8", "surrogateescape")
        events.append(InotifyEvent(wd, Mask(mask), cookie, name))
        at = end
    return events, data[at:]


class Effect(enum.Enum):
    """What one event asks of the manifest watch."""

    NONE = "none"  # nothing a reload would see (a hidden file, a file only created)
    RELOAD = "reload"  # re-read (the fingerprint decides whether anything changed)
    RESCAN = "rescan"  # re-read, and walk the tree again for directories to watch


def effect(event: InotifyEvent, *, parent_wd: int | None, root_name: str) -> Effect:
    """What ``event`` means for manifests at ``root_name`` in the directory watched as
    ``parent_wd`` (every other watch is the manifest tree itself)."""
    mask = event.mask
    if mask & Mask.Q_OVERFLOW:  # events were lost: trust nothing, look at everything
        return Effect.RESCAN
    if mask & (Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.IGNORED):
        return Effect.RESCAN  # a watched directory went (the kernel drops its watch)
    if event.wd == parent_wd:
        if event.name != root_name:
            return Effect.NONE
        # The manifests appeared, went or were replaced: the tree's watches are stale.
        return Effect.RESCAN if mask & (Mask.CREATE | Mask.MOVED_TO | Mask.ISDIR) else Effect.RELOAD
    if event.name.startswith("."):
        # Editor swap files, `.state/`, temporary files before their rename: nothing the
        # reader reads. But a hidden entry renamed in may be what the visible files point
        # at: a Kubernetes ConfigMap volume swaps its `..data` symlink to publish an update.
        hidden_link_swap = mask & Mask.MOVED_TO and not mask & Mask.ISDIR
        return Effect.RELOAD if hidden_link_swap else Effect.NONE
    if mask & Mask.ISDIR:
        # A subdirectory came or went: watch it (its files may be there already).
        return Effect.RESCAN if mask & (Mask.CREATE | Mask.MOVED_TO) else Effect.RELOAD
    if mask & Mask.CREATE and not mask & Mask.MOVED_TO:
        # A new file is read at its IN_CLOSE_WRITE, not half-written now.
        return Effect.NONE
    return Effect.RELOAD
