"""A relay world in namespaces: two routers (BIRD 2 and FRR 8, ADD-PATH receive, multipath
into their kernel FIBs), the relay, and tenant speakers (ours, BIRD, FRR, GoBGP) on one LAN.

    192.0.2.1   rbird   router, BIRD (AS 64496)        2001:db8::1
    192.0.2.2   relay   teapot-lb relay (AS 64500)     2001:db8::2
    192.0.2.3   rfrr    router, FRR (AS 64496)         2001:db8::3
    192.0.2.9-12   acme's nodes a1..a4: ours, BIRD, FRR, GoBGP (AS 64601)   2001:db8::9-c
    192.0.2.17-18  bolt's nodes b1, b2: ours, with TCP MD5 (AS 64602)       2001:db8::11-12
    192.0.2.13-14  ah, ah2: hostile speakers, registered nodes of acme       2001:db8::d-e
    192.0.2.19     bh: in bolt's node network, without bolt's MD5 key       2001:db8::13
    192.0.2.40     x: nobody's, for sessions that must be refused            2001:db8::28
    192.0.2.49     au: in acme's node networks, no registered node's         2001:db8::31
    192.0.2.50     rbird's second leg, inside acme's node networks           2001:db8::32

Registered nodes (the Tenants' spec.nodes): acme a1..a4, ah, ah2; bolt b1, b2.

acme holds 203.0.113.0/28 and 2001:db8:100::/124, bolt 203.0.113.16/28 and
2001:db8:100::10/124; 192.0.2.60 / 2001:db8::60 stand for a management node (protected).
Tenant speakers use GTSM (TTL 255), as docs/relay.md tells tenants to.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from needs import require_binary, require_root
from teapot_lb.lab.peers import (
    BgpDaemon,
    Bird,
    Frr,
    GoBgp,
    Neighbor,
    Origination,
    Teapot,
    fib_next_hops,
)
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.netlab.topology import Host

API = "lb.teapot.io/v1alpha1"
CONFIG_NS = "teapot-lb-system"
RELAY_AS, ROUTER_AS = 64500, 64496
ASN = {"acme": 64601, "bolt": 64602}
BOLT_PASSWORD = "bolt-secret"
METRICS_PORT = 7476

HOSTS: dict[str, int] = {
    "rbird": 1, "relay": 2, "rfrr": 3,
    "a1": 9, "a2": 10, "a3": 11, "a4": 12,
    "ah": 13, "ah2": 14,  # in acme's node network: hostile speakers of acme
    "b1": 17, "b2": 18, "bh": 19, "x": 40, "au": 49,
}  # fmt: skip
ROUTER_LEG = 50  # rbird's address in acme's node networks (not a BGPPeer's: not protected)
REGISTERED = {"acme": (*("a1", "a2", "a3", "a4"), "ah", "ah2"), "bolt": ("b1", "b2")}
MANAGEMENT = ("192.0.2.60", "2001:db8::60")


def v4(name: str) -> str:
    return f"192.0.2.{HOSTS[name]}"


def v6(name: str) -> str:
    return f"2001:db8::{HOSTS[name]:x}"


RELAY4, RELAY6 = v4("relay"), v6("relay")
ACME_V4, ACME_V6 = "203.0.113.5/32", "2001:db8:100::5/128"
BOLT_V4, BOLT_V6 = "203.0.113.20/32", "2001:db8:100::14/128"
ACME_NODES = ("a1", "a2", "a3", "a4")
BOLT_NODES = ("b1", "b2")


def relay_neighbors(**kwargs: Any) -> list[Neighbor]:
    """A tenant speaker's two sessions to the relay: IPv4 routes over IPv4, IPv6 over IPv6."""
    return [
        Neighbor(RELAY4, RELAY_AS, families=("ipv4",), **kwargs),
        Neighbor(RELAY6, RELAY_AS, families=("ipv6",), **kwargs),
    ]


# -------------------------------------------------------------- GTSM in the daemons' configs


class GtsmBird(Bird):
    def _write_config(self) -> None:
        super()._write_config()
        text = self.conf.read_text().replace("  direct;", "  direct;\n  ttl security on;")
        self.conf.write_text(text)


class GtsmFrr(Frr):
    def _write_config(self) -> None:
        super()._write_config()
        conf = self.workdir / "bgpd.conf"
        text = re.sub(
            r"^( neighbor (\S+) remote-as \d+)$",
            r"\1\n neighbor \2 ttl-security hops 1",
            conf.read_text(),
            flags=re.M,
        )
        conf.write_text(text)


class GtsmGoBgp(GoBgp):
    def _write_config(self) -> None:
        super()._write_config()
        text = self.conf.read_text().replace(
            "  [neighbors.timers.config]",
            "  [neighbors.ttl-security.config]\n    enabled = true\n    ttl-min = 255\n"
            "  [neighbors.timers.config]",
        )
        self.conf.write_text(text)


