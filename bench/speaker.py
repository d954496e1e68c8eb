"""Benchmark the standalone speaker: planning cost, and manifest write → router FIB end to end.

Usage: ``.venv/bin/python bench/speaker.py [--quick] [--skip-netns]``

Part 1, pure (no I/O): a view of N LoadBalancer Services (BGP, L2 and VIP pools, IPv4 and
IPv6; every 10th Service ``externalTrafficPolicy: Local`` with an EndpointSlice) on 3 and
10 nodes. Median of a few repeats of ``plan(view, node)``, of the standalone IP assignment
(``assign``), and of one speaker step after a single new Service: what ``teapot-lb run``
does on a reload minus reading files (assign, Services with their status into the Store)
plus ``NodeSpeaker.step()`` with a recording BGP speaker and a stand-in L2 backend (no
sockets, no keepalived; VIP rendering is not included).

Part 2, end to end (root, BIRD; skipped with the reason otherwise): the lab's namespaces
(``teapot_lb.lab.network``: a router running BIRD with ``merge paths on`` into its kernel
FIB, 3 nodes each running ``teapot-lb run --modes bgp``) on a copy of ``examples/lab``.
For 20 Services created one at a time (written to a hidden file, then renamed into the
manifest directory, at a random point of 0.2 s after the previous one): rename → the
router's FIB holds the /32 with a first next hop, and with all 3 (polled every 5 ms), with
`teapot-lb run`'s default settings (inotify wakes each node at the rename; it polled the
directory every 0.2 s before, when "all 3" waited for the slowest of three polls).
Then SIGTERM of one node → its next hop gone from the first Service's route and from all
20 (5 trials, the node restarted and the FIB full again in between). ``fib_read_s``: one
`ip -j route` read of the FIB, the resolution of every end-to-end figure.

The pure figures include Python's cyclic garbage collector, as in the real process: at
10,000 Services it is a large and variable share (a third of ``assign``).

Last line, JSON: ``pure`` (per "SERVICESxNODES": plan_s, assign_s, change_reload_s,
change_step_s; medians, seconds) and ``netns`` (``default``: ``add`` and
``add_first_hop``; ``sigterm``, ``sigterm_all``: p50/p95/max/n in seconds; ``fib_read_s``), or
``netns_skipped`` with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from ipaddress import IPv4Address, ip_network
from pathlib import Path
from typing import Any

import yaml

from teapot_lb import log
from teapot_lb.announce.plan import plan
from teapot_lb.bgp import PeerConfig, PeerCounters, State
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.cluster.view import Stored
from teapot_lb.lab.manifests import (
    LabLayout,
    assigned_ips,
    layout,
    read_dir,
    service_doc,
    with_services,
)
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.router import Router, fib_next_hops
from teapot_lb.lab.wait import wait_for
from teapot_lb.model import Node
from teapot_lb.model.kinds import KINDS
from teapot_lb.model.manifest import parse_object
from teapot_lb.netlab import Topology, netns_available
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.interfaces import InterfaceInfo
from teapot_lb.speaker.l2_backend import L2Backend
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.standalone.assign import assign

ROOT = Path(__file__).resolve().parents[1]
API = "lb.teapot.io/v1alpha1"
NS = "teapot-bench"
# Documentation ranges only; IPv6 carries the bulk (IPv4 documentation space is 768 IPs).
POOLS = {
    "bgp4": ("203.0.113.0/24", "bgp"),
    "bgp6": ("2001:db8:100::/112", "bgp"),
    "l2-4": ("198.51.100.0/24", "l2"),
    "l2-6": ("2001:db8:200::/112", "l2"),
    "vip": ("192.0.2.128/26", "vip"),
}

# --------------------------------------------------------------------------- part 1: pure


def ours(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def pool_for(i: int, used: dict[str, int]) -> tuple[str, bool]:
    """The pool of Service ``i`` (about 5 % VIP, 25 % L2, 70 % BGP) and whether it is IPv6."""
    mode = "vip" if i % 20 == 0 and used["vip"] < 50 else "l2" if i % 4 == 1 else "bgp"
    if mode == "vip":
        used["vip"] += 1
        return "vip", False
    four = f"{mode}-4" if mode == "l2" else "bgp4"
    if used[four] < 200:
        used[four] += 1
        return four, False
    return ("l2-6" if mode == "l2" else "bgp6"), True


def cluster_docs(services: int, nodes: int) -> list[dict[str, Any]]:
    names = [f"n{i}" for i in range(1, nodes + 1)]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            "status": {"addresses": [{"type": "InternalIP", "address": f"192.0.2.{10 + i}"}]},
        }
        for i, n in enumerate(names, 1)
    ]
    docs += [ours("AddressPool", p, {"addresses": [cidr]}) for p, (cidr, _) in POOLS.items()]
    peer = {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"}
    docs.append(ours("BGPPeer", "router", peer))
    docs.append(ours("BGPAdvertisement", "bgp", {"addressPools": ["bgp4", "bgp6"]}))
    docs.append(ours("L2Advertisement", "l2", {"addressPools": ["l2-4", "l2-6"]}))
    vip = {"addressPools": ["vip"], "interface": "eth0", "vridRange": {"start": 1, "end": 255}}
    docs.append(ours("VIPAdvertisement", "vip", vip))
    used = dict.fromkeys(POOLS, 0)
    for i in range(services):
        docs += service_docs(i, pool_for(i, used), names)
    return docs


def service_docs(i: int, pool: tuple[str, bool], nodes: list[str]) -> list[dict[str, Any]]:
    name, six = pool
    spec: dict[str, Any] = {"type": "LoadBalancer", "ports": [{"port": 80}]}
    if six:
        spec["ipFamilies"] = ["IPv6"]
    local = i % 10 == 3
    if local:
        spec["externalTrafficPolicy"] = "Local"
    meta = {"name": f"svc-{i:05d}", "namespace": "default"}
    svc = {"apiVersion": "v1", "kind": "Service", "spec": spec,
           "metadata": {**meta, "annotations": {"lb.teapot.io/pool": name}}}  # fmt: skip
    if not local:
        return [svc]
    on = [nodes[i % len(nodes)], nodes[(i + 1) % len(nodes)]]
    endpoints = [{"addresses": [f"10.0.{j}.1"], "nodeName": n, "conditions": {"ready": True}}
                 for j, n in enumerate(on)]  # fmt: skip
    labels = {"kubernetes.io/service-name": meta["name"]}
    eps = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {**meta, "labels": labels}, "endpoints": endpoints}  # fmt: skip
    return [svc, eps]


def store_of(docs: list[dict[str, Any]]) -> Store:
    store = Store()
    for doc in docs:
        obj, problems = parse_object(doc)
        assert obj is not None and not problems, problems
        store.put_object(obj)
    return store


def timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class FakePeer:
    """A session that is up."""

    state = State.ESTABLISHED
    established = True
    last_error: str | None = None
    prefixes_sent = 0

    def __init__(self) -> None:
        self.counters = PeerCounters()


class FakeSpeaker:
    """Records routes instead of sending them (the backend's SpeakerLike)."""

    def __init__(self, local_as: int, router_id: IPv4Address) -> None:
        self.peers: dict[str, FakePeer] = {}
        self.routes: dict[str | None, dict[Any, Any]] = {}

    async def start(self) -> None: ...

    def add_peer(self, config: PeerConfig) -> FakePeer:
        peer = self.peers[config.address] = FakePeer()
        return peer

    async def remove_peer(self, address: str, communication: str = "") -> None:
        self.peers.pop(address, None)

    def set_bfd(self, address: str, parameters: Any) -> None: ...

    def set_routes(self, routes: Mapping[Any, Any], peer: str | None = None) -> None:
        self.routes[peer] = dict(routes)

    def change_routes(self, routes: Mapping[Any, Any], withdrawn: Any, *, peer: str) -> None:
        table = self.routes[peer]
        for prefix in withdrawn:
            del table[prefix]
        table.update(routes)

    async def shutdown(self, communication: str = "", **_: bool) -> None: ...


class _SilentResponder:
    """A responder minus its AF_PACKET socket: what it is told to answer, recorded."""

    def __init__(self, info: InterfaceInfo, *, on_claim: Any) -> None:
        self.info = info
        self.owned: set[Any] = set()

    def start(self) -> None: ...

    def close(self) -> None: ...

    def watch(self, ips: Any) -> None: ...

    def acquire(self, ip: Any) -> None:
        self.owned.add(ip)

    def release(self, ip: Any) -> None:
        self.owned.discard(ip)


async def _bench_interfaces() -> dict[str, InterfaceInfo]:
    subnets = tuple(ip_network(c) for p, (c, m) in POOLS.items() if m == "l2")
    return {"eth0": InterfaceInfo("eth0", 2, b"\x02\x00\x00\x00\x00\x01", None, subnets)}


class FakeL2(L2Backend):
    """The L2 backend minus sockets: every node alive (no heartbeats), its own
    ``apply`` (claims, election orders) run with responders that only record."""

    def __init__(self, nodes: list[str]) -> None:
        super().__init__(
            "n1",
            on_change=lambda: None,
            list_interfaces=_bench_interfaces,
            responder=_SilentResponder,  # type: ignore[arg-type]
        )
        self.nodes = frozenset(nodes)
        self._started_at = float("-inf")  # ready: as one detection interval after the start

    def live_speakers(self) -> frozenset[str]:
        return self.nodes

    def set_peers(self, addresses: Any) -> None: ...


async def change_cost(docs: list[dict[str, Any]], nodes: int, repeats: int) -> tuple[float, float]:
    """Median (reload without file reads, step) after one new Service, node n1's view."""
    source = store_of(docs)
    store = Store()
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(FakeSpeaker))
    speaker.l2 = FakeL2([f"n{i}" for i in range(1, nodes + 1)])

    def reload() -> None:
        view = source.view()
        for kind, objs in kinds_of(view).items():
            store.replace(kind, objs)
        store.replace(Kind.SERVICE, view.services)
        store.replace_assigned(assign(view))  # as teapot-lb run's reload does

    reload()
    await speaker.step()
    reloads, steps = [], []
    for r in range(repeats):
        (doc,) = service_docs(10**6 + 10 * r, ("bgp6", True), [])  # not Local
        obj, problems = parse_object(doc)
        assert obj is not None, problems
        source.put_object(obj)
        t0 = time.perf_counter()
        reload()
        t1 = time.perf_counter()
        await speaker.step()
        reloads.append(t1 - t0)
        steps.append(time.perf_counter() - t1)
    return statistics.median(reloads), statistics.median(steps)


