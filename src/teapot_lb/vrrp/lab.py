"""A VIP-mode lab: N node namespaces and a client on one bridge, agents driving keepalived.

Used by the namespace tests and ``bench/vip_failover.py``. Each node runs
``python -m teapot_lb.vrrp.agent`` (render + supervise keepalived) and a
"who am I" TCP server; the client runs the connect prober. The lab plays the
controller's part for VRIDs: it keeps the allocation and writes it into the
agents' input, so every node uses the same VRIDs across changes.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from teapot_lb.netlab import Host, Topology
from teapot_lb.vrrp.agent import input_from_json
from teapot_lb.vrrp.probe import Attempt, parse_attempts
from teapot_lb.vrrp.render import allocate_vrids, group_instances

T = TypeVar("T")

PORT = 7000


class LabTimeout(AssertionError):
    """A condition the lab waited for did not happen before the deadline."""


def wait_for(
    check: Callable[[], T | None], *, timeout_s: float, what: str, interval_s: float = 0.02
) -> T:
    """Poll ``check`` until it returns something other than None/False."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = check()
        if last is not None and last is not False:
            return last
        if time.monotonic() > deadline:
            raise LabTimeout(f"timed out after {timeout_s:.1f}s waiting for {what}")
        time.sleep(interval_s)


