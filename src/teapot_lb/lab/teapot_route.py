"""The ``teapot`` group's route mode with a router and traffic (root, namespaces, BIRD/FRR).

    client ── router (ADD-PATH receive, ECMP into its FIB) ── LAN ─┬─ m1  (management)
                                                                   ├─ n1 ┐
                                                                   ├─ n2 ├ tenant acme
                                                                   ├─ n3 ┘
                                                                   ├─ g1 ┐ tenant globex
                                                                   └─ g2 ┘

The real standalone processes: ``teapot-lb manager --manifests ROOT``, acme's and
globex's ``teapot-lb tenant-agent --manifests`` (:mod:`teapot_lb.lab.teapot`), and on m1 the
standalone announcer, ``teapot-lb run --manifests ROOT/announce --modes bgp``, announcing
each Programmed IP with one ADD-PATH path per tenant node and probing the next hops
(:mod:`teapot_lb.announce.hop_health`). The tenant nodes emulate kube-proxy: the HTTP
workload answers on the Service port (the IP bound on ``lo`` once the agent has it, as
kube-proxy does from the Service's status) and on the nodePort (what m1 probes).

Measured, as a :class:`~teapot_lb.lab.report.ModeResult` (mode ``teapot``, the report's
usual row, JSON and HTML): Service written → reachable from the client, for acme and then
for globex (each IP's FIB entry via exactly its own tenant's nodes); the spread over
n1..n3; n2 hard-killed (link down, its processes SIGKILLed, the tenant not told) → the
client served by n1/n3 again, and when the router's FIB dropped n2; Service deleted →
route withdrawn and the IP unreachable.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.manifests import CLIENT, ROUTER_LAN, ROUTER_UP, host_prefix, write_docs
from teapot_lb.lab.measure import Attempt, failure_reasons, outage, settled, spread
from teapot_lb.lab.processes import start_run, start_workload
from teapot_lb.lab.report import Deletion, Failover, ModeResult, ServiceResult, Spread, Trial
from teapot_lb.lab.router import Router, RouterConfig, Session, fib_next_hops, make_router
from teapot_lb.lab.teapot import (
    ACME_NODES,
    API,
    GLOBEX_NODES,
    POOL,
    Progress,
    TeapotGroup,
    cluster_docs,
)
from teapot_lb.lab.timeline import timeline
from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.netlab import Host, Topology

M1 = "192.0.2.21"
MANAGEMENT_ASN, ROUTER_ASN = 64512, 64500
SERVICE_PORT, NODE_PORT = 80, 30080  # as cluster_docs' Service
PROBE_INTERVAL_S = 0.01
SETTLE_S = 0.5
SPREAD_REQUESTS = 60
VICTIM = "n2"


def announcer_docs() -> list[dict[str, Any]]:
    """What the operator writes beside the manager's tenants.yaml in ROOT/announce: the
    router as a BGPPeer (ADD-PATH send), the advertisement of the tenants' pool, m1."""
    peer = {"myASN": MANAGEMENT_ASN, "peerASN": ROUTER_ASN, "peerAddress": ROUTER_LAN,
            "holdTime": "9s", "addPath": "send"}  # fmt: skip
    return [
        {"apiVersion": API, "kind": "BGPPeer", "metadata": {"name": "router"}, "spec": peer},
        {
            "apiVersion": API,
            "kind": "BGPAdvertisement",
            "metadata": {"name": POOL},
            "spec": {"addressPools": [POOL]},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "m1"},
            "status": {"addresses": [{"type": "InternalIP", "address": M1}]},
        },
    ]


