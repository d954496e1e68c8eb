"""The backends a node speaker can run, one line each, and the speaker built from them.

A new backend (OVN, a gateway, FRR) is one module defining a class that follows
:class:`~teapot_lb.speaker.backend.Backend` plus a ``build(wiring)`` function, and one line
in :data:`BACKENDS`. ``--modes`` accepts the names of :data:`BACKENDS`; the speaker runs
and stops the chosen backends in the order of this table (BGP routes are withdrawn first,
then L2 ownership is released, then keepalived stops).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from teapot_lb.announce.plan import PlanOptions
from teapot_lb.cluster import Store
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.speaker import bgp_backend, l2_backend, vip_backend
from teapot_lb.speaker.backend import Backend, Wiring
from teapot_lb.speaker.node import DEBOUNCE_S, NodeSpeaker

BACKENDS: Mapping[str, Callable[[Wiring], Backend]] = {
    "bgp": bgp_backend.build,
    "l2": l2_backend.build,
    "vip": vip_backend.build,
}
MODES = tuple(BACKENDS)


class SpeakerConfig(Protocol):
    """What :func:`build_speaker` reads of a process configuration (`RunConfig`)."""

    @property
    def node(self) -> str: ...

    @property
    def modes(self) -> tuple[str, ...]: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def bgp_port(self) -> int | None: ...

    @property
    def l2_port(self) -> int: ...

    @property
    def heartbeat_interval_s(self) -> float: ...

    @property
    def heartbeat_key(self) -> bytes | None: ...

    @property
    def keepalived(self) -> str: ...

    @property
    def controller(self) -> ControllerOptions: ...

    @property
    def ovn_sb(self) -> str | None: ...


def build_speaker(
    config: SpeakerConfig,
    store: Store,
    *,
    restarting: bool = False,
    debounce_s: float = DEBOUNCE_S,
) -> NodeSpeaker:
    """The node speaker with the backends of the enabled modes (`run` and `speaker`).

    ``restarting``: the previous run did not stop gracefully (see
    :class:`~teapot_lb.speaker.run_marker.RunMarker`). ``debounce_s``: how long a trigger
    waits for others before a step (see :class:`~teapot_lb.speaker.node.NodeSpeaker`)."""
    options = PlanOptions(
        load_balancer_class=config.controller.load_balancer_class,
        handle_unclassed=not config.controller.class_only,
    )
    speaker = NodeSpeaker(config.node, store, options=options, debounce_s=debounce_s)
    wiring = Wiring(
        node=config.node,
        state_dir=config.state_dir,
        notify=speaker.notify,
        restarting=restarting,
        bgp_port=config.bgp_port,
        l2_port=config.l2_port,
        heartbeat_interval_s=config.heartbeat_interval_s,
        heartbeat_key=config.heartbeat_key,
        keepalived=config.keepalived,
    )
    speaker.backends = [build(wiring) for mode, build in BACKENDS.items() if mode in config.modes]
    if config.ovn_sb:  # must be built inside the running loop (it notifies from a thread)
        # Only here: the OVSDB library loads only for a speaker that reads OVN.
        from teapot_lb.speaker import ovn_gateways

        speaker.backends.append(ovn_gateways.build(wiring, config.ovn_sb))
    return speaker
