"""The BGP filtering relay at scale, side by side with BIRD as an equivalent filtering
route server, in one run on the same namespaces (issue 13).

TENANTS tenants x ROUTES host routes (IPv6: the documentation IPv4 space is too small),
each tenant with NODES nodes, each node a BGP session (a BIRD per node, all in a "tenants"
namespace, each with the node's own source address) to the relay, which
passes the accepted routes to an upstream BIRD (ADD-PATH receive, multipath into its
kernel FIB). Every tenant also announces HIJACKS routes it must not (another tenant's
prefix, a covering aggregate, a bogon, a next hop of another tenant's node).

Per implementation (ours: `teapot-lb relay`; BIRD: the same filter rule for rule, see
:func:`bird_relay_conf`, with `next hop keep`, `add paths tx`): every session Established
with the tenants' routes held back, then all static routes enabled at once; the time is from
that moment until the upstream's BGP table holds every accepted path (TENANTS x ROUTES x
NODES), and the CPU the relay (or BIRD as the route server) and the upstream BIRD used in
that window (``/proc/PID/stat``). Then: hijack routes found upstream (must be 0), next hops
per prefix in the upstream's kernel FIB (a sample of one prefix per tenant), and the relay
process's peak RSS. With ``--profile FILE`` the relay runs under cProfile in the timed
window only (SIGUSR1/SIGUSR2 around it; stats in FILE) and its time is split by phase:
receive (read, decode), judge (the tenant's filter), rib (the relay's tables), adj_rib_out
(the diff towards the routers), encode (UPDATEs packed), send, other (event loop, glue).
Profiling slows the relay about twice: compare times of runs without it. With
``--timeline`` the relay logs each flush towards the routers (``relay flush`` at debug: what
called it, the prefixes and paths it carried, its bytes and seconds), and the run prints
them beside the upstream's path count at each look, both from the moment the routes went.

With ``--routers N`` the relay (and BIRD) export to N routers at once, each a BIRD in a
namespace of its own (router 0 alone installs into its kernel): the time is until every
router holds every path, the upstream CPU the routers' sum (issue 37's fan-out). With
``--rounds R`` both run R times, alternating which goes first; the figures are each side's
median round. Between runs the routes the upstream left in its kernel are flushed (before,
the second run's upstream started by sweeping the first one's 100,000 routes).

    .venv/bin/python bench/relay.py --tenants 100 --routes 1000 --nodes 2
    .venv/bin/python bench/relay.py --routers 8 --rounds 3

Last line JSON: routers, rounds, ours_s_rounds, bird_s_rounds, routes, paths, ours_s,
bird_s, ratio_vs_bird, cpu_s, bird_cpu_s,
cpu_ratio_vs_bird, upstream_cpu_s / bird_upstream_cpu_s (the upstream BIRD's, with ours /
with BIRD), quarters_s / bird_quarters_s (seconds until a quarter, half, three quarters
of the paths were upstream), cpu_share_by_phase_profiled (empty without --profile), rss_mb,
bird_rss_mb, hijack_cases, hijack_leaked, ecmp_next_hops_min, tenants, nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.lab.router import fib_next_hops
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology, netns_available
from teapot_lb.netlab.topology import Host

RELAY_AS, UP_AS = 64500, 64496
RELAY, UP = "2001:db8:ffff::1", "2001:db8:ffff::2"


def router_addr(i: int) -> str:
    """Router i's address (router 0 is UP)."""
    return f"2001:db8:ffff::{2 + i:x}"


API = "lb.teapot.io/v1alpha1"


def asn(t: int) -> int:
    return 64601 + t


def node(t: int, n: int) -> str:
    return f"2001:db8:ffff::{t + 1:x}:{n + 1:x}"


def nodes_net(t: int) -> str:
    return f"2001:db8:ffff::{t + 1:x}:0/112"


def alloc(t: int) -> str:
    return f"2001:db8:1:{t:x}::/118"  # 1,024 addresses