async def node_change_steps(
    speaker: NodeSpeaker, l2: FakeL2, nodes: int, round_: int = 1
) -> dict[str, float]:
    """One ``NodeSpeaker.step()`` after each Node-side change, in turn (node n1's view,
    ``nodes`` Nodes n1..nN, every speaker alive at the start): another node's speaker dies
    (L2 membership) and comes back, a label nothing selects is put on that Node (its value
    `round_`: each round changes it), and a new Node joins (its speaker alive) and leaves.
    Seconds per step, by change."""
    store = speaker.store
    victim = f"n{nodes // 2 + 1}"
    everyone = l2.nodes
    out: dict[str, float] = {}

    async def timed_step(what: str) -> None:
        t0 = time.perf_counter()
        await speaker.step()
        out[what] = time.perf_counter() - t0

    l2.nodes = everyone - {victim}
    await timed_step("liveness_down_s")
    l2.nodes = everyone
    await timed_step("liveness_up_s")
    node = store.get(Kind.NODE, victim)
    assert isinstance(node, Node)
    labelled = node.model_copy(
        update={"metadata": node.metadata.model_copy(
            update={"labels": {**node.labels, "bench.teapot.io/touched": str(round_)}})}
    )  # fmt: skip
    store.put_object(labelled)
    await timed_step("node_label_s")
    new = f"n{nodes + 1}"
    address = {"type": "InternalIP", "address": "198.51.100.250"}
    doc = {"apiVersion": "v1", "kind": "Node", "status": {"addresses": [address]},
           "metadata": {"name": new, "labels": {"kubernetes.io/hostname": new}}}  # fmt: skip
    obj, problems = parse_object(doc)
    assert obj is not None, problems
    l2.nodes = everyone | {new}
    store.put_object(obj)
    await timed_step("node_join_s")
    l2.nodes = everyone
    store.delete(Kind.NODE, new)
    await timed_step("node_leave_s")
    return out