class TeapotNetwork:
    """The namespaces, the router daemon and the processes of the route flow."""

    def __init__(self, topo: Topology, workdir: Path, router_kind: str) -> None:
        self.topo = topo
        self.workdir = workdir
        self.router_kind = router_kind
        self.router: Host = topo.add_host("router")
        self.client: Host = topo.add_host("client")
        self.m1: Host = topo.add_host("m1")
        self.nodes: dict[str, Host] = {}
        self.daemon: Router | None = None

    def build(self) -> None:
        topo, router = self.topo, self.router
        lan = topo.add_switch("lan")
        topo.connect(router, lan, addrs=[f"{ROUTER_LAN}/24"])
        topo.connect(self.m1, lan, addrs=[f"{M1}/24"])
        topo.link_pair(router, self.client, a_if="up0", b_if="eth0",
                       a_addrs=[f"{ROUTER_UP}/24"], b_addrs=[f"{CLIENT}/24"])  # fmt: skip
        self.client.ip("route", "add", "default", "via", ROUTER_UP)
        router.sysctl("net.ipv4.ip_forward", "1")
        router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")  # spread by ports too
        for name, address in {**ACME_NODES, **GLOBEX_NODES}.items():
            host = topo.add_host(name)
            for conf in ("all", "default"):  # kube-proxy's IP on lo, never answered by ARP
                host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
                host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
            topo.connect(host, lan, addrs=[f"{address}/24"])
            host.ip("route", "add", "default", "via", ROUTER_LAN)
            start_workload(host, name, SERVICE_PORT)
            start_workload(host, name, NODE_PORT)
            self.nodes[name] = host

    def start_router(self) -> Router:
        session = Session(M1, MANAGEMENT_ASN, 9, 3, add_path=True)
        config = RouterConfig(ROUTER_ASN, ROUTER_LAN, (session,))
        daemon = make_router(self.router_kind, self.router, self.workdir / "router", config)
        self.daemon = daemon
        daemon.start()
        wait_for(daemon.ready, timeout=30, what=f"{daemon.kind} to answer", every=0.1)
        return daemon

    def start_announcer(self, announce: Path) -> subprocess.Popen[bytes]:
        return start_run(self.m1, "m1", manifests=announce, state_dir=self.workdir / "state-m1",
                         modes=("bgp",), poll_interval=None,
                         log_path=self.workdir / "announcer.log")  # fmt: skip

    def bind(self, ip: str, nodes: Iterable[str]) -> None:
        """kube-proxy's part on a tenant's nodes, once the Service's status has the IP."""
        for name in nodes:
            self.nodes[name].ip("addr", "replace", host_prefix(ip), "dev", "lo")

    def crash(self, name: str) -> float:
        """The tenant node dies: link down, every process in it SIGKILLed."""
        host = self.nodes[name]
        t0 = time.monotonic()
        host.ip("link", "set", "eth0", "down")
        host.kill_processes()
        return t0

    def hops(self, ip: str) -> frozenset[str]:
        return fib_next_hops(self.router, host_prefix(ip))

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()


