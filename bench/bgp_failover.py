#!/usr/bin/env python3
"""BGP hard-kill failover: teapot-lb with BFD vs FRR with MetalLB's default BFD vs no BFD.

One lab (:mod:`teapot_lb.lab.network`: a client, a router running BIRD or FRR, a LAN
switch and six node namespaces, each serving HTTP with its name), three pairs of nodes,
each pair announcing its own Service IP as a /32 to the router, which spreads the
client's requests over the pair by ECMP:

- ``ours``: ``teapot-lb run --modes bgp`` (the product, as the lab runs it) with a
  BGPPeer naming a BFDProfile (``--interval-ms`` x ``--multiplier``, default 50 ms x 3);
- ``frr``: FRR (zebra, bgpd, bfdd) as the node's speaker, with MetalLB's default BFD
  profile (300 ms x 3, as MetalLB's FRR mode configures bfdd), announcing its IP with
  ``network``;
- ``nobfd``: ``teapot-lb run`` with a BGPPeer without BFD: the router notices a dead node
  at the hold time (``--hold-time``, the lab's 3 s by default).

The router runs BFD towards ``ours`` and ``frr`` nodes with ``ours``' timers, so each
node's own profile sets how fast the router detects it (RFC 5880 §6.8.4: the detection
time is the remote multiplier times the slower of our receive and its transmit interval).
Every session runs the same hold time.

One trial: the client sends a request to the pair's IP every 10 ms (a new TCP connection
each, 0.2 s connect timeout); once it is served steadily and the router's BFD session to
the victim is Up, the victim is hard-killed (``LabNetwork.crash``: link down, then SIGKILL
to every process in its namespace). The trial's figure is the later of (a) the router's
kernel FIB no longer having the victim as a next hop (polled every 10 ms with ``ip
route``) and (b) the client's requests all succeeding again (the start of the first good
request after the last failed one, followed by 0.5 s of good ones). The victim then comes
back. Trials alternate between the variants (ours, frr, nobfd, ours, ...) so that all
three see the same machine load; victims alternate within each pair.

Stability: afterwards, with every node back, ``--hogs-per-node`` CPU hogs run in each
``ours`` node namespace for ``--stability-seconds``, nothing is killed, and false downs
are counted: BFD sessions going Down on our nodes (their ``bfd_state_changed`` log
records) plus the router's BFD sessions to our nodes seen leaving Up (polled every
0.25 s); BGP sessions leaving Established at the router are counted apart.

Run as root: ``.venv/bin/python bench/bgp_failover.py [--trials 20] [--stability-seconds 600]``.
The last line is JSON: p50_s, p95_s, max_s, fib_p50_s, fib_max_s, client_p50_s,
client_max_s (ours), frr_bfd_default_p50_s, frr_bfd_default_max_s, no_bfd_p50_s,
no_bfd_max_s, false_downs, false_downs_node, false_downs_router, bgp_resets, stability_s,
trials, interval_ms, multiplier, hold_time_s, router, load_avg_1m_at_start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.manifests import (
    HOSTNAME_LABEL,
    ROUTER_LAN,
    SERVICE_PORT,
    BfdSpec,
    LabLayout,
    NodeSpec,
    generated_node_address,
    mirrored_address6,
    node_doc,
    service_doc,
    write_docs,
)
from teapot_lb.lab.measure import outage, percentile, settled
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.router import (
    BFD_PROFILE,
    Frr,
    Router,
    RouterConfig,
    Session,
    fib_next_hops,
    frr_bfdd_config,
    make_router,
)
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

ROUTER_ASN, NODE_ASN = 64500, 64512
GROUP_LABEL = "bench.teapot.io/group"
CONFIG_NS = "teapot-lab"
PROBE_EVERY = 0.01
SETTLE_S = 0.5
METALLB_DEFAULT_BFD = BfdSpec(transmit_ms=300, receive_ms=300, multiplier=3)


@dataclass(frozen=True)
class Variant:
    name: str  # also the node name prefix and the group label
    ip: str
    label: str  # how the report names it

    def nodes(self) -> tuple[str, str]:
        return (f"{self.name}-1", f"{self.name}-2")


OURS = Variant("ours", "203.0.113.10", "teapot-lb + BFD")
FRR = Variant("frr", "203.0.113.11", "FRR + MetalLB default BFD (300 ms x 3)")
NOBFD = Variant("nobfd", "203.0.113.12", "teapot-lb without BFD")
VARIANTS = (OURS, FRR, NOBFD)


@dataclass
class TrialResult:
    fib_s: float
    client_s: float | None
    failed: int

    @property
    def figure(self) -> float | None:
        return None if self.client_s is None else max(self.fib_s, self.client_s)


@dataclass
class Results:
    trials: dict[str, list[TrialResult]] = field(default_factory=dict)

    def figures(self, variant: Variant) -> list[float]:
        return [f for t in self.trials.get(variant.name, []) if (f := t.figure) is not None]


# --------------------------------------------------------------------------- manifests


def config_doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "lb.teapot.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": CONFIG_NS},
        "spec": spec,
    }


def group(name: str) -> list[dict[str, Any]]:
    return [{"matchLabels": {GROUP_LABEL: name}}]


def manifests(specs: list[NodeSpec], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Nodes labelled by variant; ``ours`` and ``nobfd`` each with a pool of one IP, a
    BGPPeer (with and without a BFDProfile) and an advertisement from their own pair."""
    nodes = []
    for spec in specs:
        doc = node_doc(spec)
        doc["metadata"]["labels"] = {
            HOSTNAME_LABEL: spec.name,
            GROUP_LABEL: spec.name.rsplit("-", 1)[0],
        }
        nodes.append(doc)
    timers = {"holdTime": f"{args.hold_time}s", "keepaliveTime": "1s", "connectTime": "1s"}
    peer = {"myASN": NODE_ASN, "peerASN": ROUTER_ASN, "peerAddress": ROUTER_LAN, **timers}
    profile = {
        "transmitInterval": args.interval_ms,
        "receiveInterval": args.interval_ms,
        "detectMultiplier": args.multiplier,
    }
    docs = [
        *nodes,
        config_doc("BFDProfile", "bench", profile),
        config_doc("BGPPeer", "router-bfd",
                   {**peer, "bfdProfile": "bench", "nodeSelectors": group(OURS.name)}),
        config_doc("BGPPeer", "router-nobfd", {**peer, "nodeSelectors": group(NOBFD.name)}),
    ]  # fmt: skip
    for v in (OURS, NOBFD):
        docs += [
            config_doc("AddressPool", v.name, {"addresses": [f"{v.ip}/32"]}),
            config_doc("BGPAdvertisement", v.name,
                       {"addressPools": [v.name], "nodeSelectors": group(v.name)}),
            service_doc(v.name, v.name),
        ]  # fmt: skip
    return docs


