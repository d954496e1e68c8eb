"""Issue 38's failure-behaviour goal with a real process: create/delete cycles with the
`teapot-lb manager` PROCESS SIGKILLed at seeded random points, then 0 orphans.

The manager runs as deployed, `teapot-lb manager --provider octavia=FILE` (no leader
election: one process at a time here, and a SIGKILLed holder's Lease would only add its
expiry to every cycle), against the in-repo fake API server this script hosts, and the
real Octavia with the real ovn-octavia-provider on a real OVN (lab/octavia_ovn.py, as
bench/providers.py builds it; root). Each cycle:

- a manager starts (its /readyz answering), a TenantLoadBalancer is created, and the
  manager is SIGKILLed 0-4 s later (whatever it had sent Octavia goes on there);
- half the time the request is then deleted with no manager running; otherwise a new
  manager starts, the request is deleted under it and it is SIGKILLed 0-2 s later.

Then one manager runs (its sweep runs on start) until no Octavia load balancer,
Northbound Load_Balancer row nor Logical_Switch_Port (a VIP's port is one) is left that
was not there before the cycles, or `--settle` seconds pass: what is left then is the
orphans. Octavia's own access log counts what was asked of it: load balancers created,
answers 409, load balancers deleted. Seeded (`--seed`): a failure replays.

    .venv/bin/python bench/providers_cycles.py [--cycles 100] [--seed 38]

Last line, JSON: cycles, kills, lb_created, answers_409, lb_deleted, orphans (lbs,
lb_rows, ports: what is left), settle_s, wall_s, per_cycle_s, load_before, load_after
(1-minute load average).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from octavia_ovn_stack import stack_up
from providers import CONFIG_NS, NS, objects, request
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.neutron_nets import routed, rows
from teapot_lb.lab.octavia_ovn import OctaviaOVN, missing
from teapot_lb.lab.octavia_stack import connection
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.ovnstack import missing as ovn_missing
from teapot_lb.lab.processes import Restartable
from teapot_lb.lab.teapot_octavia import provider_config
from teapot_lb.netlab import netns_available

READY_WITHIN = 60.0

# Octavia's API access log (wsgiref): `"POST /v2/lbaas/loadbalancers HTTP/1.1" 201 3601`
ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
LB_PATH = re.compile(r"^/v2(?:\.0)?/lbaas/loadbalancers(?:/[0-9a-f-]+)?(?:\?.*)?$")


def manager_command(kubeconfig: Path, config: Path, port: int) -> list[str]:
    """The real `teapot-lb manager` with the octavia provider, its /readyz on `port`."""
    return [
        sys.executable, "-c", "from teapot_lb.cli import main; main()",
        "--log-level", "info", "manager", "--kubeconfig", str(kubeconfig),
        "--config-namespace", CONFIG_NS, "--no-leader-elect",
        "--metrics-addr", f"127.0.0.1:{port}", "--webhook-addr", "",
        "--provider", f"octavia={config}",
    ]  # fmt: skip


class Manager(Restartable):
    """The manager process, its output appended to one log, started until ready."""

    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        super().__init__(argv)
        self.port = port
        self.log = log

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(*self.argv, stderr=out)
        deadline = time.monotonic() + READY_WITHIN
        while not await asyncio.to_thread(self._ready):
            if self.process.returncode is not None:
                raise RuntimeError(f"the manager exited ({self.process.returncode}): {self.log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the manager not ready within {READY_WITHIN:g} s: {self.log}")
            await asyncio.sleep(0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1):
                return True
        except OSError:
            return False


def leftovers(stack: OctaviaOVN, ovn: OVNStack) -> dict[str, set[str]]:
    """Every Octavia load balancer id, Northbound Load_Balancer row and
    Logical_Switch_Port name there is."""
    conn = connection(stack.stack).load_balancer
    return {
        "lbs": {str(lb.id) for lb in conn.load_balancers()},
        "lb_rows": {str(r["name"]) for r in rows(ovn, "load_balancer")},
        "ports": {str(r["name"]) for r in rows(ovn, "logical_switch_port")},
    }


def asked(access_log: Path) -> dict[str, int]:
    """What Octavia's API answered, from its access log: load balancers created and
    deleted, and every 409."""
    counts = {"lb_created": 0, "answers_409": 0, "lb_deleted": 0}
    for line in access_log.read_text(errors="replace").splitlines():
        found = ACCESS.search(line)
        if found is None:
            continue
        method, path, status = found["method"], found["path"], int(found["status"])
        if status == 409:
            counts["answers_409"] += 1
        if not LB_PATH.match(path) or status >= 300:
            continue
        if method == "POST":
            counts["lb_created"] += 1
        elif method == "DELETE":
            counts["lb_deleted"] += 1
    return counts


async def cycles(
    stack: OctaviaOVN, ovn: OVNStack, work: Path, count: int, seed: int, settle: float
) -> dict[str, Any]:
    members, _ = routed(stack.neutron, "cycles")
    config = work / "octavia.yaml"
    config.write_text(yaml.safe_dump(provider_config(stack.octavia_url, members["id"])))
    before = await asyncio.to_thread(leftovers, stack, ovn)
    access = stack.stack.work / "octavia-api.log"
    already = asked(access)
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS))
    await api.start()
    rng = random.Random(seed)
    try:
        api.add_token("fake-token")
        api.write_kubeconfig(work / "management")
        for body in objects():
            api.seed(body)
        assert api.kubeconfig_path is not None
        port = free_port()
        manager = Manager(manager_command(api.kubeconfig_path, config, port), port,
                          work / "manager.log")  # fmt: skip
        started = time.monotonic()
        async with await connect(api.kubeconfig_path, request_timeout_s=5.0) as admin:
            for cycle in range(count):
                name = f"cycle{cycle}"
                await manager.start()
                await admin.create(TENANT_LOAD_BALANCERS, request(name, "m1"))
                await asyncio.sleep(rng.uniform(0.0, 4.0))  # the kill point, not a wait
                await manager.kill()
                if rng.random() < 0.5:
                    await admin.delete(TENANT_LOAD_BALANCERS, name, NS)
                else:
                    await manager.start()
                    await admin.delete(TENANT_LOAD_BALANCERS, name, NS)
                    await asyncio.sleep(rng.uniform(0.0, 2.0))  # the kill point
                    await manager.kill()
                if (cycle + 1) % 10 == 0:
                    print(f"  {cycle + 1} cycles, {time.monotonic() - started:.0f} s, "
                          f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            cycled = time.monotonic() - started
            await manager.start()
            settled = time.monotonic()
            left = await clean(stack, ovn, before, settle)
            settle_s = time.monotonic() - settled
            await manager.kill()
    finally:
        await api.stop()
    counts = {k: v - already[k] for k, v in asked(access).items()}
    return {
        "cycles": count, "kills": manager.kills - 1, **counts,
        "orphans": {k: sorted(v) for k, v in left.items()},
        "orphans_total": sum(len(v) for v in left.values()),
        "settle_s": round(settle_s, 1), "cycles_s": round(cycled, 1),
        "per_cycle_s": round(cycled / count, 2),
    }  # fmt: skip


async def clean(
    stack: OctaviaOVN, ovn: OVNStack, before: dict[str, set[str]], within: float
) -> dict[str, set[str]]:
    """What is left beyond `before` once nothing is, or after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        now = await asyncio.to_thread(leftovers, stack, ovn)
        left = {k: now[k] - before[k] for k in now}
        if not any(left.values()) or time.monotonic() > deadline:
            return left
        await asyncio.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--settle", type=float, default=600.0,
                        help="seconds the last manager gets to leave nothing")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="keep the logs there (default: a temp dir)")
    args = parser.parse_args()
    reason = netns_available() or ovn_missing() or missing()
    if reason:
        print(json.dumps({"skipped": reason}))
        return
    load = os.getloadavg()[0]
    started = time.monotonic()
    with stack_up(args.workdir, "provcyc") as (ovn, stack, _, work):
        figures = asyncio.run(cycles(stack, ovn, work, args.cycles, args.seed, args.settle))
    figures |= {"seed": args.seed, "wall_s": round(time.monotonic() - started, 1),
                "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2)}  # fmt: skip
    print(f"{args.cycles} cycles, manager SIGKILLed {figures['kills']} times: Octavia created "
          f"{figures['lb_created']} load balancers, deleted {figures['lb_deleted']}, answered "
          f"409 {figures['answers_409']} times; orphans {figures['orphans_total']} after "
          f"{figures['settle_s']} s")  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