def host_route(t: int, i: int) -> str:
    return f"2001:db8:1:{t:x}::{i:x}/128"


def hijacks(t: int, tenants: int) -> list[tuple[str, str | None]]:
    """(prefix, next hop or None for the node's own) routes tenant t must not get through."""
    other = (t + 1) % tenants
    return [
        (host_route(other, 1), None),  # another tenant's prefix
        (f"2001:db8:1:{t:x}::/64", None),  # a covering aggregate
        (f"fc00:{t:x}::/48", None),  # a bogon
        (f"2001:db8:1:{t:x}::3ff/128", node(other, 0)),  # next hop: another tenant's node
    ]


# ------------------------------------------------------------------------------ BIRD


class Bird:
    def __init__(self, host: Host, workdir: Path, conf: str) -> None:
        self.host, self.workdir = host, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.ctl = workdir / "bird.ctl"
        (workdir / "bird.conf").write_text(conf)
        log = (workdir / "bird.out").open("ab")
        self.proc = host.popen(
            ["bird", "-f", "-c", str(workdir / "bird.conf"), "-s", str(self.ctl)],
            stdout=log, stderr=log,
        )  # fmt: skip
        wait_for(lambda: self.ctl.exists() and self.c("show status"), timeout=30,
                 what=f"BIRD in {host.name}")  # fmt: skip

    def c(self, command: str) -> str:
        return self.host.run("birdc", "-s", str(self.ctl), command, check=False)

    def established(self) -> int:
        return len(re.findall(r"\bBGP\b.*\bup\b.*Established", self.c("show protocols")))

    def paths(self) -> int:
        m = re.search(r"(\d+) of (\d+) routes for \d+ networks in table master6",
                      self.c("show route count"))  # fmt: skip
        return int(m.group(2)) if m else 0

    def imported(self) -> int:
        """Paths its protocol ``relay`` imported (a counter: ``show route count`` walks
        the table)."""
        m = re.search(r"Routes:\s+(\d+) imported", self.c("show protocols all relay"))
        return int(m.group(1)) if m else 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def tenant_conf(t: int, n: int, tenants: int, routes: int) -> str:
    """One tenant node's BIRD (one per node: BIRD locks a neighbor address to one session
    at a time, so one instance cannot speak for several nodes to the same relay)."""
    out = ["log stderr all;", f"router id 192.0.{t % 250}.{n + 1};", "protocol device {}"]
    out.append("protocol static st { disabled; ipv6;")
    # Next hops as given (BGP: next hop keep): the node's own, or another tenant's node.
    own = node(t, n)
    out += [f"  route {host_route(t, i)} via {own};" for i in range(1, routes + 1)]
    for prefix, hop in hijacks(t, tenants):
        out.append(f"  route {prefix} via {hop or own};")
    out.append("}")
    out.append(
        # Each instance listens on a port of its own (they share the namespace).
        f"protocol bgp relay {{ local {node(t, n)} port {20000 + 64 * t + n} as {asn(t)};"
        f" neighbor {RELAY} as {RELAY_AS}; direct; ttl security on;"
        " hold time 90; connect retry time 2;"
        " ipv6 { import none; export all; next hop keep; }; }"
    )
    return "\n".join(out) + "\n"


def upstream_conf(i: int = 0) -> str:
    """Router i: router 0 also installs its table into its kernel (multipath: the ECMP
    check); the others (``--routers``) keep theirs in BIRD only."""
    kernel = "protocol kernel { ipv6 { import none; export all; }; merge paths on; }\n"
    return (
        f"log stderr all;\nrouter id 192.0.2.{201 + i};\nprotocol device {{}}\n"
        + (kernel if i == 0 else "")
        + f"protocol bgp relay {{ local {router_addr(i)} as {UP_AS};"
        f" neighbor {RELAY} as {RELAY_AS}; direct; passive on; hold time 90;"
        " ipv6 { import all; export none; add paths rx; gateway direct; }; }\n"
    )