def kinds_of(view: ClusterView) -> dict[Kind, Mapping[str, Stored]]:
    """Every kind of the view but Services (the reload assigns those)."""
    return {i.kind: view.of_kind(i.kind) for i in KINDS if i.kind is not Kind.SERVICE}


def pure(sizes: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    print(f"{'services':>8} {'nodes':>5} {'plan':>9} {'assign':>9} {'reload':>9} {'step':>9}")
    for services in sizes:
        repeats = 5 if services <= 1000 else 3
        for nodes in (3, 10):
            docs = cluster_docs(services, nodes)
            raw = store_of(docs).view()
            assigned = assign(raw)
            refused = [a.key for a in assigned.values() if a.refused]
            assert not refused, f"refused: {refused[:3]}"
            store = store_of(docs)
            store.replace_assigned(assigned)
            view = store.view()
            plan_s = timed(partial(plan, view, "n1"), repeats)
            assign_s = timed(partial(assign, raw), repeats)
            reload_s, step_s = asyncio.run(change_cost(docs, nodes, repeats))
            row = {"plan_s": plan_s, "assign_s": assign_s}
            row |= {"change_reload_s": reload_s, "change_step_s": step_s}
            out[f"{services}x{nodes}"] = row
            cells = " ".join(f"{v * 1000:7.1f}ms" for v in row.values())
            print(f"{services:>8} {nodes:>5} {cells}")
    return out


# --------------------------------------------------------------------------- part 2: netns


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1], "n": len(ordered)}


