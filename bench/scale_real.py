"""Real check at scale (issue 19): N speakers in network namespaces, BGP to one BIRD.

Usage (as root, BIRD 2 installed): ``.venv/bin/python bench/scale_real.py [--nodes 20,40,60]
[--services 20] [--max-nodes-per-ip K]``

Per N, the lab of ``teapot-lb lab`` (``teapot_lb.lab.network.LabNetwork``: one namespace per
node on a LAN bridge, a router namespace running BIRD with BFD, the lab's manifests
``examples/lab/config.yaml`` with N generated Nodes and ``--services`` BGP Services) runs N
``teapot-lb run`` speakers (standalone mode, each reading the same manifest directory,
BGP only). Measured:

1. start → every BGP session Established at BIRD (N sessions);
2. start → every Service's /32 in the router's kernel FIB with exactly the next hops the
   planner says (every node, or the *k* chosen by rendezvous hashing with
   ``--max-nodes-per-ip``);
3. one node crashed (link down, every process SIGKILLed: ``LabNetwork.crash``) → its next
   hop gone from every route (BFD, 0.3 s in the lab's profile, or the hold time);
4. each speaker's RSS.

The machine is shared (2 cores, other sessions' tests running): times are wall clock under
that load. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from teapot_lb import log
from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.plan import plan
from teapot_lb.lab.manifests import (
    announced_view,
    layout,
    node_doc,
    read_dir,
    service_doc,
    write_docs,
)
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import speaker as speaker_bench  # noqa: E402  (a sibling script: its FIB reader)


def manifests_for(work: Path, nodes: int, services: int, k: int | None) -> Path:
    """The lab's configuration, N generated Nodes and the Services (BGP pool only)."""
    manifests = work / "manifests"
    manifests.mkdir()
    config = list(yaml.safe_load_all((ROOT / "examples" / "lab" / "config.yaml").read_text()))
    for doc in config:
        if k is not None and doc["kind"] == "BGPAdvertisement":
            doc["spec"]["maxNodesPerIP"] = k
    write_docs(manifests / "config.yaml", config)
    lay = layout(read_dir(manifests), nodes=nodes)
    write_docs(manifests / "000-lab-nodes.yaml", [node_doc(n) for n in lay.nodes])
    docs = [service_doc(f"svc-{i:03d}", "lab-bgp") for i in range(services)]
    write_docs(manifests / "100-services.yaml", docs)
    return manifests


def expected_fib(manifests: Path) -> dict[str, set[str]]:
    """Service IP → the next hops the planner says the router should have for its /32
    (from every node's plan, as the speakers compute it)."""
    snapshot = read_dir(manifests)
    view = announced_view(snapshot, [])
    want: dict[str, set[str]] = {}
    for name, node in view.nodes.items():
        address = str(node.addresses()[0])
        for route in plan(view, name).of_mode(Mode.BGP):
            if isinstance(route, BGPRoute) and route.prefix.endswith("/32"):
                # As the FIB reader names them: a host route by its address alone.
                want.setdefault(route.prefix.removesuffix("/32"), set()).add(address)
    return want


# BIRD 2's kernel protocol installs at most this many next hops per route (`merge paths on`
# without a limit): with more announcing nodes the FIB holds 16 of them, the router's
# choice (what bounded ECMP, `--max-nodes-per-ip`, is for).
FIB_ECMP_LIMIT = 16