class VipLab:
    def __init__(
        self,
        topo: Topology,
        workdir: Path,
        *,
        nodes: Sequence[str] = ("n1", "n2", "n3"),
        python: str = sys.executable,
        keepalived: str = "keepalived",
        agent_args: Sequence[str] = (),
    ) -> None:
        self.agent_args = tuple(agent_args)
        self.topo = topo
        self.workdir = workdir
        self.python = python
        self.keepalived = keepalived
        self.node_names = tuple(nodes)
        self.nodes: dict[str, Host] = {}
        self.ports: dict[str, str] = {}  # node -> its port on the switch
        self.switch: Host | None = None
        self.addresses: dict[str, list[str]] = {}
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self.config_path = workdir / "vips.json"
        self.revision = 0
        self.vrids: dict[str, int] = {}
        self.client: Host | None = None
        self.probe_out = workdir / "probe.jsonl"
        self._probe_offset = 0
        self._attempts: list[Attempt] = []
        workdir.mkdir(parents=True, exist_ok=True)

    # ----------------------------------------------------------------- build

    def build(self) -> VipLab:
        sw = self.switch = self.topo.add_switch("sw")
        for i, name in enumerate(self.node_names, start=1):
            host = self.topo.add_host(name)
            addrs = [f"192.0.2.{i}/24", f"2001:db8::{i}/64"]
            self.ports[name] = self.topo.connect(host, sw, addrs=addrs)
            self.nodes[name] = host
            self.addresses[name] = [a.split("/")[0] for a in addrs]
        self.client = self.topo.add_host("client")
        self.topo.connect(self.client, sw, addrs=["192.0.2.100/24", "2001:db8::100/64"])
        return self

    def state_dir(self, node: str) -> Path:
        return self.workdir / node

    def start(self, groups: Sequence[Mapping[str, Any]], **kw: Any) -> None:
        """Write the input, start servers and agents, wait until every agent applied it."""
        self.write_config(groups, wait=False, **kw)
        for name, host in self.nodes.items():
            host.popen(
                [self.python, "-m", "teapot_lb.vrrp.probe", "serve", "--name", name],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.start_agent(name)
        self.wait_applied()

    def start_agent(self, name: str) -> None:
        logf = (self.workdir / f"agent-{name}.log").open("ab")
        self.agents[name] = self.nodes[name].popen(
            [
                self.python,
                "-m",
                "teapot_lb.vrrp.agent",
                "--node",
                name,
                "--state-dir",
                str(self.state_dir(name)),
                "--config",
                str(self.config_path),
                "--keepalived",
                self.keepalived,
                *self.agent_args,
            ],
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
        logf.close()

    # ----------------------------------------------------------------- input

    def write_config(
        self,
        groups: Sequence[Mapping[str, Any]],
        *,
        local_endpoints: Mapping[str, Sequence[str]] | None = None,
        garp: Mapping[str, Any] | None = None,
        wait: bool = True,
        timeout_s: float = 20.0,
    ) -> int:
        """Write a new input revision (atomically); by default wait until all applied it."""
        self.revision += 1
        doc: dict[str, Any] = {
            "revision": self.revision,
            "groups": [dict(g) for g in groups],
            "node_addresses": self.addresses,
            "local_endpoints": {k: list(v) for k, v in (local_endpoints or {}).items()},
            "garp": dict(garp or {}),
        }
        parsed = input_from_json(doc)
        self.vrids = allocate_vrids(group_instances(parsed.groups), self.vrids).vrids
        doc["vrids"] = self.vrids
        tmp = self.config_path.with_name(".vips.json.tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, self.config_path)
        for agent in self.agents.values():
            if agent.poll() is None:
                agent.send_signal(signal.SIGHUP)
        if wait:
            self.wait_applied(timeout_s=timeout_s)
        return self.revision

    def wait_applied(self, timeout_s: float = 20.0) -> None:
        def done() -> bool:
            return all(
                (self.status(n) or {}).get("input_revision") == self.revision
                for n in self.agents
                if self.agents[n].poll() is None
            )

        wait_for(done, timeout_s=timeout_s, what=f"agents to apply revision {self.revision}")

    # ----------------------------------------------------------------- observe

    def status(self, node: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = json.loads((self.state_dir(node) / "status.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        return doc

    def instance_of(self, group: str, node: str | None = None) -> str | None:
        """The instance name a group is rendered in (as any/the given node sees it)."""
        for name in [node] if node else list(self.nodes):
            st = self.status(name) or {}
            for iname, inst in st.get("instances", {}).items():
                if group in inst["groups"]:
                    return str(iname)
        return None

    def masters(self, instance: str) -> list[str]:
        """Nodes whose keepalived reports MASTER for ``instance``."""
        out = []
        for name in self.nodes:
            inst = (self.status(name) or {}).get("instances", {}).get(instance)
            if inst and inst.get("state") == "MASTER":
                out.append(name)
        return out

    def single_master(self, group: str, *, timeout_s: float = 15.0) -> str:
        """Wait until exactly one node is MASTER for the group's instance; return it."""

        def check() -> str | None:
            inst = self.instance_of(group)
            if inst is None:
                return None
            m = self.masters(inst)
            return m[0] if len(m) == 1 else None

        return wait_for(check, timeout_s=timeout_s, what=f"one MASTER for {group}")

    def settled_master(
        self, group: str, *, timeout_s: float = 15.0, all_healthy: bool = False
    ) -> str:
        """Wait until the group's single MASTER is its highest-priority healthy node.

        Right after start the first keepalived up may win before a higher-priority
        one preempts it; tests that remember "the master" wait for this instead.
        ``all_healthy`` also waits until every node of the instance is MASTER or
        BACKUP (none restarting or in FAULT).
        """

        def check() -> str | None:
            inst = self.instance_of(group)
            if inst is None:
                return None
            m = self.masters(inst)
            if len(m) != 1:
                return None
            healthy = {}
            for name in self.nodes:
                i = (self.status(name) or {}).get("instances", {}).get(inst)
                if i and i.get("state") in ("MASTER", "BACKUP"):
                    healthy[name] = int(i["priority"])
                elif i and all_healthy:
                    return None
            return m[0] if healthy and max(healthy, key=lambda n: healthy[n]) == m[0] else None

        return wait_for(check, timeout_s=timeout_s, what=f"the top-priority MASTER for {group}")

    def holders(self, vip: str) -> list[str]:
        """Nodes that have ``vip`` on an interface."""
        ip = ipaddress.ip_address(vip)
        out = []
        for name, host in self.nodes.items():
            text = host.ip("-o", "addr", "show")
            if any(word.split("/")[0] == str(ip) for word in text.split()):
                out.append(name)
        return out

    def connect(self, vip: str, timeout_s: float = 2.0) -> str:
        """One connection from the client; returns the name of the node that answered."""
        assert self.client is not None
        code = (
            "import socket,sys;"
            f"s=socket.create_connection(('{vip}',{PORT}),timeout={timeout_s});"
            "sys.stdout.write(s.makefile().readline())"
        )
        return self.client.run(self.python, "-c", code, timeout=timeout_s + 10).strip()

    def keepalived_pid(self, node: str) -> int | None:
        pid = (self.status(node) or {}).get("keepalived_pid")
        return int(pid) if pid else None

    def counters(self, node: str) -> dict[str, Any]:
        return dict((self.status(node) or {}).get("counters", {}))

    # ----------------------------------------------------------------- act

    def kill_keepalived(self, node: str) -> float:
        """SIGKILL the node's keepalived (parent and VRRP child); returns the monotonic time."""
        pid = self.keepalived_pid(node)
        if pid is None:
            raise LabTimeout(f"{node} runs no keepalived")
        now = time.monotonic()
        os.killpg(pid, signal.SIGKILL)
        return now

    def set_link(self, node: str, up: bool) -> None:
        self.nodes[node].ip("link", "set", "eth0", "up" if up else "down")

    def isolate(self, nodes: Sequence[str], isolated: bool) -> None:
        """Bridge port isolation: isolated nodes cannot reach each other (only the rest)."""
        assert self.switch is not None
        for node in nodes:
            self.switch.run(
                "bridge", "link", "set", "dev", self.ports[node], "isolated",
                "on" if isolated else "off",
            )  # fmt: skip

    def client_neighbour_mac(self, vip: str) -> str | None:
        """The MAC the client currently sends ``vip``'s traffic to."""
        assert self.client is not None
        words = self.client.ip("neigh", "show", vip).split()
        return words[words.index("lladdr") + 1] if "lladdr" in words else None

    def start_prober(self, targets: Sequence[str], interval_s: float = 0.01) -> None:
        assert self.client is not None
        args = [self.python, "-m", "teapot_lb.vrrp.probe", "watch"]
        for t in targets:
            host = f"[{t}]" if ":" in t else t
            args += ["--target", f"{host}:{PORT}"]
        args += ["--interval", str(interval_s), "--out", str(self.probe_out)]
        self.client.popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def attempts(self, since: float = 0.0) -> list[Attempt]:
        """Finished probe attempts started at or after ``since`` (read incrementally)."""
        try:
            with self.probe_out.open("rb") as f:
                f.seek(self._probe_offset)
                data = f.read()
        except FileNotFoundError:
            data = b""
        complete = data.rfind(b"\n") + 1
        self._probe_offset += complete
        for line in data[:complete].decode().splitlines():
            self._attempts.extend(parse_attempts(line))
        return [a for a in self._attempts if a.start >= since]

    def answered_by_since(self, t: float, target_vip: str, node: str) -> bool:
        """Whether a connect started after ``t`` was answered by ``node``."""
        host = f"[{target_vip}]" if ":" in target_vip else target_vip
        target = f"{host}:{PORT}"
        return any(a.ok and a.node == node and a.target == target for a in self.attempts(t))

    def first_answer_after(self, t0: float, target_vip: str, *, not_from: str) -> float | None:
        """Seconds from ``t0`` to the first connect answered by another node than ``not_from``."""
        host = f"[{target_vip}]" if ":" in target_vip else target_vip
        target = f"{host}:{PORT}"
        ends = [
            a.end - t0
            for a in self.attempts(since=t0)
            if a.target == target and a.ok and a.node != not_from
        ]
        return min(ends) if ends else None
