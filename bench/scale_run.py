"""``teapot-lb run`` itself at 100k Services and 1,000 Nodes (issue 19), BGP to BIRD.

Usage (as root, BIRD 2 installed): ``.venv/bin/python bench/scale_run.py [--services 100000]
[--nodes 1000] [--changes 5] [--modes bgp,l2,vip]``

The manifests are ``bench/speaker.py``'s cluster (1,000 Nodes, five pools, one BGPPeer,
BGP/L2/VIP advertisements, ~70 % BGP, ~25 % L2, 50 VIP Services, a tenth with
``externalTrafficPolicy: Local`` and their EndpointSlices; the VIPAdvertisement selects 8
nodes, as VRRP's 254 priorities require), the Services in files of 1,000.
Two namespaces joined by a veth: ``n1`` (192.0.2.11, 2001:db8::11, interface ``eth0``)
runs ``teapot-lb run --node n1`` as an operator would, ``rtr`` (192.0.2.1) runs BIRD, the
BGPPeer. Nothing else exists: the other 999 nodes are Nodes in the manifests only.

Measured, on the product's own path:

1. start → every route n1 announces in BIRD's table (the count ``status.json`` reports);
2. ``teapot-lb run``'s RSS then, and its high-water mark (VmHWM) since start;
3. one new Service file (a BGP pool, IPv6, asking for a free IP) written → its route in
   BIRD's table, ``--changes`` times; RSS after them;
4. the newest of them edited to ask for another IP → the new route in BIRD and the old
   one gone; then its file removed → its route gone;
5. the oldest Service annotated (an annotation that decides no IP) in its file of 1,000 →
   the reload the process logs for it (how it read, its seconds, and the time from the
   file's rename to that log line);
6. the time of each reload and step as the process logs them.

Last line: JSON.
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

from teapot_lb.lab.processes import start_run
from teapot_lb.lab.router import Bird, RouterConfig, RouterError, Session
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import speaker as speaker_bench  # noqa: E402  (a sibling script: the cluster's documents)

NODE, NODE6, ROUTER, ROUTER6 = "192.0.2.11", "2001:db8::11", "192.0.2.1", "2001:db8::1"
PER_FILE = 1000
VIP_NODES, VIP_LABEL = 8, "bench.teapot.io/vip"
Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def write_manifests(root: Path, services: int, nodes: int) -> None:
    docs = speaker_bench.cluster_docs(services, nodes)
    for doc in docs:
        if doc["kind"] == "AddressPool" and doc["metadata"]["name"] == "bgp6":
            doc["spec"]["addresses"] = ["2001:db8:100::/104"]  # room for 100k Services
        if doc["kind"] == "Node" and doc["metadata"]["name"] == "n1":
            doc["status"]["addresses"].append({"type": "InternalIP", "address": NODE6})
        if doc["kind"] == "Node" and int(doc["metadata"]["name"][1:]) <= VIP_NODES:
            doc["metadata"]["labels"][VIP_LABEL] = "yes"
        if doc["kind"] == "VIPAdvertisement":  # VRRP has 254 priorities: 8 nodes take part
            doc["spec"]["nodeSelectors"] = [{"matchLabels": {VIP_LABEL: "yes"}}]
    config = [d for d in docs if d["kind"] not in ("Service", "EndpointSlice")]
    rest = [d for d in docs if d["kind"] in ("Service", "EndpointSlice")]
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.dump_all(config, Dumper=Dumper))
    for n, start in enumerate(range(0, len(rest), PER_FILE)):
        chunk = rest[start : start + PER_FILE]
        (root / f"services-{n:04d}.yaml").write_text(yaml.dump_all(chunk, Dumper=Dumper))


def proc_kb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return float(line.split()[1])
    return 0.0


def route_count(bird: Bird) -> int:
    """Routes in BIRD's tables (``show route count``: "N of N routes for N networks")."""
    total = 0
    for line in bird.birdc("show route count").splitlines():
        words = line.split()
        if "routes" in words and words[0].isdigit():
            total += int(words[0])
    return total


def status(state: Path) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads((state / "status.json").read_text())
    except (OSError, ValueError):
        return None
    return doc