# --------------------------------------------------------------------------- FRR as a node


def frr_node_config(router_id: str, prefix: str, session: Session) -> str:
    """bgpd.conf of a node running FRR as MetalLB's FRR mode does: one session to the
    router with a BFD profile, the Service IP announced with ``network``."""
    out = [
        "frr defaults traditional",
        f"hostname {router_id}",
        "log timestamp precision 3",
        f"router bgp {NODE_ASN}",
        f" bgp router-id {router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        " no bgp network import-check",
        f" neighbor {session.address} remote-as {session.asn}",
        f" neighbor {session.address} timers {session.keepalive_time} {session.hold_time}",
        f" neighbor {session.address} timers connect 1",
        f" neighbor {session.address} bfd profile {BFD_PROFILE}",
        " address-family ipv4 unicast",
        f"  network {prefix}",
        f"  neighbor {session.address} activate",
        " exit-address-family",
    ]
    return "\n".join(out) + "\n"


class FrrNode(Frr):
    """FRR (zebra, bfdd, bgpd) in a node namespace, speaking for the node."""

    def __init__(self, lab: LabNetwork, name: str, workdir: Path, hold_time: int) -> None:
        node = lab.nodes[name]
        session = Session(ROUTER_LAN, ROUTER_ASN, hold_time, 1, METALLB_DEFAULT_BFD)
        super().__init__(node.host, workdir, RouterConfig(NODE_ASN, node.address, (session,)))

    def start(self) -> None:
        session = self.config.sessions[0]
        assert session.bfd is not None
        (self.workdir / "zebra.conf").write_text(f"hostname {self.host.name}-zebra\n")
        conf = frr_node_config(self.config.router_id, f"{FRR.ip}/32", session)
        (self.workdir / "bgpd.conf").write_text(conf)
        (self.workdir / "bfdd.conf").write_text(frr_bfdd_config(session.bfd))
        self._popen(self._argv("zebra"), self.workdir / "zebra.out")
        self._zebra_started = False


