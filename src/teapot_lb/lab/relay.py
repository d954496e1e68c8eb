"""The lab's ``relay`` group: a tenant's own BGP speakers through ``teapot-lb relay``.

    client ── router (BIRD, ADD-PATH receive, ECMP into its FIB) ── LAN ─┬─ relay
                                                                          ├─ b1 ┐ tenant bolt:
                                                                          └─ b2 ┘ its nodes

The real ``teapot-lb relay --manifests DIR`` (Tenants acme and bolt, the router as a
BGPPeer with ``addPath: send``). Tenant bolt runs its own speakers towards the relay, as
docs/relay.md tells tenants to: on b1 ``teapot-lb run --modes bgp`` (its cluster's
manifests: the Service ``web`` at :data:`SERVICE_IP`), on b2 BIRD standing in for MetalLB,
which announces the same Service IP and three hijack attempts: acme's Service IP, a route
with a next hop at an address of nobody's node network, and the default route. Measured:
the router's FIB holds the Service IP via b1 and b2 (ECMP), the client's requests are
answered (by which nodes), and the relay's ``/relay/tenants/bolt`` lists each hijack as
filtered with the rule that decided it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.groups import run_group
from teapot_lb.lab.manifests import CLIENT, ROUTER_LAN, ROUTER_UP, host_prefix, write_docs
from teapot_lb.lab.processes import log_tail, start_run, start_workload
from teapot_lb.lab.router import Bird, RouterConfig, Session, fib_next_hops
from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.netlab import Host, Topology

Progress = Callable[[str], None]
API = "lb.teapot.io/v1alpha1"
CONFIG_NS = "teapot-lb-system"
RELAY_AS, ROUTER_AS = 64500, 64496
ACME_AS, BOLT_AS = 64601, 64602
RELAY = "192.0.2.2"
NODES = {"b1": "192.0.2.17", "b2": "192.0.2.18"}  # bolt's node network: 192.0.2.16/29
SERVICE_IP = "203.0.113.20"  # bolt holds 203.0.113.16/28
METRICS_PORT = 7476
TEAPOT_LB = str(Path(sys.executable).parent / "teapot-lb")
TIMEOUT_S = 30.0
REQUESTS = 30
# bolt's hijack attempts (from b2's BIRD) and the rule the relay must name for each.
HIJACKS: dict[str, tuple[str, str]] = {
    "203.0.113.5/32": ("acme's Service IP", "outside-allocation"),
    "203.0.113.21/32": ("next hop 192.0.2.40, nobody's node", "next-hop-outside-node-networks"),
    "0.0.0.0/0": ("the default route", "default-route"),
}
FOREIGN_HOP = "192.0.2.40"


@dataclass
class Refusal:
    prefix: str
    attempt: str
    reason: str | None = None  # the relay's rule name (None: not filtered, or not seen)
    rule: int | None = None
    expected: str = ""


@dataclass
class RelayResult:
    ip: str = SERVICE_IP
    reachable_s: float | None = None  # speakers started → answered through the router
    fib_next_hops: list[str] = field(default_factory=list)
    answered_by: dict[str, int] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)  # hijack prefixes in the router's FIB
    rejected_metric: dict[str, float] = field(default_factory=dict)  # reason → count
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return not self.errors
        return (
            not self.errors
            and self.reachable_s is not None
            and set(self.fib_next_hops) == set(NODES.values())
            and sum(self.answered_by.values()) > 0
            and len(self.refusals) == len(HIJACKS)
            and all(r.reason == r.expected for r in self.refusals)
            and not self.leaked
        )


# ------------------------------------------------------------------------ manifests (pure)


def _doc(kind: str, name: str, spec: dict[str, Any], ns: str = CONFIG_NS) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": ns},
            "spec": spec}  # fmt: skip


def relay_docs() -> list[dict[str, Any]]:
    """The operator's directory for ``teapot-lb relay``: two Tenants, the router."""

    def tenant(
        name: str, asn: int, cidr: str, nodes: str, registered: Mapping[str, str]
    ) -> dict[str, Any]:
        spec = {"namespace": f"tenant-{name}", "asn": asn, "nodeNetworks": [nodes],
                "nodes": [{"name": n, "addresses": [a]} for n, a in registered.items()],
                "allocations": [{"addressPool": "tenants", "cidrs": [cidr]}]}  # fmt: skip
        return {"apiVersion": API, "kind": "Tenant", "metadata": {"name": name}, "spec": spec}

    peer = {"myASN": RELAY_AS, "peerASN": ROUTER_AS, "peerAddress": ROUTER_LAN,
            "holdTime": "9s", "addPath": "send", "families": ["ipv4-unicast"]}  # fmt: skip
    return [
        _doc("AddressPool", "tenants", {"addresses": ["203.0.113.0/24"]}),
        tenant("acme", ACME_AS, "203.0.113.0/28", "192.0.2.8/29", {}),
        tenant("bolt", BOLT_AS, "203.0.113.16/28", "192.0.2.16/29", NODES),
        _doc("BGPPeer", "router", peer),
    ]