def show(what: str, s: dict[str, float]) -> None:
    print(f"  {what:<44} p50 {s['p50']:.3f} s  p95 {s['p95']:.3f} s  max {s['max']:.3f} s")


def poll(check: Callable[[], bool], timeout: float = 30.0) -> float:
    """Seconds until ``check()`` holds, polled every 5 ms (raises after ``timeout``)."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"not within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - t0


def netns(services: int, trials: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="teapot-bench-speaker-"))
    manifests = work / "manifests"
    manifests.mkdir()
    for name in ("config.yaml", "nodes.yaml"):  # examples/lab without its Services
        shutil.copyfile(ROOT / "examples" / "lab" / name, manifests / name)
    snapshot = read_dir(manifests)
    lay = layout(snapshot, nodes=None)
    docs = [service_doc(f"svc-{i:02d}", "lab-bgp") for i in range(services)]
    ips = assigned_ips(with_services(snapshot, docs), snapshot)
    out: dict[str, Any] = {}
    try:
        with Topology("spkbn") as topo:
            net, router, hops = bgp_lab(topo, lay, work, manifests)
            for name in net.nodes:
                net.start_speaker(name)
            wait_for(lambda: router.established() >= hops, timeout=60,
                     what="BGP sessions", every=0.1)  # fmt: skip
            first, added = add_trials(net, docs, ips, 0.2, hops)
            out["default"] = {"add": stats(added), "add_first_hop": stats(first)}
            show("write → route with 1st next hop", stats(first))
            show("write → 3-way ECMP in FIB", out["default"]["add"])
            out["fib_read_s"] = timed(partial(fib_table, net), 20)
            print(f"  one FIB read (the resolution): {out['fib_read_s'] * 1000:.1f} ms")
            one, every = sigterm_trials(net, ips, trials, hops)
            out["sigterm"], out["sigterm_all"] = stats(one), stats(every)
            show("SIGTERM → next hop gone from one route", out["sigterm"])
            show(f"SIGTERM → next hop gone from all {services} routes", out["sigterm_all"])
            for name in net.nodes:
                net.stop_speaker(name)
            wait_for(lambda: not router.established(), timeout=30, what="sessions down")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def bgp_lab(
    topo: Topology, lay: LabLayout, work: Path, manifests: Path
) -> tuple[LabNetwork, Router, set[str]]:
    """The routed lab (BGP only, BIRD running, no speaker yet) and the nodes' addresses."""
    net = LabNetwork(topo, lay, work, manifests, router="bird", modes=("bgp",),
                     poll_interval=None)  # fmt: skip
    net.build()
    return net, net.start_router(), {n.address for n in net.nodes.values()}