def fib_agrees(net: LabNetwork, want: dict[str, set[str]]) -> bool:
    """Every route is in the FIB with next hops the planner chose: all of them, or as many
    as the FIB holds (:data:`FIB_ECMP_LIMIT`)."""
    got = speaker_bench.fib_table(net)
    return got.keys() == want.keys() and all(
        got[ip] <= hops and len(got[ip]) == min(len(hops), FIB_ECMP_LIMIT)
        for ip, hops in want.items()
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_size(nodes: int, services: int, k: int | None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="teapot-bench-scale-real-"))
    out: dict[str, Any] = {"nodes": nodes, "services": services, "max_nodes_per_ip": k}
    try:
        manifests = manifests_for(work, nodes, services, k)
        want = expected_fib(manifests)
        lay = layout(read_dir(manifests), nodes=None)
        with Topology("sclr") as topo:
            net, router, hops = speaker_bench.bgp_lab(topo, lay, work, manifests)
            t0 = time.monotonic()
            for name in net.nodes:
                net.start_speaker(name)
            deadline = 60 + 4 * nodes
            wait_for(lambda: router.established() >= hops, timeout=deadline,
                     what=f"{nodes} BGP sessions Established", every=0.2)  # fmt: skip
            out["established_s"] = round(time.monotonic() - t0, 2)
            wait_for(lambda: fib_agrees(net, want), timeout=deadline,
                     what="every route with its next hops", every=0.2)  # fmt: skip
            out["routes_s"] = round(time.monotonic() - t0, 2)
            out["routes"] = len(want)
            out["next_hops_planned"] = max(len(h) for h in want.values())
            out["next_hops_in_fib"] = max(len(h) for h in speaker_bench.fib_table(net).values())
            rss = [rss_mb(n.speaker.pid) for n in net.nodes.values() if n.speaker is not None]
            out["speaker_rss_mb_mean"] = round(statistics.mean(rss), 1)
            out["speaker_rss_mb_max"] = round(max(rss), 1)
            # The lab's peer runs BFD: crash only once every BFD session is Up, so that the
            # figure is BFD's detection, not the hold time of a session BFD did not cover yet.
            wait_for(lambda: router.bfd_up() >= hops, timeout=deadline,
                     what=f"{nodes} BFD sessions Up", every=0.2)  # fmt: skip
            out["bfd_up_s"] = round(time.monotonic() - t0, 2)
            fib = speaker_bench.fib_table(net)
            # The victim: a node the FIB uses (with more nodes than the FIB holds, not all are).
            used = sorted(
                n for n in net.nodes if any(net.nodes[n].address in h for h in fib.values())
            )
            victim = net.nodes[used[-1]]
            carried = sum(victim.address in h for h in fib.values())
            after = {p: h - {victim.address} for p, h in want.items()}
            started = net.crash(victim.name)
            wait_for(lambda: fib_agrees(net, after), timeout=30,
                     what="the crashed node's next hop withdrawn", every=0.01)  # fmt: skip
            out["crash_withdrawn_s"] = round(time.monotonic() - started, 3)
            out["crash_routes_touched"] = carried
            for name in net.nodes:
                if name != victim.name:
                    net.terminate_speaker(name)
            for name in net.nodes:
                if name != victim.name:
                    net.stop_speaker(name, signal_it=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="20", help="comma-separated N (the lab runs 2-60)")
    parser.add_argument("--services", type=int, default=20, help="BGP Services (pool: 32 IPs)")
    parser.add_argument("--max-nodes-per-ip", type=int, default=None, help="bounded ECMP k")
    args = parser.parse_args()
    log.configure("warning", json=False)
    reason = netns_available()
    if reason is None and shutil.which("bird") is None:
        reason = "not installed: bird (scripts/setup.sh)"
    results: list[dict[str, Any]] = []
    if reason:
        print(f"skipped: {reason}")
    else:
        for n in (int(x) for x in args.nodes.split(",")):
            r = run_size(n, args.services, args.max_nodes_per_ip)
            print(
                f"{n} speakers: Established {r['established_s']} s, {r['routes']} routes with"
                f" {r['next_hops_planned']} next hops planned ({r['next_hops_in_fib']} in the"
                f" FIB) {r['routes_s']} s after start; crash →"
                f" next hop gone from {r['crash_routes_touched']} routes in"
                f" {r['crash_withdrawn_s']} s; speaker RSS {r['speaker_rss_mb_mean']} MB mean"
                f" ({r['speaker_rss_mb_max']} max)"
            )
            results.append(r)
    print(json.dumps({"skipped": reason, "sizes": results}))


if __name__ == "__main__":
    main()
