"""A standalone VIP-mode runner for one node: JSON in, keepalived supervised.

    python -m teapot_lb.vrrp.agent --node n1 --state-dir /tmp/n1 --config vips.json

The JSON file is the cluster view the speaker would otherwise build from the API::

    {
      "groups": [{"name": "default/web", "interface": "eth0",
                  "vips": ["192.0.2.200"], "candidate_nodes": ["n1", "n2", "n3"],
                  "advert_interval_s": 0.1, "vrid_range": [1, 255], "unicast": false,
                  "vrid": null, "local_traffic_policy": false, "preempt": true}],
      "node_addresses": {"n1": ["192.0.2.1", "2001:db8::1"]},
      "vrids": {"<instance token>": 51},
      "local_endpoints": {"default/web": ["n1", "n2"]},
      "garp": {"master_refresh_s": 10}
    }

``vrids`` is the cluster's VRID allocation (the controller keeps it; every node must
use the same one); missing instances are allocated deterministically. The agent
re-reads the file on SIGHUP and whenever it (or the set of local interfaces)
changes, and writes ``status.json`` in the state directory on every change: the
rendered instances, their VRRP states, errors and counters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.vrrp.backend import VipBackend, VipClusterView, local_interfaces
from teapot_lb.vrrp.notify import Transition
from teapot_lb.vrrp.render import (
    DEFAULT_ADVERT_INTERVAL_S,
    VRID_MAX,
    VRID_MIN,
    GarpPolicy,
    Rendered,
    VipConfigError,
    VipGroup,
)
from teapot_lb.vrrp.supervisor import KeepalivedSupervisor


def _log() -> Any:
    return log.get("vrrp.agent")


def group_from_json(d: Mapping[str, Any]) -> VipGroup:
    lo, hi = d.get("vrid_range", (VRID_MIN, VRID_MAX))
    return VipGroup(
        name=str(d["name"]),
        interface=str(d["interface"]),
        vips=tuple(ipaddress.ip_address(v) for v in d["vips"]),
        candidate_nodes=tuple(str(n) for n in d["candidate_nodes"]),
        advert_interval_s=float(d.get("advert_interval_s", DEFAULT_ADVERT_INTERVAL_S)),
        vrid_range=(int(lo), int(hi)),
        unicast=bool(d.get("unicast", False)),
        vrid=None if d.get("vrid") is None else int(d["vrid"]),
        local_traffic_policy=bool(d.get("local_traffic_policy", False)),
        preempt=bool(d.get("preempt", True)),
    )


def input_from_json(doc: Mapping[str, Any]) -> VipClusterView:
    return VipClusterView(
        groups=tuple(group_from_json(g) for g in doc.get("groups", ())),
        node_addresses={
            str(n): tuple(ipaddress.ip_address(a) for a in addrs)
            for n, addrs in doc.get("node_addresses", {}).items()
        },
        vrids={str(k): int(v) for k, v in doc.get("vrids", {}).items()},
        local_endpoints={
            str(g): frozenset(str(n) for n in nodes)
            for g, nodes in doc.get("local_endpoints", {}).items()
        },
        garp=GarpPolicy(**doc.get("garp", {})),
    )


class Agent:
    def __init__(
        self,
        node: str,
        state_dir: Path,
        config: Path,
        binary: str,
        *,
        backoff_max_s: float = 10.0,
        stable_after_s: float = 10.0,
    ) -> None:
        self.node = node
        self.config = config
        self.status_path = state_dir / "status.json"
        self.supervisor = KeepalivedSupervisor(
            state_dir,
            binary=binary,
            on_transition=self._on_transition,
            backoff_max_s=backoff_max_s,
            stable_after_s=stable_after_s,
        )
        self.backend = VipBackend(node, self.supervisor)
        self.rendered: Rendered | None = None
        self.errors: list[str] = []
        self.generation = 0
        self.input_revision: object = None
        self._wake = asyncio.Event()
        self._done = asyncio.Event()

    def _on_transition(self, _event: Transition) -> None:
        self.write_status()

    def write_status(self) -> None:
        states = self.supervisor.states
        doc = {
            "node": self.node,
            "time": time.time(),
            "generation": self.generation,
            "input_revision": self.input_revision,
            "keepalived_pid": self.supervisor.pid,
            "instances": {
                plan.name: {
                    "vrid": plan.vrid,
                    "interface": plan.interface,
                    "priority": plan.priority,
                    "groups": list(plan.groups),
                    "vips": [str(v) for v in plan.vips],
                    "state": states[plan.name].state.value if plan.name in states else None,
                }
                for plan in (self.rendered.instances if self.rendered else ())
            },
            "masters": sorted(self.supervisor.masters()),
            "errors": self.errors,
            "counters": {
                "starts": self.supervisor.counters.starts,
                "reloads": self.supervisor.counters.reloads,
                "unexpected_exits": self.supervisor.counters.unexpected_exits,
                "dual_master_resolutions": self.supervisor.counters.dual_master_resolutions,
                "stale_vips_removed": self.supervisor.counters.stale_vips_removed,
                "transitions": dict(self.supervisor.counters.transitions),
            },
        }
        tmp = self.status_path.with_name(".status.json.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.status_path)

    async def sync_once(self) -> None:
        try:
            doc = json.loads(self.config.read_text())
            agent_input = input_from_json(doc)
        except (OSError, ValueError, KeyError, TypeError, VipConfigError) as exc:
            self.errors = [f"cannot read {self.config}: {exc}"]
            _log().error("bad input", path=str(self.config), error=str(exc))
            self.write_status()
            return
        rendered = await self.backend.apply(agent_input)
        self.rendered = rendered
        self.errors = [str(e) for e in rendered.errors]
        self.generation += 1
        self.input_revision = doc.get("revision")
        self.write_status()

    async def run(self, poll_s: float = 0.1) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self._wake.set)
        loop.add_signal_handler(signal.SIGTERM, self._done.set)
        loop.add_signal_handler(signal.SIGINT, self._done.set)
        seen: tuple[Any, ...] = ()
        try:
            while not self._done.is_set():
                try:
                    st = self.config.stat()
                    fingerprint: tuple[Any, ...] = (st.st_mtime_ns, st.st_size, st.st_ino)
                except OSError:
                    fingerprint = ()
                fingerprint += (local_interfaces(),)
                if fingerprint != seen or self._wake.is_set():
                    self._wake.clear()
                    seen = fingerprint
                    try:
                        await self.sync_once()
                    except (OSError, TimeoutError) as exc:
                        _log().error("sync failed; retrying", error=repr(exc))
                        seen = ()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll_s):
                        await self._wake.wait()
        finally:
            await self.supervisor.stop()
            self.write_status()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teapot_lb.vrrp.agent", description=__doc__)
    parser.add_argument("--node", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--keepalived", default="keepalived")
    parser.add_argument("--log-level", default="info")
    parser.add_argument(
        "--restart-backoff-max", type=float, default=10.0, help="longest restart delay (s)"
    )
    parser.add_argument(
        "--restart-stable-after",
        type=float,
        default=10.0,
        help="a keepalived that ran this long (s) before dying is restarted without delay growth",
    )
    args = parser.parse_args(argv)
    log.configure(args.log_level, json=True, component="vrrp-agent")
    agent = Agent(
        args.node,
        args.state_dir,
        args.config,
        args.keepalived,
        backoff_max_s=args.restart_backoff_max,
        stable_after_s=args.restart_stable_after,
    )
    asyncio.run(agent.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
