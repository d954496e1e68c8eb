"""What do N BFD sessions at a fast interval cost our process? CPU over a minute.

Usage (root): ``.venv/bin/python bench/bfd.py [--sessions 50] [--interval-ms 50]
[--seconds 60]``

Two namespaces on one LAN, each running our BFD (``teapot_lb/lab/drive_bfd.py``, the
product's ``BfdEndpoint`` and ``Session``) with N single-hop sessions to the other: pair i
is 198.51.100.i on host "peer" and 198.51.100.(100+i) on host "node" (N <= 100). Every
session runs at TX = RX = ``--interval-ms`` with detect mult 3. Once all N are Up on the
node, the node process's CPU (user + system, from /proc) is read over ``--seconds``; any
state change in that window is counted as a flap.

Prints a table and, last, one JSON line: ``sessions``, ``interval_ms``, ``seconds``,
``cpu_s``, ``cpu_percent`` (of one core), ``packets_per_s`` (sent, estimated from the
jittered interval: 87.5 % on average), ``cpu_us_per_packet`` (sent and received), ``flaps``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from teapot_lb.lab.bfd import OurBfd
from teapot_lb.lab.peers.lab import Lab
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if reason := netns_available():
        sys.exit(f"bench/bfd.py: {reason}")
    n = args.sessions
    if not 1 <= n <= 100:
        sys.exit("--sessions must be 1..100 (addresses come from 198.51.100.0/24)")
    timing = {"tx_ms": args.interval_ms, "rx_ms": args.interval_ms, "mult": 3}
    with Topology("bfdb") as topo, tempfile.TemporaryDirectory() as tmp:
        lab = Lab(topo)
        hosts = {name: lab.add(name) for name in ("peer", "node")}
        for i in range(1, n + 1):
            hosts["peer"].add_address("eth0", f"198.51.100.{i}/24")
            hosts["node"].add_address("eth0", f"198.51.100.{100 + i}/24")
        pairs = [(f"198.51.100.{i}", f"198.51.100.{100 + i}") for i in range(1, n + 1)]
        drivers: list[OurBfd] = []
        try:
            drivers.append(
                OurBfd(
                    hosts["peer"],
                    Path(tmp) / "peer",
                    [{"peer": b, "local": a, **timing} for a, b in pairs],
                )
            )
            node = OurBfd(hosts["node"], Path(tmp) / "node",
                          [{"peer": a, "local": b, **timing} for a, b in pairs])  # fmt: skip
            drivers.append(node)
            wait_for(lambda: all(node.state(a) == "UP" for a, _ in pairs), timeout=60,
                     what=f"{n} sessions Up", detail=node.log_tail)  # fmt: skip
            time.sleep(2 * args.interval_ms / 1000 * 3)  # let the poll sequences end
            changes = sum(len(node.states(a)) for a, _ in pairs)
            pid = node.proc.pid
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.seconds)  # the measurement window itself
            cpu, elapsed = cpu_seconds(pid) - cpu0, time.monotonic() - t0
            flaps = sum(len(node.states(a)) for a, _ in pairs) - changes
        finally:
            for driver in drivers:
                driver.kill()
    sent_per_s = n / (args.interval_ms / 1000 * 0.875)
    figures = {
        "sessions": n,
        "interval_ms": args.interval_ms,
        "seconds": round(elapsed, 1),
        "cpu_s": round(cpu, 2),
        "cpu_percent": round(100 * cpu / elapsed, 1),
        "packets_per_s": round(sent_per_s),
        "cpu_us_per_packet": round(1e6 * cpu / (elapsed * 2 * sent_per_s), 1),
        "flaps": flaps,
    }
    for key, value in figures.items():
        print(f"{key:>18}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