class RouteFlow:
    """The steps, each timed into ``result``."""

    def __init__(self, net: TeapotNetwork, group: TeapotGroup, client: Client) -> None:
        self.net = net
        self.group = group
        self.client = client
        self.result = ModeResult(mode="teapot", family="v4")
        self.globex = group.workdir / "globex-c1"

    def say(self, text: str) -> None:
        self.group.say(f"route: {text}")

    def run(self) -> ModeResult:
        group, net = self.group, self.net
        group.start()
        announce = group.root / "announce"
        announce.mkdir(parents=True, exist_ok=True)
        write_docs(announce / "bgp.yaml", announcer_docs())
        daemon = net.start_router()
        announcer = net.start_announcer(announce)
        group.adopt("announcer", announcer)
        write_docs_in(self.globex, cluster_docs(GLOBEX_NODES, with_service=False))
        group.start_agent("globex-agent", "globex", self.globex)
        globex_up = group.root / "tenants" / "globex" / "c1.yaml"
        group.wait_step(globex_up.exists, "globex's agent's first pass")
        wait_for(lambda: M1 in daemon.established(), timeout=60, every=0.1,
                 what=f"{daemon.kind}'s session with m1")  # fmt: skip
        group.wait_started()
        self.say(f"m1 announces to {daemon.kind} (ADD-PATH); manager and both agents up")
        ip = self.create("acme", group.acme, ACME_NODES)
        self.create("globex", self.globex, GLOBEX_NODES)  # the other tenant, beside acme
        self.measure_spread(ip)
        self.hard_kill(ip)
        self.delete(ip)
        return self.result

    def create(self, tenant: str, cluster_dir: Path, nodes: dict[str, str]) -> str:
        """The tenant's Service default/web written: timed until the client reaches its IP,
        then the router's FIB must hold it via exactly the tenant's nodes."""
        group = self.group
        t0 = time.monotonic()
        write_docs_in(cluster_dir, cluster_docs(nodes, with_service=True))
        group.wait_step(lambda: group.service_ip(tenant),
                        f"{tenant}'s Service to get an IP back through its agent")  # fmt: skip
        ip = group.service_ip(tenant)
        if ip is None:
            raise LabTimeout(f"{tenant}'s Service lost its IP")
        self.net.bind(ip, nodes)
        want = frozenset(nodes.values())
        wait_for(lambda: self.client.get(ip, SERVICE_PORT).ok, timeout=20, every=0.0,
                 what=f"the client to reach {ip}",
                 detail=lambda: f"FIB: {sorted(self.net.hops(ip))}")  # fmt: skip
        reached = time.monotonic() - t0
        wait_for(lambda: self.net.hops(ip) == want, timeout=20, every=0.02,
                 what=f"the router's FIB to hold {ip} via {', '.join(nodes)} only",
                 detail=lambda: f"FIB: {sorted(self.net.hops(ip))}")  # fmt: skip
        self.result.services.append(ServiceResult(f"{tenant} default/web", ip, True, reached, True))
        self.say(f"{tenant}'s default/web got {ip}; reachable from the client after"
                 f" {_ms(reached)}, FIB via {', '.join(nodes)}")  # fmt: skip
        return ip

    def measure_spread(self, ip: str) -> None:
        attempts = self.client.burst(ip, SERVICE_PORT, SPREAD_REQUESTS)
        by_node = spread(attempts)
        ok = set(by_node) == set(ACME_NODES)  # every node served, none failed
        self.result.spread = Spread(ip, len(attempts), by_node, ok)
        self.say(f"ECMP spread of {len(attempts)} requests: {by_node}")

    def hard_kill(self, ip: str) -> None:
        probe = self.client.probe([(ip, SERVICE_PORT)], PROBE_INTERVAL_S)
        since = time.monotonic()

        def steady() -> bool:
            recent = [a for a in probe.snapshot() if a.start >= since][-20:]
            return len(recent) == 20 and all(a.ok for a in recent)

        victim = ACME_NODES[VICTIM]
        gone: list[float] = []
        try:
            wait_for(steady, timeout=20, what=f"the client to be served steadily by {ip}")
            t0 = self.net.crash(VICTIM)

            def done() -> bool:
                if not gone and victim not in self.net.hops(ip):
                    gone.append(time.monotonic())
                return bool(gone) and settled(probe.snapshot(), t0, settle=SETTLE_S)

            wait_for(done, timeout=30, every=0.02, what=f"the client served without {VICTIM}",
                     detail=lambda: f"FIB: {sorted(self.net.hops(ip))}")  # fmt: skip
        finally:
            attempts: list[Attempt] = probe.stop()
        o = outage(attempts, t0, settle=SETTLE_S)
        trial = Trial(VICTIM, o.recovered_after, o.failed, o.total, gone[0] - t0, 0,
                      failure_reasons(attempts, t0), timeline(attempts, t0))  # fmt: skip
        self.result.failovers.append(Failover("hard", [trial]))
        self.say(
            f"{VICTIM} hard-killed (the tenant not told): router dropped it after"
            f" {_ms(trial.withdrawn_s)}, client served by the rest after"
            f" {_ms(o.recovered_after)} ({o.failed} of {o.total} requests failed)"
        )

    def delete(self, ip: str) -> None:
        rest = {n: a for n, a in ACME_NODES.items() if n != VICTIM}
        t0 = time.monotonic()
        write_docs_in(self.group.acme, cluster_docs(rest, with_service=False))
        wait_for(lambda: not self.net.hops(ip), timeout=20, every=0.02,
                 what="the route withdrawn after the Service's deletion")  # fmt: skip
        withdrawn = time.monotonic() - t0
        unreachable = not self.client.get(ip, SERVICE_PORT).ok
        self.result.deletion = Deletion("default/web", ip, withdrawn, unreachable)
        self.say(f"Service deleted: route withdrawn after {_ms(withdrawn)}")


def write_docs_in(cluster_dir: Path, docs: list[dict[str, Any]]) -> None:
    cluster_dir.mkdir(parents=True, exist_ok=True)
    write_docs(cluster_dir / "cluster.yaml", docs)


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def run_teapot_route(
    workdir: Path, progress: Progress, router: str = "bird", *, skip: str | None = None
) -> ModeResult:
    """Run the route flow; failures are in the result's ``errors``. ``skip``: why this
    host cannot run it (no namespaces, no router daemon): a skipped row with the reason."""
    if skip is not None:
        return ModeResult(mode="teapot", family="v4", skipped=f"route flow: {skip}")
    workdir.mkdir(parents=True, exist_ok=True)
    group = TeapotGroup(workdir, progress)
    client: Client | None = None
    result = ModeResult(mode="teapot", family="v4")
    with Topology("teapot") as topo:
        net = TeapotNetwork(topo, workdir, router)
        try:
            net.build()
            client = Client(net.client.ns)
            flow = RouteFlow(net, group, client)
            result = flow.result
            flow.run()
        except Exception as exc:  # the lab reports and cleans up whatever went wrong
            what = str(exc) if isinstance(exc, LabTimeout) else f"{type(exc).__name__}: {exc}"
            result.errors.append(what)
            for name in group.names:
                tail = group.log_tail(name)
                if tail:
                    result.errors.append(f"{name} log:\n{tail}")
        finally:
            if client is not None:
                client.close()
            group.close()
            net.close()
    return result


__all__ = ["RouteFlow", "TeapotNetwork", "announcer_docs", "run_teapot_route"]
