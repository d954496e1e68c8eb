"""OVN gateways for the BGP plan: where OVN's gateway ports are, as a planner input.

With ``--ovn-sb``, the speaker follows the OVN Southbound (:class:`~teapot_lb.ovn.sbdb.
SouthboundWatch`) and puts what it says into :attr:`PlanOptions.ovn_gateways`: a pool that
an OVNAdvertisement and a BGPAdvertisement both select is then announced only from the node
whose chassis holds the gateway port (docs/ovn.md, "Reachability from outside"). A moved
port plans again at once (`notify`). It follows the backend protocol so the speaker runs it
like the others; it announces nothing itself (its :attr:`mode` is BGP: it only narrows
BGP's plan).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from teapot_lb.announce.announcement import Decision, Mode
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.ovn.gateways import Gateways
from teapot_lb.ovn.nbdb import Connection
from teapot_lb.ovn.sbdb import SouthboundWatch
from teapot_lb.speaker.backend import Step, Wiring


class OVNGateways:
    """Feeds the Southbound's gateway ports into the plan (announces nothing itself)."""

    mode = Mode.BGP

    def __init__(self, watch: SouthboundWatch) -> None:
        self.watch = watch

    @property
    def gateways(self) -> Gateways:
        return self.watch.latest

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        return replace(options, ovn_gateways=self.watch.latest)

    async def apply_plan(self, step: Step) -> None:
        return None

    def failure(self, decision: Decision) -> str | None:
        return None

    def failure_inputs(self) -> object:
        return None

    async def withdraw(self) -> None:
        self.watch.stop()


def build(wiring: Wiring, remote: str) -> OVNGateways:
    """Follow the Southbound at `remote` (``unix:PATH`` or ``tcp:HOST:PORT``); a change
    calls `wiring.notify` from the loop that builds it."""
    loop = asyncio.get_running_loop()
    notify = wiring.notify

    def changed(_: Gateways) -> None:
        loop.call_soon_threadsafe(notify)

    watch = SouthboundWatch(Connection(remote), changed)
    watch.start()
    return OVNGateways(watch)
