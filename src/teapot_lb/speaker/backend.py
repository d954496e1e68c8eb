"""What the node speaker asks of an announcement backend (BGP, L2, VIP; later OVN, FRR, ...).

:class:`~teapot_lb.speaker.node.NodeSpeaker` holds a list of backends and talks to each
through this one protocol only (MetalLB's `protocolHandlers`): every step it lets each
backend add what it knows to the plan's inputs, plans, hands each backend the
:class:`Step`, asks it why an announcing decision of its mode fails on this node, and on
stop lets each withdraw, in list order. The backends are built from
:data:`teapot_lb.speaker.wiring.BACKENDS`, one line per mode, each calling its module's
``build(wiring: Wiring)``.

A backend shapes its part of the plan itself (``plan.of_mode(self.mode)``) and changes only
what differs from what it holds: applying the same step twice does nothing the second time.
A step may carry the plan's `delta` (the announcements added and removed since the step
before); a backend that can applies that alone, so one changed Service costs its own
announcements. Without a delta (the first step, after a failed one, and periodically:
:data:`teapot_lb.speaker.node.RESYNC_S`) a backend compares the whole plan with what it
holds: the level-triggered resync, which must come to the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from teapot_lb.announce.announcement import Decision, Mode, Plan
from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.announce.totals import PlanDelta
from teapot_lb.cluster import ClusterView
from teapot_lb.membership.udp import DEFAULT_PORT


@dataclass(frozen=True)
class Step:
    """One step's inputs: the view planned from, the node's plan, and what the planner used
    (`options`, and its `cache`, which backends may reuse for cluster-wide questions such as
    L2 election orders)."""

    node: str
    view: ClusterView
    plan: Plan
    options: PlanOptions
    cache: PlanCache
    # What the plan changed since the step before, which every backend applied (None:
    # apply the whole plan).
    delta: PlanDelta | None = None


class Backend(Protocol):
    """One announcement mode on this node."""

    @property
    def mode(self) -> Mode:
        """The mode of the plan's announcements this backend applies."""
        ...

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        """`options` with what this backend knows and the planner reads (live speakers for
        L2, down BGP sessions for the explanations); unchanged when it knows nothing."""
        ...

    async def apply_plan(self, step: Step) -> None:
        """Hold exactly the step's announcements of :attr:`mode` (idempotent)."""
        ...

    def failure(self, decision: Decision) -> str | None:
        """Why an announcing decision of this mode does not work on this node, or None
        (reported per Service IP in the status and as an `AnnounceFailed` Event)."""
        ...

    def failure_inputs(self) -> object:
        """What :meth:`failure` answers from, as a value compared between steps (the
        errors by peer or IP): while it stays equal, an unchanged decision keeps its
        answer, so reporting looks only at the Services whose decisions changed."""
        ...

    async def withdraw(self) -> None:
        """Graceful stop: stop announcing and let the network move the traffic away now."""
        ...


@dataclass(frozen=True)
class Wiring:
    """What a backend module's ``build`` gets: who it runs for, where it keeps state,
    `notify` to call when something it watches changes (the speaker plans again), and the
    process options of the built-in backends."""

    node: str
    state_dir: Path
    notify: Callable[[], None]
    restarting: bool = False  # the previous run did not stop gracefully (RunMarker)
    bgp_port: int | None = 179
    l2_port: int = DEFAULT_PORT
    heartbeat_interval_s: float = 0.02
    # The L2 heartbeats' shared HMAC key (None: unauthenticated); never in a repr or a log.
    heartbeat_key: bytes | None = field(default=None, repr=False)
    keepalived: str = "keepalived"