# The RFC 1997 communities limiting a route's reach, which the relay passes on by default.
REACH_LIMITS = "(65535,65281), (65535,65282), (65535,65283)"


def bird_relay_conf(tenants: int, nodes: int, routes: int, routers: int = 1) -> str:
    """BIRD as the equivalent route server, rule for rule with the relay's defaults: per
    tenant, no default route; host routes of its allocation only (which also keeps out
    bogons and other tenants' prefixes); next hop one of its registered node addresses; AS
    path its ASN only (prepends allowed), at most 32 long; communities but the three
    reach limits removed, large ones removed, MED removed; at most ROUTES + 100 accepted
    routes per session (``import limit``, as ``--max-prefixes`` counting accepted, torn
    down); next hop kept; every path sent (ADD-PATH). BIRD treats an AS_CONFED segment
    from an eBGP neighbor as withdraw itself (its AS_PATH check), as the relay's rule 9."""
    out = ["log stderr all;", "router id 192.0.2.202;", "protocol device {}"]
    for t in range(tenants):
        hops = " || ".join(f"bgp_next_hop = {node(t, n)}" for n in range(nodes))
        out.append(
            f"filter tenant{t} {{"
            f" if net ~ [ ::/0 ] then reject;"
            f" if ! (net ~ [ {alloc(t).replace('/118', '/118{128,128}')} ]) then reject;"
            f" if ! ({hops}) then reject;"
            f" if bgp_path.len < 1 || ! (bgp_path ~ [= {asn(t)}+ =]) then reject;"
            " if bgp_path.len > 32 then reject;"
            f" bgp_community.filter([{REACH_LIMITS}]); bgp_large_community.delete([(*,*,*)]);"
            " unset(bgp_med); accept; }"
        )
        for n in range(nodes):
            out.append(
                f"protocol bgp t{t}n{n} {{ local {RELAY} as {RELAY_AS};"
                f" neighbor {node(t, n)} as {asn(t)}; direct; ttl security on; passive on;"
                f" hold time 90; ipv6 {{ import filter tenant{t}; export none;"
                f" import limit {routes + 100} action disable; }}; }}"
            )
    out += [
        f"protocol bgp up{i} {{ local {RELAY} as {RELAY_AS}; neighbor {router_addr(i)} as {UP_AS};"
        " direct; hold time 90;"
        " ipv6 { import none; export all; next hop keep; add paths tx; }; }"
        for i in range(routers)
    ]
    return "\n".join(out) + "\n"


def manifests(tenants: int, nodes: int, routers: int = 1) -> list[dict[str, Any]]:
    meta = {"namespace": "teapot-lb-system"}
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "AddressPool", "metadata": {"name": "tenants", **meta},
         "spec": {"addresses": ["2001:db8:1::/48"]}},
    ]  # fmt: skip
    docs += [
        {"apiVersion": API, "kind": "BGPPeer", "metadata": {"name": f"up{i}", **meta},
         "spec": {"myASN": RELAY_AS, "peerASN": UP_AS, "peerAddress": router_addr(i),
                  "holdTime": "90s", "addPath": "send", "families": ["ipv6-unicast"]}}
        for i in range(routers)
    ]  # fmt: skip
    for t in range(tenants):
        docs.append({
            "apiVersion": API, "kind": "Tenant", "metadata": {"name": f"t{t}"},
            "spec": {"namespace": f"tenant-{t}", "asn": asn(t), "nodeNetworks": [nodes_net(t)],
                     "nodes": [{"name": f"n{n}", "addresses": [node(t, n)]} for n in range(nodes)],
                     "allocations": [{"addressPool": "tenants", "cidrs": [alloc(t)]}]},
        })  # fmt: skip
    return docs


