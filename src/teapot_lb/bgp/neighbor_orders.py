"""What a :class:`~teapot_lb.bgp.neighbor.Neighbor` asks of its I/O layer (``bgp.peer``):
connections to open, adopt, refuse, write and close, timers (:mod:`teapot_lb.timers`), and
events for the speaker. Data only: the contract between the sans-I/O neighbor and asyncio."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from teapot_lb.timers import ArmTimer, CancelTimer

from .fsm import (
    Action,
    Timer,
)


@dataclass(frozen=True, slots=True)
class Dial:
    """Open a TCP connection to the neighbor for ``link`` (replacing an attempt in flight);
    answer with `Neighbor.connection_made` or `Neighbor.connection_failed`."""

    link: int


@dataclass(frozen=True, slots=True)
class Adopt:
    """The connection being accepted (`Neighbor.accepted`) now belongs to ``link``;
    an attempt of the link's own in flight is abandoned."""

    link: int


@dataclass(frozen=True, slots=True)
class Refuse:
    """Write ``data`` (a NOTIFICATION) on the connection being accepted, then close it."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Transmit:
    link: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Close:
    """Close ``link``'s connection after what was written (a NOTIFICATION) is flushed, and
    abandon a connection attempt in flight."""

    link: int
    reason: str


@dataclass(frozen=True, slots=True)
class Release:
    """``link`` is finished: stop its timers (its connection was closed by a :class:`Close`)."""

    link: int


@dataclass(frozen=True, slots=True)
class Report:
    """An event for the speaker's ``on_event`` (the live session's only)."""

    event: Action


class NeighborTimer(enum.Enum):
    STALE = "stale"  # the restarting peer's stale routes expire (RFC 4724 §4.2)
    FLUSH = "flush"  # desired routes changed: send the difference


# A link's session timers are named (link, Timer); the neighbor's own by NeighborTimer.
TimerName: TypeAlias = tuple[int, Timer] | NeighborTimer

Order: TypeAlias = (
    Dial
    | Adopt
    | Refuse
    | Transmit
    | Close
    | Release
    | ArmTimer[TimerName]
    | CancelTimer[TimerName]
    | Report
)