class GtsmTeapot(Teapot):
    def peer_fields(self, n: Neighbor) -> dict[str, Any]:
        return {**super().peer_fields(n), "ttl_security": True}


# -------------------------------------------------------------- manifests


def config(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": CONFIG_NS},
            "spec": spec}  # fmt: skip


def node_docs(tenant: str, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """``spec.nodes``: the tenant's registered hosts (default: all of REGISTERED's)."""
    chosen = REGISTERED[tenant] if names is None else names
    return [{"name": n, "addresses": [v4(n), v6(n)]} for n in chosen]


def tenant_doc(
    name: str, v4_cidr: str, v6_cidr: str, nodes: list[str], registered: Sequence[str] | None = None
) -> dict[str, Any]:
    spec = {
        "namespace": f"tenant-{name}",
        "allocations": [
            {"addressPool": "tenants-v4", "cidrs": [v4_cidr]},
            {"addressPool": "tenants-v6", "cidrs": [v6_cidr]},
        ],
        "nodeNetworks": nodes,
        "nodes": node_docs(name, registered),
        "asn": ASN[name],
    }
    return {"apiVersion": API, "kind": "Tenant", "metadata": {"name": name}, "spec": spec}


ACME_NETWORKS = ["192.0.2.8/29", "192.0.2.48/29", "2001:db8::8/125", "2001:db8::30/125"]


def acme_doc(
    v4_cidr: str = "203.0.113.0/28", registered: Sequence[str] | None = None
) -> dict[str, Any]:
    return tenant_doc("acme", v4_cidr, "2001:db8:100::/124", ACME_NETWORKS, registered)


def manifests(
    acme: dict[str, Any] | None = None, *, v6_over_v4: bool = False
) -> list[dict[str, Any]]:
    """The operator's directory; ``v6_over_v4``: one IPv4 session per router carrying both
    families (else an IPv4 and an IPv6 session, one family each)."""
    peers = []
    for router in ("rbird", "rfrr"):
        sessions = (
            [("ipv4", v4(router), ["ipv4-unicast", "ipv6-unicast"])]
            if v6_over_v4
            else [("ipv4", v4(router), ["ipv4-unicast"]), ("ipv6", v6(router), ["ipv6-unicast"])]
        )
        for name, addr, families in sessions:
            peers.append(
                config("BGPPeer", f"{router}-{name}", {
                    "myASN": RELAY_AS, "peerASN": ROUTER_AS, "peerAddress": addr,
                    "holdTime": "9s", "addPath": "send", "families": families,
                })
            )  # fmt: skip
    return [
        config("AddressPool", "tenants-v4", {"addresses": ["203.0.113.0/24"]}),
        config("AddressPool", "tenants-v6", {"addresses": ["2001:db8:100::/120"]}),
        acme or acme_doc(),
        tenant_doc("bolt", "203.0.113.16/28", "2001:db8:100::10/124",
                   ["192.0.2.16/29", "2001:db8::10/125"]),
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "relay-bgp", "namespace": "tenant-bolt"},
         "stringData": {"password": BOLT_PASSWORD}},
        *peers,
    ]  # fmt: skip


# -------------------------------------------------------------- the world


