"""A Kubernetes Event a pure core asks its adapter to record (the controller's, the
Teapot book's): data only, the adapter (`kube.events`, standalone's log) writes it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event the adapter records on the object it is about."""

    type: EventType
    reason: str
    message: str
