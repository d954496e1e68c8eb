"""A Kubernetes cluster on one host, for control-plane fault tests and ``bench/faults.py``.

- a real control plane (:mod:`teapot_lb.lab.kubeplane`: etcd, kube-apiserver,
  kube-controller-manager) with the lb.teapot.io CRDs (``deploy/crds``);
- a BIRD router in a namespace on a LAN with N node namespaces (ECMP into its FIB);
- in each node namespace, ``teapot-lb speaker`` (BGP) reaching the apiserver through its
  own forwarder (:func:`~teapot_lb.lab.kubeplane.forward_into`), which a test can cut off
  or slow down for that node alone;
- one ``teapot-lb controller`` process (root namespace, loopback only) assigning IPs.

What is announced is read where it matters: the router's kernel FIB
(:meth:`KubeLab.next_hops`). :class:`RouteWatch` samples it in a thread during an outage
and records any route that lost a next hop and any Service whose IP changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import AlreadyExists, KubeError, NotFound
from teapot_lb.kube.resources import NODES as NODE_RESOURCE
from teapot_lb.kube.resources import SERVICES
from teapot_lb.lab.kubeplane import ControlPlane, Forwarder, forward_into, free_port
from teapot_lb.lab.router import Bird, RouterConfig, Session, fib_next_hops
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology

NODES = {"n1": "192.0.2.11", "n2": "192.0.2.12"}
ROUTER = "192.0.2.1"
POOL = "203.0.113.0/28"
NS = "teapot-lb-system"
API = "lb.teapot.io/v1alpha1"
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
T = TypeVar("T")
CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"


def _ours(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


class KubeLab:
    def __init__(
        self, plane: ControlPlane, topo: Topology, workdir: Path, nodes: dict[str, str] = NODES
    ) -> None:
        self.plane = plane
        self.topo = topo
        self.workdir = workdir
        self.node_addresses = dict(nodes)
        self.nodes: dict[str, Host] = {}
        self.forwarders: dict[str, Forwarder] = {}
        self.speakers: dict[str, subprocess.Popen[bytes]] = {}
        self.controller: subprocess.Popen[bytes] | None = None
        self.router: Host | None = None
        self.bird: Bird | None = None

    # ------------------------------------------------------------------ building

    def start(self) -> KubeLab:
        self._configure_api()
        lan = self.topo.add_switch("lan")
        router = self.topo.add_host("router")
        self.topo.connect(router, lan, addrs=[f"{ROUTER}/24"])
        self.router = router
        for name, address in self.node_addresses.items():
            host = self.topo.add_host(name)
            self.topo.connect(host, lan, addrs=[f"{address}/24"])
            self.nodes[name] = host
        sessions = tuple(Session(a, 64512, 9, 3) for a in self.node_addresses.values())
        self.bird = Bird(router, self.workdir / "router", RouterConfig(64500, ROUTER, sessions))
        self.bird.start()
        wait_for(self.bird.ready, timeout=30, what="BIRD to answer", every=0.1)
        for name in self.nodes:
            self.forwarders[name] = forward_into(self.plane, self.nodes[name].ns)
            self.start_speaker(name)
        self.start_controller()
        want = set(self.node_addresses.values())
        bird = self.bird
        wait_for(
            lambda: bird.established() >= want,
            timeout=60,
            what="BGP sessions with every node",
            every=0.2,
            detail=lambda: self.log_tail(next(iter(self.nodes))),
        )
        return self

    def _configure_api(self) -> None:
        self.plane.kubectl("apply", "-f", str(CRDS))
        for crd in json.loads(self.plane.kubectl("get", "crd", "-o", "json"))["items"]:
            name = crd["metadata"]["name"]
            self.plane.kubectl("wait", "--for=condition=Established", f"crd/{name}")
        docs: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            *(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}
                for n in self.node_addresses
            ),
            _ours("AddressPool", "public", {"addresses": [POOL]}),
            _ours(
                "BGPPeer",
                "router",
                {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER, "holdTime": "9s"},
            ),
            _ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
        ]
        self.apply(docs)

    def _kubeconfig(self, server: str, name: str) -> Path:
        config = json.loads(self.plane.admin_kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = server
        path = self.workdir / f"kubeconfig-{name}"
        path.write_text(json.dumps(config))
        return path

    def start_speaker(self, name: str) -> None:
        kubeconfig = self._kubeconfig(self.forwarders[name].server, name)
        log = (self.workdir / f"speaker-{name}.log").open("ab")
        self.speakers[name] = self.nodes[name].popen(
            [
                sys.executable, "-m", "teapot_lb.cli.speaker", "--node", name,
                "--kubeconfig", str(kubeconfig), "--modes", "bgp",
                "--state-dir", str(self.workdir / f"state-{name}"),
                "--metrics-address", "127.0.0.1:7472",
            ],
            stdout=log, stderr=log,
        )  # fmt: skip

    def start_controller(self) -> None:
        log = (self.workdir / "controller.log").open("ab")
        self.controller = subprocess.Popen(
            [
                sys.executable, "-m", "teapot_lb.cli.controller",
                "--kubeconfig", str(self.plane.admin_kubeconfig),
                "--metrics-address", f"127.0.0.1:{free_port()}",
                "--webhook-addr", f"127.0.0.1:{free_port()}",
                "--lease-namespace", NS, "--identity", "kubelab",
            ],
            stdout=log, stderr=log,
        )  # fmt: skip

    def close(self) -> None:
        procs = [*self.speakers.values(), *([self.controller] if self.controller else [])]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for forwarder in self.forwarders.values():
            forwarder.stop()
        if self.bird is not None:
            self.bird.stop()

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{'controller' if name == 'controller' else f'speaker-{name}'}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ objects

    def apply(self, docs: Iterable[dict[str, Any]]) -> None:
        items = {"apiVersion": "v1", "kind": "List", "items": list(docs)}
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(items))

    def api(self, call: Callable[[KubeClient], Awaitable[T]]) -> T:
        """One call with our own client as the admin (much faster than a kubectl run, so
        timings measure the cluster, not the tool); RuntimeError when it fails."""

        async def go() -> T:
            async with await connect(self.plane.admin_kubeconfig, request_timeout_s=10) as c:
                return await call(c)

        try:
            return asyncio.run(go())
        except KubeError as err:
            raise RuntimeError(str(err)) from err

    def create_service(self, name: str, namespace: str = "default") -> None:
        doc = {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }

        async def create(c: KubeClient) -> None:
            # A create that timed out may have gone through: it exists, then.
            with contextlib.suppress(AlreadyExists):
                await c.create(SERVICES, doc)

        self.api(create)

    def delete_service(self, name: str, namespace: str = "default") -> None:

        async def delete(c: KubeClient) -> None:
            with contextlib.suppress(NotFound):
                await c.delete(SERVICES, name, namespace)

        self.api(delete)

    def ips(self, namespace: str = "default") -> dict[str, str]:
        """Service name → its first assigned IP (those that have one)."""
        listed = self.api(lambda c: c.list(SERVICES, namespace=namespace))
        out: dict[str, str] = {}
        for svc in listed.items:
            ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            if ingress and "ip" in ingress[0]:
                out[svc["metadata"]["name"]] = ingress[0]["ip"]
        return out

    def label_excluded(self, node: str, excluded: bool) -> None:
        patch = {"metadata": {"labels": {EXCLUDE: "" if excluded else None}}}
        self.api(lambda c: c.patch(NODE_RESOURCE, node, patch))

    def next_hops(self, ip: str) -> frozenset[str]:
        assert self.router is not None
        return fib_next_hops(self.router, f"{ip}/32")

    def all_nodes(self) -> frozenset[str]:
        return frozenset(self.node_addresses.values())


@contextlib.contextmanager
def running(workdir: Path, *, tag: str, apiserver_args: Sequence[str] = ()) -> Iterator[KubeLab]:
    """A control plane and a :class:`KubeLab` on it, started; everything stopped and every
    namespace removed on exit."""
    plane = ControlPlane(workdir / "kube", apiserver_args=apiserver_args)
    with Topology(tag) as topo:
        try:
            plane.start()
            lab = KubeLab(plane, topo, workdir)
            try:
                lab.start()
                yield lab
            finally:
                lab.close()
        finally:
            plane.close()


@dataclass
class RouteWatch:
    """Samples the router's routes for `ips` (in a thread) while a fault lasts; records
    every sample where a route has fewer next hops than at the start."""

    lab: KubeLab
    ips: dict[str, str]  # Service name → IP
    every: float = 0.05
    before: dict[str, frozenset[str]] = field(default_factory=dict)
    withdrawn: list[tuple[float, str, frozenset[str]]] = field(default_factory=list)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RouteWatch:
        self.before = {ip: self.lab.next_hops(ip) for ip in self.ips.values()}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for ip, hops in self.before.items():
                now = self.lab.next_hops(ip)
                if not hops <= now:
                    self.withdrawn.append((time.monotonic(), ip, now))
            self.samples += 1


def retrying(action: Callable[[], None], *, what: str, timeout: float = 60.0) -> None:
    """Run `action` (a KubeLab read or write) until it goes through: right after an outage
    the apiserver may still refuse (429, 503) or not answer."""

    def went_through() -> bool:
        try:
            action()
        except RuntimeError:
            return False
        return True

    wait_for(went_through, timeout=timeout, what=what, every=0.05)


def changed_ips(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Services that had an IP before and now have another (or none)."""
    return {n: (ip, after.get(n)) for n, ip in before.items() if after.get(n) != ip}


def time_until(check: Callable[[], object], *, timeout: float, what: str) -> float:
    """Seconds until `check` holds (fails after `timeout`)."""
    started = time.monotonic()
    wait_for(check, timeout=timeout, what=what, every=0.02)
    return time.monotonic() - started