# --------------------------------------------------------------------------- the lab


class Bench:
    def __init__(self, topo: Topology, workdir: Path, args: argparse.Namespace) -> None:
        self.args = args
        specs = []
        for i, name in enumerate((n for v in VARIANTS for n in v.nodes()), 1):
            v4 = generated_node_address(i)
            specs.append(NodeSpec(name, v4, mirrored_address6(v4)))
        mdir = workdir / "manifests"
        mdir.mkdir(parents=True)
        write_docs(mdir / "bench.yaml", manifests(specs, args))
        layout = LabLayout(specs, ROUTER_LAN, None)
        self.net = LabNetwork(
            topo, layout, workdir, mdir, router="bird", modes=("bgp",), poll_interval=None
        )
        self.workdir = workdir
        self.frr: dict[str, FrrNode] = {}
        self.router: Router | None = None
        self.client: Client | None = None

    def variant_of(self, name: str) -> Variant:
        return next(v for v in VARIANTS if name in v.nodes())

    def start(self) -> None:
        net, args = self.net, self.args
        net.build()
        fast = BfdSpec(args.interval_ms, args.interval_ms, args.multiplier)
        sessions = tuple(
            Session(net.nodes[n].address, NODE_ASN, args.hold_time, 1,
                    None if v is NOBFD else fast)
            for v in VARIANTS for n in v.nodes()
        )  # fmt: skip
        config = RouterConfig(ROUTER_ASN, ROUTER_LAN, sessions)
        router = make_router(args.router, net.router, self.workdir / "router", config)
        self.router = net.router_daemon = router
        router.start()
        wait_for(router.ready, timeout=30, what=f"{router.kind} to answer", every=0.1)
        for v in VARIANTS:
            net.bind(v.ip)  # kube-proxy: every node accepts every Service IP
        for name in OURS.nodes() + NOBFD.nodes():
            net.start_speaker(name)
        for name in FRR.nodes():
            self.start_frr(name)
        self.client = Client(net.client.ns)
        for v in VARIANTS:
            for name in v.nodes():
                self.wait_back(v, name, timeout=90)

    def start_frr(self, name: str) -> None:
        # A fresh directory each boot: a killed FRR leaves its sockets behind, and a stale
        # zserv.api would let bgpd and bfdd start before zebra listens.
        boots = len(list((self.workdir / "frr").glob(f"{name}.*")))
        d = self.workdir / "frr" / f"{name}.{boots}"
        frr = self.frr[name] = FrrNode(self.net, name, d, self.args.hold_time)
        frr.start()
        wait_for(frr.ready, timeout=30, what=f"FRR on {name} to answer", every=0.1)

    def revive(self, v: Variant, name: str) -> None:
        if v is FRR:
            node = self.net.nodes[name]
            node.host.ip("link", "set", "eth0", "up")
            node.host.ip("route", "replace", "default", "via", ROUTER_LAN)
            self.net.start_server(node)
            self.start_frr(name)
        else:
            self.net.revive(name)
        self.wait_back(v, name, timeout=60)

    def wait_back(self, v: Variant, name: str, *, timeout: float) -> None:
        """The router has ``name``'s next hop for ``v``'s IP and, with BFD, its BFD
        session Up (BFD starts at 1 s between packets, RFC 5880 §6.8.3)."""
        router = self.router
        assert router is not None
        address = self.net.nodes[name].address
        wait_for(
            lambda: address in fib_next_hops(self.net.router, f"{v.ip}/32"),
            timeout=timeout,
            what=f"the router's FIB to route {v.ip} via {name}",
            every=0.05,
            detail=lambda: self.net.log_tail(name) if v is not FRR else self.frr[name].log_tail(),
        )
        if v is not NOBFD:
            wait_for(lambda: address in router.bfd_up(), timeout=timeout,
                     what=f"the router's BFD session with {name} Up", every=0.05)  # fmt: skip

    # -- one trial

    def trial(self, v: Variant, victim: str) -> TrialResult:
        client = self.client
        assert client is not None
        prefix = f"{v.ip}/32"
        address = self.net.nodes[victim].address
        probe = client.probe([(v.ip, SERVICE_PORT)], PROBE_EVERY)
        since = time.monotonic()

        def steady() -> bool:
            recent = [a for a in probe.snapshot() if a.start >= since][-20:]
            return len(recent) == 20 and all(a.ok for a in recent)

        gone: list[float] = []

        def done() -> bool:
            if not gone and address not in fib_next_hops(self.net.router, prefix):
                gone.append(time.monotonic())
            return bool(gone) and settled(probe.snapshot(), t0, settle=SETTLE_S)

        try:
            wait_for(steady, timeout=20, what=f"the client served steadily by {v.ip}")
            t0 = self.net.crash(victim)
            wait_for(done, timeout=self.args.hold_time + 15,
                     what=f"the client served without {victim}", every=0.01)  # fmt: skip
        finally:
            attempts = probe.stop()
        o = outage(attempts, t0, settle=SETTLE_S)
        self.revive(v, victim)
        return TrialResult(gone[0] - t0, o.recovered_after, o.failed)

    # -- stability

    def stability(self, seconds: float) -> dict[str, int]:
        router = self.router
        assert router is not None
        ours = {self.net.nodes[n].address: n for n in OURS.nodes()}
        log_before = {n: len(bfd_downs(self.net.log_path(n))) for n in OURS.nodes()}
        router_downs: list[str] = []
        resets: list[str] = []
        stop = threading.Event()

        def watch() -> None:
            bfd, bgp = set(ours), set(ours)
            while not stop.wait(0.25):
                bfd_now, bgp_now = router.bfd_up() & set(ours), router.established() & set(ours)
                for address in bfd - bfd_now:
                    router_downs.append(ours[address])
                    print(f"  router: BFD session with {ours[address]} left Up", flush=True)
                for address in bgp - bgp_now:
                    resets.append(ours[address])
                    print(f"  router: BGP session with {ours[address]} left Established")
                bfd, bgp = bfd_now, bgp_now

        hogs = [
            self.net.nodes[n].host.popen([sys.executable, "-c", "while True: pass"])
            for n in OURS.nodes()
            for _ in range(self.args.hogs_per_node)
        ]
        watcher = threading.Thread(target=watch, daemon=True)
        print(f"stability: {len(hogs)} CPU hogs in the {OURS.name} nodes for {seconds:.0f} s,"
              " nothing killed", flush=True)  # fmt: skip
        watcher.start()
        try:
            time.sleep(seconds)
        finally:
            stop.set()
            watcher.join()
            for h in hogs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(h.pid, signal.SIGKILL)
        node_downs = 0
        for n in OURS.nodes():
            for rec in bfd_downs(self.net.log_path(n))[log_before[n] :]:
                node_downs += 1
                print(f"  {n}: BFD Down ({rec.get('diagnostic')}) at {rec.get('timestamp')}")
        return {"node": node_downs, "router": len(router_downs), "bgp_resets": len(resets)}

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def bfd_downs(path: Path) -> list[dict[str, Any]]:
    """A node's BFD sessions leaving Up for Down: its log's ``bfd_state_changed`` records."""
    out = []
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if (
                    isinstance(rec, dict)
                    and rec.get("event") == "bfd_state_changed"
                    and (rec.get("old"), rec.get("new")) == ("UP", "DOWN")
                ):
                    out.append(rec)
    return out


