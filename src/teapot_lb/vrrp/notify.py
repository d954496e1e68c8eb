"""Parse keepalived's notify FIFO (pure: bytes in, transitions out).

keepalived writes one line per event, e.g. ``INSTANCE "eth0-v4-vrid51" MASTER 254``;
``GROUP`` lines for sync groups, and ``MASTER_RX_LOWER_PRI`` (a master heard a
lower-priority advert, i.e. a dual master is resolving) instead of a state.
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass


class VrrpState(enum.Enum):
    MASTER = "MASTER"
    BACKUP = "BACKUP"
    FAULT = "FAULT"
    STOP = "STOP"
    DELETED = "DELETED"
    # Not a state: a master received a lower-priority advert.
    MASTER_RX_LOWER_PRI = "MASTER_RX_LOWER_PRI"
    MASTER_PRIORITY = "MASTER_PRIORITY"
    BACKUP_PRIORITY = "BACKUP_PRIORITY"

    @property
    def is_state(self) -> bool:
        return self in _STATES


_STATES = frozenset(
    {VrrpState.MASTER, VrrpState.BACKUP, VrrpState.FAULT, VrrpState.STOP, VrrpState.DELETED}
)


@dataclass(frozen=True)
class Transition:
    kind: str  # "INSTANCE" or "GROUP"
    name: str
    state: VrrpState
    priority: int | None


@dataclass(frozen=True)
class UnparsedLine:
    line: str
    reason: str


class NotifyParser:
    """Incremental line parser: :meth:`feed` bytes as they arrive, get events back."""

    MAX_LINE = 4096

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Transition | UnparsedLine]:
        self._buf += data
        events: list[Transition | UnparsedLine] = []
        while b"\n" in self._buf:
            raw, self._buf = self._buf.split(b"\n", 1)
            line = raw.decode("utf-8", "replace").strip()
            if line:
                events.append(parse_line(line))
        if len(self._buf) > self.MAX_LINE:
            events.append(UnparsedLine(self._buf[:80].decode("utf-8", "replace"), "too long"))
            self._buf = b""
        return events


def parse_line(line: str) -> Transition | UnparsedLine:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        return UnparsedLine(line, str(exc))
    if len(words) < 3 or words[0] not in ("INSTANCE", "GROUP"):
        return UnparsedLine(line, 'expected INSTANCE|GROUP "name" STATE [priority]')
    try:
        state = VrrpState(words[2])
    except ValueError:
        return UnparsedLine(line, f"unknown state {words[2]!r}")
    priority: int | None = None
    if len(words) > 3:
        try:
            priority = int(words[3])
        except ValueError:
            return UnparsedLine(line, f"bad priority {words[3]!r}")
    return Transition(kind=words[0], name=words[1], state=state, priority=priority)