def announced_bgp(state: Path, services: int) -> int | None:
    """The number of BGP routes n1 announces, once status.json covers every Service."""
    doc = status(state)
    if doc is None or len(doc.get("services", {})) < services:
        return None
    peers = doc.get("bgp", {}).get("peers", {})
    if not peers or any(str(p.get("state")).lower() != "established" for p in peers.values()):
        return None
    return len(doc.get("announcing", {}).get("bgp", []))


def new_service(i: int) -> tuple[dict[str, Any], str]:
    """A new BGP Service (not Local) asking for a free IP of its pool, and that IP (so the
    bench asks BIRD for that one route: counting 70k routes every 10 ms loads BIRD)."""
    (doc,) = speaker_bench.service_docs(10**6 + 10 * i, ("bgp6", True), [])
    ip = f"2001:db8:100::ff:{i + 1:x}"
    doc["metadata"]["annotations"]["lb.teapot.io/ips"] = ip
    return doc, ip


def write_atomically(path: Path, doc: dict[str, Any]) -> float:
    """Write `doc` to `path` (a temporary file renamed into place); when it was renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.dump(doc, Dumper=Dumper))
    t = time.monotonic()
    tmp.rename(path)
    return t


def edit_and_remove(manifests: Path, bird: Bird, i: int) -> tuple[float, float]:
    """The newest Service (new Service `i`) edited to ask for another IP → the new IP's
    route in BIRD and the old one's gone; then its file removed → that route gone."""
    doc, old = new_service(i)
    new = "2001:db8:100::fe:1"
    doc["metadata"]["annotations"]["lb.teapot.io/ips"] = new
    t = write_atomically(manifests / f"new-{i}.yaml", doc)
    wait_for(lambda: has_route(bird, new) and not has_route(bird, old), timeout=600,
             what=f"edited Service's route {new} in BIRD, {old} gone", every=0.01)  # fmt: skip
    edited = time.monotonic() - t
    t = time.monotonic()
    (manifests / f"new-{i}.yaml").unlink()
    wait_for(lambda: not has_route(bird, new), timeout=600,
             what=f"removed Service's route {new} gone from BIRD", every=0.01)  # fmt: skip
    return edited, time.monotonic() - t


def annotate_oldest(manifests: Path, log: Path) -> dict[str, Any]:
    """The first Service of the first file annotated → the reload the process logs for it."""
    path = manifests / "services-0000.yaml"
    docs = list(yaml.load_all(path.read_text(), Loader=Loader))
    docs[0]["metadata"].setdefault("annotations", {})["example.org/owner"] = "team-a"
    before = len(reloads(log))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.dump_all(docs, Dumper=Dumper))
    t = time.monotonic()
    tmp.rename(path)
    wait_for(lambda: len(reloads(log)) > before, timeout=600,
             what="the reload of the annotated Service logged", every=0.01)  # fmt: skip
    seen = time.monotonic() - t
    entry = reloads(log)[before]
    return {
        "read": entry.get("read"),
        "assigned": entry.get("assigned"),
        "seconds": entry.get("seconds"),
        "logged_s": round(seen, 3),
    }


def reloads(log: Path) -> list[dict[str, Any]]:
    return [e for e in log_entries(log) if e.get("event") == "manifests loaded"]