# --------------------------------------------------------------------------- report


def fmt(xs: list[float]) -> str:
    if not xs:
        return "no trial completed"
    p50, p95 = percentile(xs, 50), percentile(xs, 95)
    return f"p50 {p50:.3f} s  p95 {p95:.3f} s  max {max(xs):.3f} s  (n={len(xs)})"


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="trials per variant (default 20)")
    ap.add_argument(
        "--stability-seconds",
        type=float,
        default=600.0,
        help="stability run under CPU load, seconds (0: skip; default 600)",
    )
    ap.add_argument(
        "--interval-ms",
        type=int,
        default=50,
        help="teapot-lb's BFDProfile transmit/receive interval (default 50)",
    )
    ap.add_argument("--multiplier", type=int, default=3, help="its detectMultiplier (default 3)")
    ap.add_argument("--hold-time", type=int, default=3, help="BGP hold time, s (default 3)")
    ap.add_argument("--router", choices=("bird", "frr"), default="bird")
    ap.add_argument(
        "--hogs-per-node",
        type=int,
        default=2,
        help="CPU hogs per teapot-lb BFD node during the stability run",
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep manifests and every log (nodes, FRR, router) here (default: a temporary"
        " directory, removed)",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} at start (shared machine)")
    print(
        f"teapot-lb BFD {args.interval_ms} ms x {args.multiplier}; FRR nodes MetalLB's default"
        f" 300 ms x 3; hold time {args.hold_time} s; router {args.router}",
        flush=True,
    )
    results = Results()
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bgpfo")))
        else:
            workdir = args.workdir
            workdir.mkdir(parents=True, exist_ok=False)
        topo = stack.enter_context(Topology("bgpfo"))
        bench = Bench(topo, workdir, args)
        try:
            bench.start()
            print("lab up: every node's next hop and BFD session at the router", flush=True)
            for i in range(args.trials):
                for v in VARIANTS:
                    victim = v.nodes()[i % 2]
                    t = bench.trial(v, victim)
                    results.trials.setdefault(v.name, []).append(t)
                    shown = "-" if t.client_s is None else f"{t.client_s:.3f} s"
                    print(
                        f"trial {i + 1:2d} {v.name:<5} kill {victim}: FIB dropped it after"
                        f" {t.fib_s:.3f} s, client all good after {shown}"
                        f" ({t.failed} failed requests)",
                        flush=True,
                    )
            for v in VARIANTS:
                print(f"{v.label:<42} {fmt(results.figures(v))}", flush=True)
            downs = (
                bench.stability(args.stability_seconds)
                if args.stability_seconds > 0
                else {"node": 0, "router": 0, "bgp_resets": 0}
            )
            print(
                f"stability: {downs['node']} BFD downs on our nodes, {downs['router']} at the"
                f" router, {downs['bgp_resets']} BGP sessions left Established",
                flush=True,
            )
        finally:
            bench.close()
    ours = results.trials.get(OURS.name, [])
    fib = [t.fib_s for t in ours]
    client = [t.client_s for t in ours if t.client_s is not None]
    fig = {v.name: results.figures(v) for v in VARIANTS}
    print(
        json.dumps(
            {
                "p50_s": rounded(percentile(fig[OURS.name], 50)),
                "p95_s": rounded(percentile(fig[OURS.name], 95)),
                "max_s": rounded(max(fig[OURS.name], default=None)),
                "fib_p50_s": rounded(percentile(fib, 50)),
                "fib_max_s": rounded(max(fib, default=None)),
                "client_p50_s": rounded(percentile(client, 50)),
                "client_max_s": rounded(max(client, default=None)),
                "frr_bfd_default_p50_s": rounded(percentile(fig[FRR.name], 50)),
                "frr_bfd_default_max_s": rounded(max(fig[FRR.name], default=None)),
                "no_bfd_p50_s": rounded(percentile(fig[NOBFD.name], 50)),
                "no_bfd_max_s": rounded(max(fig[NOBFD.name], default=None)),
                "false_downs": downs["node"] + downs["router"],
                "false_downs_node": downs["node"],
                "false_downs_router": downs["router"],
                "bgp_resets": downs["bgp_resets"],
                "stability_s": args.stability_seconds,
                "trials": args.trials,
                "interval_ms": args.interval_ms,
                "multiplier": args.multiplier,
                "hold_time_s": args.hold_time,
                "router": args.router,
                "load_avg_1m_at_start": round(load[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