def fib_holds(net: LabNetwork, prefix: str, want: set[str] | None) -> bool:
    """The router's route for ``prefix`` has exactly the next hops ``want`` (None: any)."""
    got = fib_next_hops(net.router, prefix)
    return got == want if want is not None else bool(got)


def add_trials(
    net: LabNetwork, docs: list[dict[str, Any]], ips: dict[str, list[str]], spacing: float,
    hops: set[str],
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Each Service in turn: rename → its /32 in the FIB with a first, then every next hop."""
    first: list[float] = []
    every: list[float] = []
    rng = random.Random(1)
    for doc in docs:
        name = doc["metadata"]["name"]
        prefix = f"{ips[f'lab/{name}'][0]}/32"
        tmp = net.manifests / f".{name}.yaml.tmp"
        tmp.write_text(yaml.safe_dump(doc))
        # A random pause: no change lands right after the previous one's reload.
        time.sleep(rng.uniform(0, spacing))
        t0 = time.monotonic()
        tmp.rename(net.manifests / f"{name}.yaml")
        poll(partial(fib_holds, net, prefix, None))
        first.append(time.monotonic() - t0)
        poll(partial(fib_holds, net, prefix, hops))
        every.append(time.monotonic() - t0)
    return first, every


def fib_table(net: LabNetwork) -> dict[str, set[str]]:
    """The router's BGP-learned IPv4 routes (one `ip` call): destination → next hops."""
    routes = json.loads(net.router.ip("-4", "-j", "route", "show", "proto", "bird") or "[]")
    table: dict[str, set[str]] = {}
    for r in routes:
        hops = {nh["gateway"] for nh in r.get("nexthops", []) if "gateway" in nh}
        table[r["dst"]] = hops | ({r["gateway"]} if "gateway" in r else set())
    return table


def sigterm_trials(
    net: LabNetwork, ips: dict[str, list[str]], trials: int, hops: set[str]
) -> tuple[list[float], list[float]]:
    """SIGTERM → the node's next hop gone from the first Service's route, and from all."""
    first = ips["lab/svc-00"][0]
    count = len(ips)
    names = sorted(net.nodes)
    one: list[float] = []
    every: list[float] = []
    for t in range(trials):
        victim = net.nodes[names[t % len(names)]]
        proc = victim.speaker
        assert proc is not None
        table = fib_table(net)
        assert len(table) == count and all(h == hops for h in table.values()), table
        t0 = time.monotonic()
        net.terminate_speaker(victim.name)
        while len(every) == t:
            table = fib_table(net)
            now = time.monotonic() - t0
            if len(one) == t and victim.address not in table.get(first, set()):
                one.append(now)
            if not any(victim.address in h for h in table.values()):
                every.append(now)
            if now > 30:
                raise TimeoutError("the next hop did not go within 30 s")
            time.sleep(0.005)
        proc.wait(timeout=20)
        net.start_speaker(victim.name)
        poll(lambda: list(fib_table(net).values()) == [hops] * count, timeout=60)
    return one, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer trials")
    parser.add_argument("--skip-netns", action="store_true", help="only the pure part")
    args = parser.parse_args()
    log.configure("warning", json=False)
    sizes = [200, 1000] if args.quick else [1000, 10000]
    result: dict[str, Any] = {"quick": args.quick, "pure": pure(sizes)}
    reason = "--skip-netns" if args.skip_netns else netns_available()
    missing = [b for b in ("bird", "birdc") if shutil.which(b) is None]
    reason = reason or (f"not installed: {', '.join(missing)}" if missing else None)
    if reason:
        print(f"end to end skipped: {reason}")
        result["netns_skipped"] = reason
    else:
        count, trials = (8, 3) if args.quick else (20, 5)
        print(f"end to end: {count} Services one at a time, 3 nodes, BIRD ECMP router")
        result["netns"] = netns(count, trials)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