@dataclass
class World:
    topo: Topology
    workdir: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    routers: dict[str, BgpDaemon] = field(default_factory=dict)
    tenants: dict[str, BgpDaemon] = field(default_factory=dict)
    relay: subprocess.Popen[bytes] | None = None

    @property
    def manifest_dir(self) -> Path:
        return self.workdir / "manifests"

    def write_manifests(self, docs: Sequence[dict[str, Any]], name: str = "world.yaml") -> None:
        self.manifest_dir.mkdir(exist_ok=True)
        tmp = self.manifest_dir / f".{name}.tmp"
        tmp.write_text(yaml.safe_dump_all(list(docs)))
        tmp.rename(self.manifest_dir / name)

    def start_relay(self, *extra: str) -> None:
        teapot = str(Path(sys.executable).parent / "teapot-lb")
        log = (self.workdir / "relay.log").open("ab")
        self.relay = self.hosts["relay"].popen(
            [teapot, "--log-level", "debug", "relay", "--manifests", str(self.manifest_dir),
             "--asn", str(RELAY_AS), "--router-id", RELAY4, "--listen", ":179",
             "--metrics-addr", f"{RELAY4}:{METRICS_PORT}",
             "--protect", MANAGEMENT[0], "--protect", MANAGEMENT[1], *extra],
            stdout=log, stderr=log,
        )  # fmt: skip
        wait_for(lambda: self.metrics_text() != "", timeout=30, what="the relay's metrics",
                 detail=self.relay_log)  # fmt: skip

    def restart_relay(self, *extra: str) -> None:
        """The relay again, with these options (its log goes on in the same file)."""
        if self.relay is not None:
            self.relay.kill()
            self.relay.wait(timeout=10)
        self.start_relay(*extra)

    def stop(self) -> None:
        """Kill every daemon and the relay (the topology removes the rest)."""
        for d in [*self.tenants.values(), *self.routers.values()]:
            d.kill()
        if self.relay is not None:
            self.relay.kill()
            self.relay.wait(timeout=10)

    def relay_log(self) -> str:
        try:
            return (self.workdir / "relay.log").read_text()[-4000:]
        except OSError:
            return ""

    def _get(self, path: str) -> str:
        # The metrics port is only reachable inside the namespaces: ask from the relay's.
        code = (
            "import sys, urllib.request\n"
            "try:\n"
            f"    print(urllib.request.urlopen('http://{RELAY4}:{METRICS_PORT}{path}',"
            " timeout=5).read().decode(), end='')\n"
            "except Exception as e:\n"
            "    print('', end='')\n"
        )
        return self.hosts["relay"].run(sys.executable, "-c", code, check=False)

    def metrics_text(self) -> str:
        return self._get("/metrics")

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the relay's metrics (0 if absent)."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in self.metrics_text().splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            if key == (f"{name}{{{want}}}" if want else name):
                return float(value)
        return 0.0

    def explain(self, tenant: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self._get(f"/relay/tenants/{tenant}") or "{}")
        return doc

    def fib(self, prefix: str) -> dict[str, frozenset[str] | None]:
        """The next hops of ``prefix`` in each router's kernel FIB."""
        return {name: fib_next_hops(r.host, prefix) for name, r in self.routers.items()}

    def wait_fib(self, prefix: str, hops: frozenset[str] | None, *, timeout: float = 30) -> None:
        wait_for(
            lambda: all(h == hops for h in self.fib(prefix).values()),
            timeout=timeout,
            what=f"{prefix} via {sorted(hops) if hops else 'nothing'} in both routers' FIBs",
            detail=lambda: f"FIB: {self.fib(prefix)}\n{self.relay_log()[-2000:]}",
        )


def router_neighbors(*, v6_over_v4: bool = False, families: Sequence[str] = ("ipv4", "ipv6")
                     ) -> list[Neighbor]:  # fmt: skip
    """A router's sessions with the relay (passive, ADD-PATH receive): one per family, or
    with ``v6_over_v4`` one IPv4 session with ``families``."""
    kw: dict[str, Any] = {"passive": True, "add_path": "receive"}
    if v6_over_v4:
        return [Neighbor(RELAY4, RELAY_AS, families=tuple(families), **kw)]
    return [
        Neighbor(RELAY4, RELAY_AS, families=("ipv4",), **kw),
        Neighbor(RELAY6, RELAY_AS, families=("ipv6",), **kw),
    ]


def start_router(world: World, name: str, neighbors: list[Neighbor]) -> BgpDaemon:
    cls = {"rbird": Bird, "rfrr": Frr}[name]
    router = cls(
        world.hosts[name], world.workdir / name, asn=ROUTER_AS, router_id=v4(name),
        neighbors=neighbors, fib=True, local_addresses=[v4(name), v6(name)],
    )  # fmt: skip
    router.start()
    world.routers[name] = router
    return router


def build(topo: Topology, workdir: Path, *, v6_over_v4: bool = False) -> World:
    world = World(topo, workdir)
    switch = topo.add_switch("lan")
    for name, i in HOSTS.items():
        host = topo.add_host(name)
        addrs = [f"192.0.2.{i}/24", f"2001:db8::{i:x}/64"]
        if name == "rbird":
            addrs += [f"192.0.2.{ROUTER_LEG}/24", f"2001:db8::{ROUTER_LEG:x}/64"]
        topo.connect(host, switch, addrs=addrs)
        world.hosts[name] = host
    world.write_manifests(manifests(v6_over_v4=v6_over_v4))
    for name in ("rbird", "rfrr"):
        start_router(world, name, router_neighbors(v6_over_v4=v6_over_v4))
    return world


@contextmanager
def world_in(name: str, workdir: Path) -> Iterator[World]:
    """A world in a topology of its own (skipped without root, BIRD or FRR), its daemons and
    namespaces gone afterwards whatever happened."""
    require_root()
    require_binary("bird", "/usr/lib/frr/bgpd")
    with Topology(name) as topo:
        world = build(topo, workdir)
        try:
            yield world
        finally:
            world.stop()


def tenant_speaker(
    world: World,
    name: str,
    cls: type[BgpDaemon],
    tenant: str,
    originate: Sequence[Origination],
    *,
    password: str | None = None,
    start: bool = True,
) -> BgpDaemon:
    kwargs: dict[str, Any] = {}
    if issubclass(cls, Teapot):
        kwargs["listen_port"] = None
    daemon = cls(
        world.hosts[name], world.workdir / name, asn=ASN[tenant], router_id=v4(name),
        neighbors=relay_neighbors(password=password), originate=list(originate),
        local_addresses=[v4(name), v6(name)], **kwargs,
    )  # fmt: skip
    if start:
        daemon.start()
    world.tenants[name] = daemon
    return daemon