def log_entries(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def has_route(bird: Bird, ip: str) -> bool:
    try:
        return f"{ip}/128" in bird.birdc(f"show route for {ip}")
    except RouterError:  # "Network not found" exits non-zero
        return False


def timings(log: Path) -> dict[str, list[float]]:
    """The durations the process logged (reloads, steps), by event."""
    out: dict[str, list[float]] = {}
    for entry in log_entries(log):
        for key in ("duration_s", "took_s", "seconds"):
            if isinstance(entry.get(key), (int, float)):
                out.setdefault(str(entry.get("event")), []).append(float(entry[key]))
    return out


def run(services: int, nodes: int, changes: int, modes: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="teapot-bench-scale-run-"))
    out: dict[str, Any] = {"services": services, "nodes": nodes, "modes": modes}
    try:
        manifests, state, log = work / "manifests", work / "state", work / "run.log"
        t0 = time.monotonic()
        write_manifests(manifests, services, nodes)
        out["manifests_written_s"] = round(time.monotonic() - t0, 1)
        with Topology("sclrun") as topo:
            rtr, n1 = topo.add_host("rtr"), topo.add_host("n1")
            topo.link_pair(rtr, n1, a_if="eth0", b_if="eth0",
                           a_addrs=[f"{ROUTER}/24", f"{ROUTER6}/64"],
                           b_addrs=[f"{NODE}/24", f"{NODE6}/64"])  # fmt: skip
            session = Session(NODE, 64512, 90, 30)
            bird = Bird(rtr, work / "bird", RouterConfig(64500, ROUTER, (session,)))
            bird.start()
            wait_for(bird.ready, timeout=30, what="BIRD answering")
            t0 = time.monotonic()
            proc = start_run(n1, "n1", manifests=manifests, state_dir=state,
                             modes=modes.split(","), poll_interval=None, log_path=log)  # fmt: skip
            try:
                wait_for(lambda: announced_bgp(state, services) is not None, timeout=3600,
                         what="status.json with every Service, session up", every=0.5)  # fmt: skip
                want = announced_bgp(state, services)
                assert want is not None
                wait_for(lambda: route_count(bird) >= want, timeout=3600,
                         what=f"{want} routes in BIRD", every=0.5)  # fmt: skip
                out["start_to_routes_s"] = round(time.monotonic() - t0, 1)
                out["routes"] = want
                out["rss_mb"] = round(proc_kb(proc.pid, "VmRSS") / 1024, 1)
                out["peak_rss_mb"] = round(proc_kb(proc.pid, "VmHWM") / 1024, 1)
                times = []
                for i in range(changes):
                    doc, ip = new_service(i)
                    assert not has_route(bird, ip)
                    t1 = write_atomically(manifests / f"new-{i}.yaml", doc)
                    wait_for(lambda: has_route(bird, ip), timeout=600,  # noqa: B023
                             what=f"new Service {i}'s route {ip} in BIRD", every=0.01)  # fmt: skip
                    times.append(time.monotonic() - t1)
                out["change_to_route_s"] = [round(t, 3) for t in times]
                out["change_to_route_p50_s"] = round(statistics.median(times), 3)
                if changes:
                    edited, removed = edit_and_remove(manifests, bird, changes - 1)
                    out["edit_newest_to_route_s"] = round(edited, 3)
                    out["remove_newest_to_withdrawn_s"] = round(removed, 3)
                routes = route_count(bird)
                out["annotate_oldest"] = annotate_oldest(manifests, log)
                out["annotate_oldest"]["routes_kept"] = route_count(bird) == routes
                out["rss_after_changes_mb"] = round(proc_kb(proc.pid, "VmRSS") / 1024, 1)
                out["peak_rss_after_changes_mb"] = round(proc_kb(proc.pid, "VmHWM") / 1024, 1)
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=120)
                except Exception:
                    proc.kill()
                bird.stop()
        out["logged"] = {k: [round(v, 3) for v in vs[-8:]] for k, vs in timings(log).items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--modes", default="bgp,l2,vip")
    args = parser.parse_args()
    reason = netns_available()
    if reason or shutil.which("bird") is None:
        sys.exit(f"needs root and BIRD 2: {reason or 'bird not installed'}")
    figures = run(args.services, args.nodes, args.changes, args.modes)
    print(
        f"teapot-lb run {args.services} Services x {args.nodes} nodes ({args.modes}): "
        f"start -> {figures['routes']} routes in BIRD {figures['start_to_routes_s']} s, "
        f"RSS {figures['rss_mb']} MB (peak {figures['peak_rss_mb']}), one new Service -> "
        f"route p50 {figures['change_to_route_p50_s']} s {figures['change_to_route_s']}, "
        f"RSS after {figures['rss_after_changes_mb']} MB "
        f"(peak {figures['peak_rss_after_changes_mb']}); the newest edited -> new route "
        f"{figures.get('edit_newest_to_route_s')} s, removed -> withdrawn "
        f"{figures.get('remove_newest_to_withdrawn_s')} s; the oldest annotated -> "
        f"reload {figures['annotate_oldest']}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
