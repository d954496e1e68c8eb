"""A speaker's plan after a BGP session change (issue 37, goal 5), in process.

Usage: ``.venv/bin/python bench/replan.py [--services 10000] [--repeats 7] [--profile FILE]``

The view ``teapot-lb run`` plans from in ``bench/reachable.py``'s lab (its config: examples/lab
with the two IPv6 pools), with a second BGPPeer so that a node has 2 sessions, the lab's three
Nodes and ``--services`` Services each asking for its IP in the present pool, assigned as the
runner assigns them (the standalone assigner, held in the Store). One node's
:class:`PlanCache` is warmed with both sessions Established; then the second session goes
down and comes up again, as ``NodeSpeaker._plan`` runs it in its worker thread. Until
session 16 each was a full replan (the sessions were among the plan's options: every Service
planned again); now no Service is planned again, the sessions are laid over the kept
decisions (announce/sessions.py). Measured per change: CPU time (``time.process_time``),
wall time and how many Services were planned again; ``--profile FILE`` writes a cProfile.

Last line, JSON: ``services``, ``peers``, ``repeats``, ``replan_cpu_s`` and ``replan_wall_s``
(medians), ``replan_cpu_max_s``, ``planned_again`` (Services planned again per change, the
most of any), ``words_changed`` (decisions whose words changed per change, the fewest of
any: the laying did its work), ``loadavg`` (the machine's 1-minute load at the end).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.announce.cache import PlanCache
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.cluster import Store
from teapot_lb.lab.lan import service_doc
from teapot_lb.model.manifest import parse_object
from teapot_lb.standalone.assign import assign

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import reachable  # noqa: E402  (a sibling script: the goal's lab config)

SECOND_PEER = "lab-router-2"


def store_of(services: int) -> Store:
    """The Store a node's runner holds: objects, then the Services' assignments."""
    lab = BENCH.parent / "examples" / "lab"
    docs = reachable.lab_config(lab / "config.yaml")
    peer = next(d for d in docs if d["kind"] == "BGPPeer")
    second = {**peer["spec"], "peerAddress": "192.0.2.2", "peerASN": 64501}
    docs.append({**peer, "metadata": {**peer["metadata"], "name": SECOND_PEER}, "spec": second})
    docs += [d for d in yaml.safe_load_all((lab / "nodes.yaml").read_text()) if d]
    docs += [service_doc(f"present-{i:05d}", reachable.present_ip(i)) for i in range(services)]
    store = Store()
    for doc in docs:
        obj, problems = parse_object(doc)
        assert obj is not None and not problems, problems
        store.put_object(obj)
    assigned = assign(store.view())
    refused = [a.key for a in assigned.values() if a.refused]
    assert not refused, f"refused: {refused[:3]}"
    store.replace_assigned(assigned)
    return store


def run(services: int, repeats: int, profile: Path | None) -> dict[str, Any]:
    store = store_of(services)
    view = store.view()
    node = sorted(view.nodes)[0]
    peers = tuple(sorted(p.name for p in view.bgp_peers.values()))
    assert len(peers) == 2, peers
    cache = PlanCache()
    both, one = PlanOptions(established_peers=peers), PlanOptions(established_peers=peers[:1])
    plan(view, node, both, cache=cache)  # warm: what the node held before the change
    profiler = cProfile.Profile() if profile else None
    cpu: list[float] = []
    wall: list[float] = []
    again: list[int] = []
    changed: list[int] = []
    decided = list(plan(view, node, both).decisions)
    for i in range(repeats):
        options = one if i % 2 == 0 else both  # the second session down, then up again
        before = cache.computed
        c0, w0 = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        planned = plan(view, node, options, cache=cache)
        if profiler:
            profiler.disable()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        again.append(cache.computed - before)
        now = list(planned.decisions)
        changed.append(sum(a != b for a, b in zip(now, decided, strict=True)))
        decided = now
        print(
            f"change {i + 1}: cpu {cpu[-1] * 1000:7.1f} ms  wall {wall[-1] * 1000:7.1f} ms"
            f"  planned again {again[-1]}  words changed {changed[-1]}"
        )
    if profiler and profile:
        profiler.dump_stats(profile)
    return {
        "services": services,
        "peers": len(peers),
        "repeats": repeats,
        "replan_cpu_s": round(statistics.median(cpu), 4),
        "replan_cpu_max_s": round(max(cpu), 4),
        "replan_wall_s": round(statistics.median(wall), 4),
        "planned_again": max(again),
        "words_changed": min(changed),
        "loadavg": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    if not 1 <= args.services <= 65_000:
        parser.error("--services must be 1-65000 (the present pool's size)")
    print(json.dumps(run(args.services, args.repeats, args.profile)))


if __name__ == "__main__":
    main()