def b1_docs() -> list[dict[str, Any]]:
    """bolt's cluster as b1's ``teapot-lb run`` reads it: the relay is its BGP peer."""
    ns = "bolt-lb"
    peer = {"myASN": BOLT_AS, "peerASN": RELAY_AS, "peerAddress": RELAY, "holdTime": "9s",
            "connectTime": "1s", "addPath": "off"}  # fmt: skip
    return [
        _doc("AddressPool", "bolt", {"addresses": ["203.0.113.16/28"]}, ns),
        _doc("BGPPeer", "relay", peer, ns),
        _doc("BGPAdvertisement", "bolt", {"addressPools": ["bolt"]}, ns),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b1"},
         "status": {"addresses": [{"type": "InternalIP", "address": NODES["b1"]}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "default",
                      "annotations": {"lb.teapot.io/ips": SERVICE_IP}},
         "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}},
    ]  # fmt: skip


def b2_bird_config(log: Path) -> str:
    """b2's BIRD (MetalLB's stand-in): the Service IP with itself as next hop, and the
    hijacks (a static route via an address on the LAN keeps that address as next hop)."""
    routes = [f"  route {host_prefix(SERVICE_IP)} blackhole;"]
    for prefix in HIJACKS:
        via = f"via {FOREIGN_HOP}" if "next hop" in HIJACKS[prefix][0] else "blackhole"
        routes.append(f"  route {prefix} {via};")
    return "\n".join([
        f'log "{log}" all;', f"router id {NODES['b2']};", "protocol device {}",
        "protocol static hijacks {", "  ipv4;", *routes, "}",
        "protocol bgp relay {",
        f"  local {NODES['b2']} as {BOLT_AS}; neighbor {RELAY} as {RELAY_AS}; direct;",
        "  connect delay time 1; connect retry time 1; error wait time 1, 2;",
        "  ipv4 { import none; export all; };", "}", "",
    ])  # fmt: skip


# ------------------------------------------------------------------------ the group


class RelayGroup:
    def __init__(self, workdir: Path, topo: Topology, progress: Progress) -> None:
        self.workdir = workdir
        self.progress = progress
        self.topo = topo
        self.hosts: dict[str, Host] = {}
        self.router: Bird | None = None
        self.procs: list[subprocess.Popen[bytes]] = []
        self.relay_log = workdir / "relay.log"

    def say(self, text: str) -> None:
        self.progress(f"lab: relay: {text}")

    def build(self) -> None:
        topo = self.topo
        lan = topo.add_switch("lan")
        router = self.hosts["router"] = topo.add_host("router")
        client = self.hosts["client"] = topo.add_host("client")
        topo.connect(router, lan, addrs=[f"{ROUTER_LAN}/24"])
        topo.link_pair(router, client, a_if="up0", b_if="eth0",
                       a_addrs=[f"{ROUTER_UP}/24"], b_addrs=[f"{CLIENT}/24"])  # fmt: skip
        client.ip("route", "add", "default", "via", ROUTER_UP)
        router.sysctl("net.ipv4.ip_forward", "1")
        router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")
        relay = self.hosts["relay"] = topo.add_host("relay")
        topo.connect(relay, lan, addrs=[f"{RELAY}/24"])
        for name, address in NODES.items():
            host = self.hosts[name] = topo.add_host(name)
            for conf in ("all", "default"):  # the Service IP on lo, never answered by ARP
                host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
                host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
            topo.connect(host, lan, addrs=[f"{address}/24"])
            host.ip("route", "add", "default", "via", ROUTER_LAN)
            host.ip("addr", "replace", host_prefix(SERVICE_IP), "dev", "lo")  # kube-proxy's part
            self.procs.append(start_workload(host, name, 80))

    def start(self) -> None:
        session = Session(RELAY, RELAY_AS, 9, 3, add_path=True)
        self.router = Bird(self.hosts["router"], self.workdir / "router",
                           RouterConfig(ROUTER_AS, ROUTER_LAN, (session,)))  # fmt: skip
        self.router.start()
        manifests = self.workdir / "relay-manifests"
        manifests.mkdir(parents=True, exist_ok=True)
        write_docs(manifests / "relay.yaml", relay_docs())
        with self.relay_log.open("ab") as log:
            self.procs.append(self.hosts["relay"].popen(
                [TEAPOT_LB, "relay", "--manifests", str(manifests),
                 "--asn", str(RELAY_AS), "--router-id", RELAY, "--listen", ":179",
                 "--metrics-addr", f"{RELAY}:{METRICS_PORT}", "--no-gtsm"],
                stdout=log, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        self._wait(lambda: self._get("/metrics") != "", "the relay's metrics endpoint")
        self.say("teapot-lb relay running; BIRD router (ADD-PATH receive, multipath)")

    def start_speakers(self) -> None:
        b1 = self.workdir / "b1"
        b1.mkdir(parents=True, exist_ok=True)
        write_docs(b1 / "cluster.yaml", b1_docs())
        self.procs.append(start_run(self.hosts["b1"], "b1", manifests=b1, modes=("bgp",),
                                    state_dir=self.workdir / "b1-state", poll_interval=None,
                                    log_path=self.workdir / "b1.log"))  # fmt: skip
        b2 = self.workdir / "b2"
        b2.mkdir(parents=True, exist_ok=True)
        (b2 / "bird.conf").write_text(b2_bird_config(b2 / "bird.log"))
        self.procs.append(self.hosts["b2"].popen(
            ["bird", "-f", "-c", str(b2 / "bird.conf"), "-s", str(b2 / "bird.ctl")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))  # fmt: skip
        self.say("bolt's speakers: teapot-lb run on b1, BIRD on b2 (MetalLB's stand-in)")

    def _alive(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise LabTimeout(f"{proc.args!r} exited:\n{self._logs()}")

    def _logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{log_tail(p)}" for p in (self.relay_log, self.workdir / "b1.log")
        )

    def _wait(self, check: Callable[[], Any], what: str) -> float:
        started = time.monotonic()

        def alive_check() -> Any:
            self._alive()
            return check()

        wait_for(alive_check, timeout=TIMEOUT_S, every=0.05, what=what, detail=self._logs)
        return time.monotonic() - started

    def _get(self, path: str) -> str:
        """GET on the relay's metrics port, asked from inside the relay's namespace."""
        code = (
            "import urllib.request\ntry:\n"
            f"    print(urllib.request.urlopen('http://{RELAY}:{METRICS_PORT}{path}',"
            " timeout=5).read().decode(), end='')\nexcept Exception:\n    pass\n"
        )
        return self.hosts["relay"].run(sys.executable, "-c", code, check=False)

    def explain(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self._get("/relay/tenants/bolt") or "{}")
        return doc

    def hops(self, prefix: str) -> frozenset[str]:
        return fib_next_hops(self.hosts["router"], prefix)

    def run(self, result: RelayResult) -> None:
        self.build()
        self.start()
        started = time.monotonic()
        self.start_speakers()
        client = Client(self.hosts["client"].ns)
        try:
            want = frozenset(NODES.values())
            self._wait(lambda: self.hops(host_prefix(SERVICE_IP)) == want,
                       f"{SERVICE_IP} via b1 and b2 in the router's FIB")  # fmt: skip
            self._wait(lambda: client.get(SERVICE_IP, 80).node, f"{SERVICE_IP}:80 answered")
            result.reachable_s = time.monotonic() - started
            result.fib_next_hops = sorted(self.hops(host_prefix(SERVICE_IP)))
            self.say(f"{SERVICE_IP} via {result.fib_next_hops}; reachable after"
                     f" {result.reachable_s:.3f} s")  # fmt: skip
            answers = client.burst(SERVICE_IP, 80, REQUESTS)
            result.answered_by = dict(Counter(a.node for a in answers if a.node))
            self.say(f"answered by {result.answered_by}")
        finally:
            client.close()
        self._refusals(result)

    def _refusals(self, result: RelayResult) -> None:
        def filtered() -> dict[str, dict[str, Any]]:
            routes = self.explain().get("routes", [])
            return {r["prefix"]: r for r in routes if r.get("verdict") == "filtered"}

        self._wait(lambda: set(HIJACKS) <= set(filtered()), "the relay to list bolt's hijacks")
        seen = filtered()
        for prefix, (attempt, expected) in HIJACKS.items():
            route = seen[prefix]
            result.refusals.append(Refusal(prefix, attempt, route.get("reason"),
                                           route.get("rule"), expected))  # fmt: skip
            if self.hops(prefix):
                result.leaked.append(prefix)
        metric = "teapot_lb_relay_routes_rejected_total{"
        for line in self._get("/metrics").splitlines():
            if line.startswith(metric) and 'tenant="bolt"' in line:
                reason = line.split('reason="', 1)[1].split('"', 1)[0]
                result.rejected_metric[reason] = float(line.rpartition(" ")[2])
        for r in result.refusals:
            self.say(f"refused {r.prefix} ({r.attempt}): rule {r.rule} {r.reason}")

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if self.router is not None:
            self.router.stop()


def run_relay(progress: Progress, workdir: Path | None = None) -> RelayResult:
    """Run the group (root, BIRD installed); failures are in ``result.errors``."""
    result = RelayResult()
    absent = [p for p in ("bird", "birdc") if shutil.which(p, path=_PATH) is None]
    missing = f"not installed: {', '.join(absent)}" if absent else None

    def make(work: Path, topology: Topology) -> RelayGroup:
        return RelayGroup(work, topology, progress)

    run_group("relay", result, make, progress, workdir, missing)
    return result


_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"


def relay_lines(r: RelayResult) -> list[str]:
    """The group in the lab's text report."""
    if r.skipped is not None:
        return [f"relay: skipped: {r.skipped}"]
    reach = "-" if r.reachable_s is None else f"{r.reachable_s:.3f} s"
    answered = ", ".join(f"{k} {v}" for k, v in sorted(r.answered_by.items())) or "-"
    lines = [
        f"relay: {'ok' if r.ok else 'FAILED'}; tenant bolt's speakers (teapot-lb run on b1,"
        " BIRD on b2) → teapot-lb relay → router (ADD-PATH, ECMP)",
        f"  {r.ip}: reachable {reach} after the speakers started; router FIB next hops"
        f" {', '.join(r.fib_next_hops) or '-'}; answered by {answered}",
    ]
    for f in r.refusals:
        verdict = "refused" if f.reason == f.expected else f"NOT refused as {f.expected}"
        lines.append(
            f"  hijack {f.prefix} ({f.attempt}): {verdict}, rule {f.rule} {f.reason or '-'}"
        )
    if r.rejected_metric:
        counts = ", ".join(f"{k} {v:g}" for k, v in sorted(r.rejected_metric.items()))
        lines.append(f"  teapot_lb_relay_routes_rejected_total{{tenant=bolt}}: {counts}")
    if r.leaked:
        lines.append(f"  LEAKED into the router's FIB: {', '.join(r.leaked)}")
    return lines + [f"relay: {err}" for err in r.errors]


def relay_result(doc: Mapping[str, Any]) -> RelayResult:
    """The group's result back from its JSON (the HTML report renders from the JSON)."""
    fields = {k: v for k, v in doc.items() if k != "ok"}
    fields["refusals"] = [Refusal(**r) for r in doc.get("refusals", [])]
    return RelayResult(**fields)


__all__ = ["Refusal", "RelayResult", "relay_lines", "relay_result", "run_relay"]
