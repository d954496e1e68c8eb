"""Benchmark scale (issue 19): liveness at 10 / 100 / 1,000 nodes, bounded ECMP, 100k Services.

Usage: ``.venv/bin/python bench/scale.py [--quick] [--sizes 10,100,1000] [--fp-seconds S]
[--seed N] [--ecmp-nodes N --ecmp-ips I --k K] [--services S --speaker-nodes N]
[--skip-controller] [--skip-speaker] [--speaker-api]``

1. **Liveness (simulated).** ``teapot_lb.sim.liveness``: N real heartbeat cores
   (``membership.core``, HMAC on) on a simulated LAN (0.2-0.3 ms one way) with 1 % loss on
   every datagram, from a staggered start. Per N: datagrams sent + received per node per
   second over a steady window; detection of a killed node (time from the kill until each
   other node holds it DEAD: p50 and max over every observer of every victim); false
   positives (a live node held DEAD anywhere) after the warm-up (``--warmup``, 6 s: the
   start's presences are answered again 1 s and 3 s later), over ``--fp-seconds``
   simulated seconds (10 minutes by default; the simulator is CPU-bound, so larger N get
   the budget said in the output, never a smaller loss; a progress line every 60 simulated
   s says how far a long window got). The full mesh it replaced would
   cost ``2 (N-1) / interval`` per node (printed for comparison, computed).
2. **Bounded ECMP.** ``announce.election.chosen`` (what the planner runs for
   ``maxNodesPerIP``) for every IP among N nodes, then again without one node: the share of
   IPs whose next-hop set changed (goal <= 1.5 k/N) and the router's FIB (routes, paths).
3. **Controller, 100k Services** against the fake API server: ``bench/controller_scale.py``
   (the real ``teapot-lb controller`` process), time until all are assigned, peak RSS.
4. **Speaker, 100k Services and 1,000 Nodes**: in a child process, node n1's
   ``NodeSpeaker`` (BGP with a recording speaker, L2 without sockets, as in
   ``bench/speaker.py``) over a Store holding the Services (assigned by the standalone
   core), the Nodes and the configuration: first step, RSS after it, and the median step
   after one new Service (BGP; then L2, whose step includes the L2 backend's own claims
   and election orders, responders recording instead of answering). With
   ``--speaker-api``, again for the API speaker: this process writes the same objects as
   the API server lists them (JSON per kind, with uid, resourceVersion and the Services'
   status), and the child's ``KubeSource`` informers (with the speaker's projection, as
   ``teapot-lb speaker`` runs them) list them from a stand-in client into its Store, in
   pages of the informers' limit (500) as the API server serves them, one page's body
   parsed at a time; then the same steps.

Figures were measured on a shared 2-core machine with other jobs running. Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv6Address, ip_address
from pathlib import Path
from typing import Any

from teapot_lb.announce.election import chosen
from teapot_lb.membership.core import Timing
from teapot_lb.sim.liveness import LivenessCluster
from teapot_lb.sim.network import Network

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import controller_scale  # noqa: E402  (a sibling script: the existing controller bench)
import speaker as speaker_bench  # noqa: E402  (a sibling script: the speaker bench's fixtures)

# --------------------------------------------------------------------------- liveness


def liveness(
    n: int, fp_seconds: float, victims: int, seed: int, warmup: float = 6.0
) -> dict[str, Any]:
    timing = Timing()
    names = [f"n{i:04d}" for i in range(n)]
    cluster = LivenessCluster(names, timing=timing, network=Network(loss=0.01, seed=seed))
    cpu0 = time.process_time()
    cluster.start(stagger=1.0)
    cluster.run(warmup)  # past the start's presences and their answers (at 1 s and 3 s)
    warm = cluster.clock.now
    startup_false = len(cluster.false_deaths())
    window = 2.0
    before = cluster.datagrams()
    cluster.run(window)
    rate = (cluster.datagrams() - before) / n / window
    done = window
    while done < fp_seconds:  # in steps, with progress: a long window may be cut short
        step = min(60.0, fp_seconds - done)
        cluster.run(step)
        done += step
        print(
            f"  {n} nodes: {done:.0f} of {fp_seconds:.0f} simulated s after the warm-up, "
            f"false positives {len(cluster.false_deaths(since=warm))}, startup "
            f"{startup_false}, CPU {time.process_time() - cpu0:.0f} s",
            flush=True,
        )
    false = cluster.false_deaths(since=warm)
    delays: list[float] = []
    undetected = 0
    phase = random.Random(seed)
    for victim in names[1 : 1 + victims]:
        cluster.run(phase.uniform(0.0, timing.interval))  # die anywhere between two beats
        at = cluster.clock.now
        cluster.kill(victim)
        cluster.run(1.0)
        seen = cluster.deaths(victim, at)
        observers = [m for m, node in cluster.nodes.items() if node.up]
        undetected += sum(1 for m in observers if m not in seen)
        delays += [seen[m] - at for m in observers if m in seen]
    false_after = [c for c in cluster.false_deaths(since=warm) if c not in false]
    return {
        "nodes": n,
        "msgs_per_node_s": round(rate, 1),
        "full_mesh_msgs_per_node_s": round(2 * (n - 1) / timing.interval, 1),
        "detect_p50_s": round(statistics.median(delays), 4),
        "detect_max_s": round(max(delays), 4),
        "undetected": undetected,
        "false_positives": len(false) + len(false_after),
        "fp_simulated_s": fp_seconds,
        "startup_false_positives": startup_false,
        "converged": cluster.converged(),
        "events": cluster.clock.events,
        "cpu_s": round(time.process_time() - cpu0, 1),
    }


# --------------------------------------------------------------------------- bounded ECMP


def ecmp(nodes: int, ips: int, k: int) -> dict[str, Any]:
    names = [f"node-{i:04d}" for i in range(nodes)]
    addresses = [IPv6Address("2001:db8:300::") + i for i in range(ips)]
    t0 = time.process_time()
    before = {ip: frozenset(chosen(ip, names, k)) for ip in addresses}
    choose_s = (time.process_time() - t0) / ips
    victim = names[nodes // 2]
    rest = [n for n in names if n != victim]
    after = {ip: frozenset(chosen(ip, rest, k)) for ip in addresses}
    moved = sum(1 for ip in addresses if before[ip] != after[ip])
    lost = sum(1 for ip in addresses if victim in before[ip])
    load = [sum(1 for s in before.values() if n in s) for n in names]
    return {
        "nodes": nodes,
        "ips": ips,
        "k": k,
        "moved_share": round(moved / ips, 5),
        "goal_share": round(1.5 * k / nodes, 5),
        "moved_only_where_lost": moved == lost,
        "fib_routes": ips,
        "fib_paths": sum(len(s) for s in before.values()),
        "fib_paths_unbounded": ips * nodes,
        "ips_per_node_min_max": [min(load), max(load)],
        "choose_per_ip_ms": round(choose_s * 1000, 3),
    }


# --------------------------------------------------------------------------- controller


def controller(services: int, timeout: float) -> dict[str, Any]:
    args = argparse.Namespace(services=services, concurrency=32, timeout=timeout)
    figures: dict[str, Any] = asyncio.run(controller_scale.run(args))
    return figures


# --------------------------------------------------------------------------- speaker


def vm_kb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return 0.0


def speaker_setup(services: int, nodes: int) -> tuple[Any, Any]:
    """The cluster's objects and what the standalone core assigns them: (a view of
    everything, the assignment of each Service)."""
    from teapot_lb.standalone.assign import assign

    docs = speaker_bench.cluster_docs(services, nodes)
    for doc in docs:  # the bench's /112 holds 65,536: room for 100k Services
        if doc["kind"] == "AddressPool" and doc["metadata"]["name"] == "bgp6":
            doc["spec"]["addresses"] = ["2001:db8:100::/104"]
    raw = speaker_bench.store_of(docs).view()
    assigned = assign(raw)
    refused = [a.key for a in assigned.values() if a.refused]
    assert not refused, f"refused: {refused[:3]}"
    return raw, assigned


def api_objects(services: int, nodes: int, path: Path) -> None:
    """Write every object of the set-up as the API server would list it (JSON, with uid,
    resourceVersion and the Services' status) to `path`: what the API speaker reads."""
    from teapot_lb.cluster import Kind
    from teapot_lb.standalone.assign import assigned_services

    raw, assignments = speaker_setup(services, nodes)
    assigned = assigned_services(raw, assignments)
    items: list[str] = []
    lists: dict[str, list[str]] = {}
    objects = {**speaker_bench.kinds_of(raw), Kind.SERVICE: assigned}
    for kind, objs in objects.items():
        for obj in objs.values():
            if isinstance(obj, dict) or not hasattr(obj, "model_dump"):
                continue  # Secrets: none in the set-up
            doc = obj.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            n = len(lists) * 10**6 + len(items)
            doc["metadata"] |= {"uid": f"{n:08d}-0000-4000-8000-{n:012d}",
                                "resourceVersion": str(n + 1),
                                "creationTimestamp": "2026-12-03T12:00:00Z"}  # fmt: skip
            doc["kind"], doc["apiVersion"] = kind.value, obj.api_version
            items.append(json.dumps(doc))  # as it stands in a list response's body
        lists[kind.value] = items
        items = []
    path.write_text(json.dumps(lists))


class ListedClient:
    """The API server's list answers from a file (each kind's objects as JSON texts),
    served in pages of the limit asked for, each page's body parsed as it is received;
    watches that stay open with nothing to say. Enough for the speaker's informers to
    fill its Store."""

    def __init__(self, path: Path) -> None:
        self.objects: dict[str, list[str]] = json.loads(path.read_text())

    async def list_pages(self, res: Any, *, limit: int = 0, **_: Any) -> Any:
        from teapot_lb.kube.client import ObjectList
        from teapot_lb.model.kinds import KINDS

        kind = next(i.kind.value for i in KINDS if i.resource == res)
        texts = self.objects.pop(kind, [])
        first = True
        while True:
            size = limit or len(texts)
            body = "[" + ",".join(texts[:size]) + "]"  # one page's body, as the server sends it
            del texts[:size]
            page = ObjectList(json.loads(body), "1", first=first)
            del body
            first = False
            yield page
            if not texts:
                return

    async def watch(self, res: Any, **_: Any) -> Any:
        await asyncio.Event().wait()
        yield  # pragma: no cover (never reached: an async generator)


def speaker_child(services: int, nodes: int, repeats: int, listed: str | None) -> dict[str, Any]:
    """Runs in its own process, so that RSS is the speaker's (plus what Python needs).

    Without `listed`, the Store is filled from the standalone set-up as ``teapot-lb run``
    fills it (the parsed manifests, and beside them what the standalone core assigned each
    Service; a new Service comes the same way); with it, the way
    the API speaker fills it: its informers (``KubeSource`` with the speaker's projection)
    list the objects of that file from a stand-in client. The C allocator is set as
    ``teapot-lb speaker`` and ``teapot-lb run`` set it (large freed blocks go back)."""
    from teapot_lb.cluster import Kind, Store
    from teapot_lb.longlived import release_large_blocks
    from teapot_lb.model.manifest import parse_object
    from teapot_lb.speaker.bgp_backend import BGPBackend
    from teapot_lb.speaker.kube_source import KubeSource
    from teapot_lb.speaker.node import NodeSpeaker
    from teapot_lb.standalone.assign import Assignment

    release_large_blocks()
    store = Store()
    source: KubeSource | None = None
    if listed is None:
        raw, assigned = speaker_setup(services, nodes)
        for kind, objs in speaker_bench.kinds_of(raw).items():
            store.replace(kind, objs)
        store.replace(Kind.SERVICE, raw.services)
        store.replace_assigned(assigned)
        del raw, assigned
    else:
        source = asyncio.run(fill_from_api(store, Path(listed)))
    gc.collect()
    rss_before = vm_kb("VmRSS") / 1024
    fill_peak = vm_kb("VmHWM") / 1024  # the fill's own high-water mark (the informers' lists)
    node_names = [f"n{i}" for i in range(1, nodes + 1)]
    speaker = NodeSpeaker("n1", store, bgp=BGPBackend(speaker_bench.FakeSpeaker))
    speaker.l2 = speaker_bench.FakeL2(node_names)

    async def steps() -> tuple[float, list[float], list[float]]:
        t0 = time.perf_counter()
        await speaker.step()
        first = time.perf_counter() - t0
        # IPs of the pools past those the set-up assigned (bgp6 2001:db8:100::/104, l2-6
        # 2001:db8:200::/112, each filled from its start).
        times = await changes("bgp6", "2001:db8:100::ff:{:x}", 0)
        return first, times, await changes("l2-6", "2001:db8:200::ff{:02x}", 1)

    async def changes(pool: str, ip_form: str, offset: int) -> list[float]:
        """One new Service (not Local) in `pool` at a time, the step after each timed; each
        must then be planned in its pool's mode (announced by every node in BGP, in the L2
        election orders), or the bench measured a Service that nothing announces."""
        times = []
        for r in range(repeats):
            (doc,) = speaker_bench.service_docs(10**6 + 10 * r + offset, (pool, True), [])
            ip = ip_form.format(r + 1)  # (as the plan writes it)
            if source is not None:  # as the informer's handler does
                doc["status"] = {"loadBalancer": {"ingress": [{"ip": ip}]}}
            obj, problems = parse_object(doc)
            assert obj is not None and not problems, problems
            if source is not None:
                key = source.staging.put_object(obj)
                staged = source.staging.get(Kind.SERVICE, key)
                assert staged is not None
                store.put(Kind.SERVICE, key, staged)
            else:  # as teapot-lb run's reload does
                key = store.put_object(obj)
                store.assign(key, Assignment(key, (ip_address(ip),), pool))
            t0 = time.perf_counter()
            result = await speaker.step()
            times.append(time.perf_counter() - t0)
            if pool.startswith("bgp"):
                announced = [a.ip for a in result.announcing.get(key, ())]
                assert announced == [ip], f"{key} ({ip}) not announced: {announced}"
            else:
                assert ip in l2_orders(), f"{key} ({ip}) not in the L2 election orders"
        return times

    def l2_orders() -> Any:
        l2 = speaker.l2
        assert l2 is not None
        return l2.orders

    first, times, l2_times = asyncio.run(steps())
    l2 = speaker.l2
    assert isinstance(l2, speaker_bench.FakeL2)
    # Three rounds of the node changes (one step each is a single sample of a ±10-ms
    # spread): all of them reported, the median and the largest of each change.
    rounds = [
        asyncio.run(speaker_bench.node_change_steps(speaker, l2, nodes, r)) for r in (1, 2, 3)
    ]
    return {
        "services": services,
        "nodes": nodes,
        "fill": "api" if listed else "standalone",
        "store_rss_mb": round(rss_before, 1),
        "rss_mb": round(vm_kb("VmRSS") / 1024, 1),
        "peak_rss_mb": round(vm_kb("VmHWM") / 1024, 1),
        "fill_peak_rss_mb": round(fill_peak, 1),
        "first_step_s": round(first, 2),
        "change_step_s": round(statistics.median(times), 4),
        "change_steps_s": [round(t, 4) for t in times],
        "l2_change_step_s": round(statistics.median(l2_times), 4),
        "l2_change_steps_s": [round(t, 4) for t in l2_times],
        "node_change_steps_s": {
            k: round(statistics.median(r[k] for r in rounds), 4) for k in rounds[0]
        },
        "node_change_steps_max_s": {k: round(max(r[k] for r in rounds), 4) for k in rounds[0]},
        "node_change_rounds_s": [{k: round(v, 4) for k, v in r.items()} for r in rounds],
    }


async def fill_from_api(store: Any, listed: Path) -> Any:
    """The API speaker's informers list every kind into `store`; returns the source."""
    from teapot_lb.cluster.projection import speaker_projection
    from teapot_lb.lab.wait import wait_for_async
    from teapot_lb.speaker.kube_source import KubeSource

    client = ListedClient(listed)
    source = KubeSource(client, store, lambda: None, project=speaker_projection)  # type: ignore[arg-type]
    task = asyncio.create_task(source.run())
    await wait_for_async(lambda: source.synced, within=3600, what="every kind listed")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return source


def speaker(services: int, nodes: int, repeats: int, api: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--speaker-child", f"{services},{nodes},{repeats}"]
    with tempfile.TemporaryDirectory(prefix="teapot-scale-") as work:
        if api:  # the objects are made here, so the child's memory holds none of the set-up
            listed = Path(work) / "listed.json"
            api_objects(services, nodes, listed)
            cmd += ["--speaker-listed", str(listed)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"speaker child failed: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs")
    parser.add_argument("--sizes", default=None, help="liveness cluster sizes (10,100,1000)")
    parser.add_argument("--fp-seconds", default=None, help="simulated s per size (600,600,60)")
    parser.add_argument("--victims", type=int, default=3, help="nodes killed per size")
    parser.add_argument("--seed", type=int, default=1, help="loss seed of the first size (+1 each)")
    parser.add_argument("--warmup", type=float, default=6.0, help="simulated s before measuring")
    parser.add_argument("--ecmp-nodes", type=int, default=1000)
    parser.add_argument("--ecmp-ips", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--services", type=int, default=100_000)
    parser.add_argument("--speaker-nodes", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800.0, help="controller: give up")
    parser.add_argument("--skip-liveness", action="store_true")
    parser.add_argument("--skip-ecmp", action="store_true")
    parser.add_argument("--skip-controller", action="store_true")
    parser.add_argument("--skip-speaker", action="store_true")
    parser.add_argument("--speaker-api", action="store_true",
                        help="also the speaker filled by its informers (API mode)")  # fmt: skip
    parser.add_argument("--speaker-child", help=argparse.SUPPRESS)
    parser.add_argument("--speaker-listed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.speaker_child:
        services, nodes, repeats = (int(x) for x in args.speaker_child.split(","))
        print(json.dumps(speaker_child(services, nodes, repeats, args.speaker_listed)))
        return
    quick = args.quick
    sizes = [int(x) for x in (args.sizes or ("10,100" if quick else "10,100,1000")).split(",")]
    default_fp = "5,5" if quick else "600,600,60"
    fps = [float(x) for x in (args.fp_seconds or default_fp).split(",")]
    fps += [fps[-1]] * (len(sizes) - len(fps))
    out: dict[str, Any] = {"liveness": {}}
    if args.skip_liveness:
        sizes, fps = [], []
    print(f"{'nodes':>6} {'msgs/node/s':>11} {'mesh':>8} {'p50':>7} {'max':>7} {'FP':>3} "
          f"{'over':>6} {'cpu':>7}")  # fmt: skip
    for i, (n, fp) in enumerate(zip(sizes, fps, strict=True)):
        row = liveness(n, fp, args.victims, seed=args.seed + i, warmup=args.warmup)
        out["liveness"][str(n)] = row
        print(
            f"{n:>6} {row['msgs_per_node_s']:>11} {row['full_mesh_msgs_per_node_s']:>8} "
            f"{row['detect_p50_s']:>7} {row['detect_max_s']:>7} {row['false_positives']:>3} "
            f"{fp:>5.0f}s {row['cpu_s']:>6}s  (startup FP {row['startup_false_positives']},"
            f" undetected {row['undetected']}, converged {row['converged']})",
            flush=True,
        )
    ecmp_nodes, ecmp_ips = (100, 1000) if quick else (args.ecmp_nodes, args.ecmp_ips)
    e = out["ecmp"] = {} if args.skip_ecmp else ecmp(ecmp_nodes, ecmp_ips, args.k)
    if e:
        print(
            f"bounded ECMP {ecmp_nodes} nodes, {ecmp_ips} IPs, k={args.k}: moved share "
            f"{e['moved_share']} (goal <= {e['goal_share']}), only where lost "
            f"{e['moved_only_where_lost']}; FIB {e['fib_routes']} routes, {e['fib_paths']} "
            f"paths (unbounded {e['fib_paths_unbounded']}); IPs per node "
            f"{e['ips_per_node_min_max']}; {e['choose_per_ip_ms']} ms per IP",
            flush=True,
        )
    services = 2000 if quick else args.services
    if not args.skip_controller:
        c = out["controller"] = controller(services, args.timeout)
        print(
            f"controller {services} Services: all assigned {c['all_assigned_s']} s, peak RSS "
            f"{c['rss_mb']} MB, controller CPU {c['controller_cpu_s']} s",
            flush=True,
        )
    if not args.skip_speaker:
        nodes = 100 if quick else args.speaker_nodes
        s = out["speaker"] = speaker(services, nodes, repeats=5)
        print(
            f"speaker {services} Services x {nodes} nodes: RSS {s['rss_mb']} MB (store alone "
            f"{s['store_rss_mb']} MB, peak {s['peak_rss_mb']} MB), first step "
            f"{s['first_step_s']} s, step after one change {s['change_step_s']} s (BGP), "
            f"{s['l2_change_step_s']} s (L2)",
            flush=True,
        )
    if args.speaker_api and not args.skip_speaker:
        nodes = 100 if quick else args.speaker_nodes
        s = out["speaker_api"] = speaker(services, nodes, repeats=5, api=True)
        print(
            f"speaker (API: its informers filled the Store) {services} Services x {nodes} "
            f"nodes: RSS {s['rss_mb']} MB (store alone {s['store_rss_mb']} MB, peak "
            f"{s['peak_rss_mb']} MB, of the fill {s['fill_peak_rss_mb']} MB), first step "
            f"{s['first_step_s']} s, step after one change {s['change_step_s']} s (BGP), "
            f"{s['l2_change_step_s']} s (L2)",
            flush=True,
        )
    live = out["liveness"]
    big, mid = live.get("1000", {}), live.get("100", {})
    summary = {
        "msgs_per_node_s_100": mid.get("msgs_per_node_s"),
        "msgs_per_node_s_1000": big.get("msgs_per_node_s"),
        "detect_p50_s_1000": big.get("detect_p50_s"),
        "false_positives_1000": big.get("false_positives"),
        "ecmp_moved_share": e.get("moved_share"),
        "controller_100k_s": out.get("controller", {}).get("all_assigned_s"),
        "controller_100k_rss_mb": out.get("controller", {}).get("rss_mb"),
        "speaker_100k_rss_mb": out.get("speaker", {}).get("rss_mb"),
        "speaker_change_step_s": out.get("speaker", {}).get("change_step_s"),
        "speaker_l2_change_step_s": out.get("speaker", {}).get("l2_change_step_s"),
        "speaker_api_100k_rss_mb": out.get("speaker_api", {}).get("rss_mb"),
    }
    print(json.dumps({**summary, "detail": out}))


if __name__ == "__main__":
    main()
