"""`teapot-lb run` after a crash opens BGP with the graceful-restart R bit (RFC 4724 §3).

Two namespaces on one veth: node n1 runs `teapot-lb run --modes bgp`; the router runs our
own BGP speaker (the ROUTER script below), which prints every OPEN's graceful-restart
flags and its Adj-RIB-In as JSON lines.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import require_root
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.speaker.run_marker import RunMarker

from .restart_lab import NODE_IP, ROUTER_IP, NodeLab

LB_IP = "203.0.113.1/32"

ROUTER = """
import asyncio, json, sys
from teapot_lb.bgp.fsm import EndOfRib, OpenReceived, SessionDown, StateChanged, State
from teapot_lb.bgp.speaker import PeerConfig, Speaker

def report(peer, action):
    doc = {}
    if isinstance(action, OpenReceived):
        gr = action.open.graceful_restart
        doc = {"event": "open", "gr": gr is not None,
               "r": bool(gr and gr.restarting),
               "f": bool(gr and gr.families and all(f.forwarding_preserved for f in gr.families))}
    elif isinstance(action, StateChanged) and State.ESTABLISHED in (action.old, action.new):
        doc = {"event": "up" if action.new == State.ESTABLISHED else "down"}
    elif isinstance(action, (EndOfRib, SessionDown)):
        doc = {"event": type(action).__name__}
    if doc:
        rib = peer.rib_in
        doc.update(routes=sorted(map(str, rib.routes)), stale=sorted(map(str, rib.stale)))
        print("EVENT", json.dumps(doc), flush=True)

async def main():
    s = Speaker(local_as=64500, router_id=sys.argv[1], listen_address=sys.argv[1],
                listen_port=179, on_event=report)
    s.add_peer(PeerConfig(sys.argv[2], 64512, passive=True, hold_time=90, restart_time=120))
    await s.start()
    print("EVENT", json.dumps({"event": "listening"}), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


class RouterLog:
    """The router's JSON lines, collected by a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        assert proc.stdout is not None
        self._out = proc.stdout
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self._out:  # the speaker's own log lines are mixed in
            if raw.startswith(b"EVENT "):
                with self._lock:
                    self.lines.append(json.loads(raw[6:]))

    def events(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [d for d in self.lines if d["event"] == name]

    def last(self) -> dict[str, Any]:
        with self._lock:
            return self.lines[-1] if self.lines else {}


class Lab(NodeLab):
    def __init__(self, topo: Topology, workdir: Path) -> None:
        super().__init__(topo, workdir, graceful_restart=True)
        proc = self.router.popen(
            [sys.executable, "-c", ROUTER, ROUTER_IP, NODE_IP],
            stdout=subprocess.PIPE,
            stderr=(workdir / "router.log").open("ab"),
        )
        self.rlog = RouterLog(proc)
        wait_for(lambda: self.rlog.events("listening"), timeout=30, what="the router to listen")

    def next_open(self) -> dict[str, Any]:
        """Start `teapot-lb run`; the router's view of its OPEN once the session is up."""
        opens, ups = len(self.rlog.events("open")), len(self.rlog.events("up"))
        self.start()
        wait_for(
            lambda: len(self.rlog.events("up")) > ups,
            timeout=30,
            what=f"the session up (log: {self.log})",
        )
        return self.rlog.events("open")[opens]


@pytest.fixture
def lab(topology: Topology, tmp_path: Path) -> Iterator[Lab]:
    require_root()
    yield Lab(topology, tmp_path)


def test_start_after_a_crash_sets_the_r_bit_and_a_clean_stop_does_not(lab: Lab) -> None:
    marker = RunMarker(lab.state).path
    first = lab.next_open()
    assert first["gr"] and not first["r"], "a first start must not claim to be a restart"
    wait_for(
        lambda: LB_IP in lab.rlog.last().get("routes", []),
        timeout=30,
        what="the route at the router",
    )
    assert marker.exists()

    assert lab.stop(signal.SIGKILL) == -signal.SIGKILL
    wait_for(
        lambda: lab.rlog.events("down"), timeout=30, what="the router to see the session go down"
    )
    # The router negotiated graceful restart: it keeps our route as stale meanwhile.
    assert lab.rlog.events("down")[-1]["stale"] == [LB_IP]

    second = lab.next_open()
    assert second["r"] and second["f"], "the OPEN after a crash must carry the R and F bits"
    # Our End-of-RIB follows the initial table: the route is fresh again, not swept.
    wait_for(lambda: lab.rlog.events("EndOfRib"), timeout=30, what="our End-of-RIB")
    eor = lab.rlog.events("EndOfRib")[0]
    assert eor["routes"] == [LB_IP] and eor["stale"] == []

    assert lab.stop(signal.SIGTERM) == 0
    assert not marker.exists(), "a graceful stop removes the marker"
    wait_for(
        lambda: len(lab.rlog.events("down")) >= 2,
        timeout=30,
        what="the session to close on SIGTERM",
    )

    third = lab.next_open()
    assert third["gr"] and not third["r"], "a start after a clean stop is not a restart"
    assert lab.stop(signal.SIGTERM) == 0