def leaked_paths(up: Bird, t: int, tenants: int, nodes: int, prefix: str) -> int:
    """Paths of a hijack route tenant t sent that the upstream holds: for another
    tenant's prefix, the paths via t's nodes; for the rest, any path at all."""
    entry = up.c(f"show route {prefix} all")
    if "unicast" not in entry:
        return 0
    if prefix == hijacks(t, tenants)[0][0]:
        return sum(1 for n in range(nodes) if re.search(rf"\b{node(t, n)}\b", entry))
    return max(1, entry.count("unicast"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used (``/proc/PID/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The relay under cProfile (``--profile``): SIGUSR1 starts it, SIGUSR2 stops it and writes
# the stats to the file given first, so only the timed window is profiled.
PROFILED = """
import cProfile, signal, sys
out = sys.argv.pop(1)
prof = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
def stop(*_):
    prof.disable()
    prof.dump_stats(out)
signal.signal(signal.SIGUSR2, stop)
from teapot_lb.cli import main
sys.argv[0] = "teapot-lb"
main()
"""

# The relay's work, in phases: the tenant side reads and decodes UPDATEs (receive), the
# policy judges them (judge), the relay's table keeps them (rib), the network side's
# Adj-RIB-Out diffs what changed (adj_rib_out), packs UPDATEs (encode) and writes them
# (send); the rest is the event loop and the relay's glue (other).
PHASES = ("receive", "judge", "rib", "adj_rib_out", "encode", "send", "other")


def phase_of(file: str, func: str) -> str | None:
    """A function's phase by where it is; None for a builtin (its caller's phase)."""
    if file == "~":
        if "poll" in func:
            return "idle"  # waiting in epoll: not work
        if "send" in func or "write" in func:
            return "send"
        return None
    # (bgp/policy and bgp/rib are packages: matched as files ending in bgp/policy.py and
    # bgp/rib.py, the judge and the Adj-RIB-Out had fallen to "other" and "rib".)
    if "bgp/policy/" in file or file.endswith("relay/policy.py"):
        return "judge"
    if file.endswith("relay/rib.py") and func == "_judge":
        return "judge"
    if func.startswith(("pack", "_pack", "export_attributes", "_chunks", "_mp_attr")):
        return "encode"
    if "bgp/rib/" in file:
        return "adj_rib_out"
    if file.endswith(("relay/rib.py", "bgp/attributes.py")):
        return "rib"
    if "asyncio" in file and ("write" in func or "send" in func):
        return "send"
    if "bgp/wire/" in file or file.endswith(("bgp/fsm.py", "bgp/peer.py", "bgp/neighbor.py")):
        return "receive"
    return "other"


def phases(stats_file: Path) -> dict[str, float]:
    """Each phase's share of the relay's profiled time (idle excluded): a function's own
    time goes to its phase, a builtin's to its callers' phases."""
    stats = pstats.Stats(str(stats_file)).stats  # type: ignore[attr-defined]
    seconds = dict.fromkeys((*PHASES, "idle"), 0.0)
    for (file, _, func), (_, _, tottime, _, callers) in stats.items():
        phase = phase_of(file, func)
        if phase is not None:
            seconds[phase] += tottime
            continue
        for (cfile, _, cfunc), caller in callers.items():
            seconds[phase_of(cfile, cfunc) or "other"] += caller[2]
    del seconds["idle"]
    total = sum(seconds.values()) or 1.0
    return {k: round(v / total, 3) for k, v in seconds.items()}


def relay_flushes(log: Path, since: float) -> list[dict[str, Any]]:
    """The relay's ``relay flush`` debug lines after ``since`` (epoch seconds), each with
    ``at``: seconds after ``since``."""
    out: list[dict[str, Any]] = []
    for line in log.read_text().splitlines():
        if '"relay flush"' not in line:
            continue
        entry = json.loads(line)
        at = datetime.fromisoformat(entry["timestamp"]).timestamp() - since
        if at >= 0:
            out.append({"at": round(at, 3), **{k: entry.get(k, "") for k in FLUSH_FIELDS}})
    return out


FLUSH_FIELDS = ("trigger", "prefixes", "learned", "bytes", "chunks", "seconds", "wall")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------------------------ one run


def router_name(i: int) -> str:
    """Router 0's namespace is "up" (the ECMP check and ``--pcap`` look there)."""
    return "up" if i == 0 else f"up{i}"


def run_one(
    kind: str,
    hosts: dict[str, Host],
    work: Path,
    tenants: int,
    routes: int,
    nodes: int,
    profile: Path | None = None,
    timeline: bool = False,
    routers: int = 1,
) -> dict[str, Any]:
    want = tenants * routes * nodes
    sessions = tenants * nodes
    work.mkdir(parents=True, exist_ok=True)
    ups = [
        Bird(hosts[router_name(i)], work / f"{kind}-{router_name(i)}", upstream_conf(i))
        for i in range(routers)
    ]
    up = ups[0]
    relay_proc: subprocess.Popen[bytes] | None = None
    relay_bird: Bird | None = None
    tenant_birds: list[Bird] = []
    try:
        if kind == "ours":
            mdir = work / "manifests"
            mdir.mkdir(exist_ok=True)
            docs = manifests(tenants, nodes, routers)
            (mdir / "relay.yaml").write_text(yaml.safe_dump_all(docs))
            log = (work / "relay.log").open("ab")
            teapot = [str(Path(sys.executable).parent / "teapot-lb")]
            if profile is not None:
                profile.unlink(missing_ok=True)
                teapot = [sys.executable, "-c", PROFILED, str(profile)]
            level = "debug" if timeline else "warning"
            relay_proc = hosts["relay"].popen(
                [*teapot, "--log-level", level, "relay", "--manifests", str(mdir),
                 "--asn", str(RELAY_AS), "--router-id", "192.0.2.203", "--listen", ":179",
                 "--metrics-addr", "", "--max-prefixes", str(routes + 100)],
                stdout=log, stderr=log,
            )  # fmt: skip
            pid = relay_proc.pid
        else:
            conf = bird_relay_conf(tenants, nodes, routes, routers)
            relay_bird = Bird(hosts["relay"], work / "bird-relay", conf)
            pid = relay_bird.proc.pid
        wait_for(lambda: all(u.established() == 1 for u in ups), timeout=60,
                 what=f"{kind}: {routers} upstream sessions", every=0.2)  # fmt: skip
        for t in range(tenants):
            for n in range(nodes):
                conf = tenant_conf(t, n, tenants, routes)
                tenant_birds.append(Bird(hosts["tenants"], work / f"{kind}-t{t}n{n}", conf))
        wait_for(lambda: sum(b.established() for b in tenant_birds) == sessions, timeout=300,
                 every=1.0, what=f"{kind}: {sessions} tenant sessions")  # fmt: skip
        if profile is not None and kind == "ours":
            relay_proc.send_signal(signal.SIGUSR1)  # type: ignore[union-attr]
        cpu_before = cpu_seconds(pid)
        up_before = sum(cpu_seconds(u.proc.pid) for u in ups)
        started, started_wall = time.monotonic(), time.time()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda b: b.c("enable st"), tenant_birds))
        # (seconds, paths at the router furthest behind) at each look; a router that
        # holds every path is not asked again (``show route count`` walks its table).
        timeline: list[tuple[float, int]] = []
        held = [0] * routers

        def arrived() -> bool:
            for i, u in enumerate(ups):
                if held[i] < want:
                    held[i] = u.paths()
            timeline.append((time.monotonic() - started, min(held)))
            return timeline[-1][1] >= want

        wait_for(arrived, timeout=1800, every=0.2,
                 what=f"{kind}: {want} paths at each of {routers} routers",
                 detail=lambda: f"paths per router: {held}")  # fmt: skip
        seconds = time.monotonic() - started
        # When the upstream held a quarter, half, three quarters of the paths.
        quarters = [next(t for t, n in timeline if n >= want * q / 4) for q in (1, 2, 3)]
        cpu_s = cpu_seconds(pid) - cpu_before
        up_cpu_s = sum(cpu_seconds(u.proc.pid) for u in ups) - up_before
        phase_s: dict[str, float] = {}
        if profile is not None and kind == "ours":
            relay_proc.send_signal(signal.SIGUSR2)  # type: ignore[union-attr]
            wait_for(profile.exists, timeout=60, what="the relay's profile")
            time.sleep(1.0)  # written in one go; let it finish
            phase_s = phases(profile)
        time.sleep(1.0)  # let stragglers (a leaked hijack) arrive before counting them
        leaked = sum(
            leaked_paths(up, t, tenants, nodes, prefix) for t in range(tenants)
            for prefix, _ in hijacks(t, tenants)
        )  # fmt: skip
        hops: list[int] = []
        for t in range(tenants):
            prefix = host_route(t, 1 + t % routes)
            got = wait_for(lambda p=prefix: fib_next_hops(hosts["up"], p) or None,
                           timeout=120, every=0.5, what=f"{prefix} in the FIB")  # fmt: skip
            hops.append(len(got))
        flushes = relay_flushes(work / "relay.log", started_wall) if kind == "ours" else []
        return {"seconds": seconds, "rss_mb": peak_rss_mb(pid), "leaked": leaked,
                "timeline": [(round(t, 2), n) for t, n in timeline], "flushes": flushes,
                "ecmp_min": min(hops), "paths": up.paths(), "cpu_s": cpu_s,
                "upstream_cpu_s": up_cpu_s, "phases": phase_s,
                "quarters_s": [round(t, 2) for t in quarters]}  # fmt: skip
    finally:
        for b in (*tenant_birds, relay_bird, *ups):
            if b is not None:
                b.stop()
        if relay_proc is not None:
            relay_proc.kill()
            relay_proc.wait(timeout=10)
        # The killed upstream BIRD left its routes in router 0's kernel: the next run's BIRD
        # would start by sweeping them, in its timed window.
        hosts[router_name(0)].ip("-6", "route", "flush", "proto", "bird")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of median time (the lower of the two middle ones for an even count)."""
    return sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--routes", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--profile", type=Path, metavar="FILE",
                    help="run the relay under cProfile in the timed window, write the stats"
                    " to FILE and split its time by phase (profiling slows the relay: time"
                    " a run without it)")  # fmt: skip
    ap.add_argument("--timeline", action="store_true",
                    help="print the relay's flushes (its debug log) and the upstream's path"
                    " count at each look, in seconds from the routes' start")  # fmt: skip
    ap.add_argument("--pcap", type=Path, metavar="FILE",
                    help="capture the upstream's BGP traffic (tcpdump) to FILE, both runs;"
                    " bench/relay_stream.py compares the two streams")  # fmt: skip
    ap.add_argument("--routers", type=int, default=1,
                    help="routers the relay (and BIRD) export to at once, each its own BIRD in"
                    " a namespace of its own; the time is until every one holds every path"
                    " (issue 37's fan-out: --routers 8)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=1,
                    help="run both this many times, alternating which goes first (ours first"
                    " in odd rounds); the figures are each side's median round")  # fmt: skip
    args = ap.parse_args()
    reason = netns_available()
    if reason or not shutil.which("bird"):
        sys.exit(f"bench/relay.py needs root and BIRD: {reason or 'bird not installed'}")
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "bird": []}
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp, Topology("rbench") as topo:
        work = Path(tmp)
        switch = topo.add_switch("lan")
        names = [router_name(i) for i in range(args.routers)]
        hosts = {name: topo.add_host(name) for name in (*names, "relay", "tenants")}
        for i, name in enumerate(names):
            topo.connect(hosts[name], switch, addrs=[f"{router_addr(i)}/64"])
        topo.connect(hosts["relay"], switch, addrs=[f"{RELAY}/64"])
        topo.connect(hosts["tenants"], switch, addrs=[f"{node(0, 0)}/64"])
        batch = "".join(
            f"address add {node(t, n)}/64 dev eth0\n"
            for t in range(args.tenants) for n in range(args.nodes) if (t, n) != (0, 0)
        )  # fmt: skip
        subprocess.run(["ip", "-n", hosts["tenants"].ns, "-batch", "-"], input=batch.encode(),
                       check=True)  # fmt: skip
        if args.pcap is not None:
            hosts["up"].popen(["tcpdump", "-i", "eth0", "-s", "0", "-B", "65536", "-U", "-w",
                               str(args.pcap), "tcp", "port", "179"])  # fmt: skip
        order = [("ours", "bird") if n % 2 == 0 else ("bird", "ours") for n in range(args.rounds)]
        for kind in (k for pair in order for k in pair):
            r = run_one(
                kind, hosts, work / f"round{len(runs[kind])}", args.tenants, args.routes,
                args.nodes, args.profile, args.timeline, args.routers,
            )  # fmt: skip
            runs[kind].append(r)
            print(f"{kind:5} {r['seconds']:8.2f} s  cpu {r['cpu_s']:6.2f} s  "
                  f"rss {r['rss_mb']:7.1f} MB  leaked {r['leaked']}  ecmp min {r['ecmp_min']}  "
                  f"paths {r['paths']}  upstream cpu {r['upstream_cpu_s']:.2f} s  "
                  f"1/4, 1/2, 3/4 upstream at {r['quarters_s']} s")  # fmt: skip
            if args.timeline:
                looks = " ".join(f"{t}:{n}" for t, n in r["timeline"])
                print(f"      upstream paths at (s:paths): {looks}")
                want = args.tenants * args.routes * args.nodes
                shares = (0.1, 0.25, 0.5, 0.75, 1.0)
                reached = [next(t for t, n in r["timeline"] if n >= want * q) for q in shares]
                print(f"      10, 25, 50, 75, 100 % upstream at {reached} s")
                for f in r["flushes"]:
                    print(f"      flush at {f['at']:6.3f} s  " + "  ".join(
                        f"{k} {f[k]}" for k in FLUSH_FIELDS))  # fmt: skip
            if r["phases"]:
                split = ", ".join(f"{k} {v:.0%}" for k, v in r["phases"].items())
                print(f"      cpu by phase: {split}")
    ours, bird = median_run(runs["ours"]), median_run(runs["bird"])
    summary = {
        "routers": args.routers,
        "rounds": args.rounds,
        "ours_s_rounds": [round(r["seconds"], 3) for r in runs["ours"]],
        "bird_s_rounds": [round(r["seconds"], 3) for r in runs["bird"]],
        "routes": args.tenants * args.routes,
        "paths": args.tenants * args.routes * args.nodes,
        "tenants": args.tenants,
        "nodes": args.nodes,
        "ours_s": round(ours["seconds"], 3),
        "bird_s": round(bird["seconds"], 3),
        "ratio_vs_bird": round(ours["seconds"] / bird["seconds"], 2),
        "cpu_s": round(ours["cpu_s"], 2),
        "bird_cpu_s": round(bird["cpu_s"], 2),
        "cpu_ratio_vs_bird": round(ours["cpu_s"] / max(bird["cpu_s"], 0.01), 2),
        "upstream_cpu_s": round(ours["upstream_cpu_s"], 2),
        "bird_upstream_cpu_s": round(bird["upstream_cpu_s"], 2),
        "quarters_s": ours["quarters_s"],
        "bird_quarters_s": bird["quarters_s"],
        "cpu_share_by_phase_profiled": ours["phases"],
        "rss_mb": round(ours["rss_mb"], 1),
        "bird_rss_mb": round(bird["rss_mb"], 1),
        "hijack_cases": 4 * args.tenants,
        "hijack_leaked": ours["leaked"],
        "bird_hijack_leaked": bird["leaked"],
        "ecmp_next_hops_min": ours["ecmp_min"],
        "bird_ecmp_next_hops_min": bird["ecmp_min"],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
