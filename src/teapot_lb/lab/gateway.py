"""`teapot-lb lab --modes gateway`: the Teapot gateway end to end in namespaces.

Two tenants' hostnames on one gateway IP (HTTPS with SNI to each), a TCP and a UDP
service, endpoint churn under load (failed requests and reloads counted), a tenant trying
another's hostname (refused: the reason is reported), and a gateway node killed.

HA by the product: two `teapot-lb gateway --manifests` instances (gw1, gw2, each with the
gateway IP on its loopback), and beside each the speaker, `teapot-lb run --manifests
--node gwN --modes bgp`, announcing the gateway IP (a LoadBalancer Service requesting it,
`externalTrafficPolicy: Local` with the gateway on each node as its endpoint) to the lab
router (BIRD, multipath into its FIB), BFD beside each session. gw1 dies (link down, every
process SIGKILLed): BFD ends its session and BIRD drops its next hop; the lab only watches
the router's FIB.

    client 203.0.113.2 ── router ──┬── gw1 198.51.100.11 (VIP 192.0.2.10 on lo)
                                   ├── gw2 198.51.100.12 (VIP on lo)
                                   └── pods 198.51.100.2-9
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.gateway.control.l7standalone import translate_directory
from teapot_lb.lab import gateway_manifests as gm
from teapot_lb.lab.groups import run_group
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.manifests import BfdSpec, host_prefix, write_docs
from teapot_lb.lab.processes import log_tail, start_run
from teapot_lb.lab.router import Router, RouterConfig, Session, fib_next_hops, make_router
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology

Progress = Callable[[str], None]
VIP = "192.0.2.10"
CLIENT = "203.0.113.2"
ROUTER = "198.51.100.1"
GATEWAYS = {"gw1": "198.51.100.11", "gw2": "198.51.100.12"}
ACME_HOST = "www.shared.example"
BOLT_HOST = "www.bolt.example"
# name -> (pod address, port); the servers bind every address, so one port each.
PODS = {
    "acme-a": ("198.51.100.2", 8081),
    "acme-b": ("198.51.100.3", 8082),
    "tcp": ("198.51.100.4", 8083),
    "bolt": ("198.51.100.9", 8084),
}
UDP_POD = "198.51.100.5"
CHURN_CHANGES = 10

# Run in the client's namespace: HTTPS requests (new connection each, SNI) for `seconds`;
# prints {"ok": n, "failed": n, "names": {...}}.
_LOAD = r"""
import json, socket, ssl, sys, time
vip, host, ca, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ctx = ssl.create_default_context(cafile=ca)
ok = failed = 0; names = {}
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        with socket.create_connection((vip, 443), timeout=2) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as s:
                s.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
        head, _, body = data.decode().partition("\r\n\r\n")
        if " 200 " in head.split("\r\n")[0]:
            ok += 1; name = body.strip(); names[name] = names.get(name, 0) + 1
        else:
            failed += 1
    except OSError:
        failed += 1
print(json.dumps({"ok": ok, "failed": failed, "names": names}))
"""
_UDP_ECHO = (
    "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
    f"s.bind(('{UDP_POD}',{gm.UDP_PORT}))\n"
    "while True:\n d,a=s.recvfrom(2048);s.sendto(b'udp '+d,a)"
)


@dataclass
class GatewayResult:
    ip: str = VIP
    https: dict[str, str] = field(default_factory=dict)  # hostname -> backend that answered
    tcp: str = ""  # what the TCP service answered
    udp: str = ""
    churn_changes: int = 0
    churn_requests: int = 0
    churn_failed: int = 0
    churn_reloads: int = 0
    churn_names: dict[str, int] = field(default_factory=dict)
    theft_refused: str = ""  # the refusal's reason ("" when not refused)
    theft_victim_served: bool = False
    killed_requests: int = 0
    killed_failed: int = 0
    hops_before: list[str] = field(default_factory=list)  # the router's FIB for the IP
    hops_after: list[str] = field(default_factory=list)  # ... once gw1's hop was withdrawn
    withdrawn_s: float | None = None  # gw1 killed -> its next hop gone from the FIB
    served_after_kill: bool = False
    ha: str = (
        "BGP ECMP by teapot-lb speakers (gw1, gw2: `teapot-lb run --modes bgp`, BFD"
        f" {gm.BFD_MS} ms x{gm.BFD_MULTIPLIER}; BIRD multipath)"
    )
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return not self.errors
        return (
            not self.errors
            and self.https == {ACME_HOST: "acme-a", BOLT_HOST: "bolt"}
            and self.tcp == "tcp"
            and self.udp == "udp ping"
            and self.churn_failed == 0
            and self.churn_reloads == 0
            and "HostnameTaken" in self.theft_refused
            and self.theft_victim_served
            and self.killed_requests > 0
            and self.hops_before == sorted(GATEWAYS.values())
            and self.hops_after == [GATEWAYS["gw2"]]
            and self.served_after_kill
        )


def _certificate(directory: Path, host: str) -> tuple[Path, str, str]:
    cert, key = directory / f"{host}.crt", directory / f"{host}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={host}",
         "-addext", f"subjectAltName=DNS:{host}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, cert.read_text(), key.read_text()


class GatewayGroup:
    def __init__(self, work: Path, topo: Topology, progress: Progress) -> None:
        self.work, self.topo, self.progress = work, topo, progress
        self.manifests = work / "manifests"
        self.manifests.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.router: Router | None = None
        self.metrics: dict[str, int] = {}
        self.hosts: dict[str, Host] = {}
        self.certs: dict[str, tuple[Path, str, str]] = {}

    # ----- set-up

    def build(self) -> None:
        front, back = self.topo.add_switch("front"), self.topo.add_switch("back")
        h = self.hosts
        for name in ("client", "router", "pods", *GATEWAYS):
            h[name] = self.topo.add_host(name)
        self.topo.connect(h["client"], front, addrs=[f"{CLIENT}/24"])
        self.topo.connect(h["router"], front, addrs=["203.0.113.1/24"])
        self.topo.connect(h["router"], back, ifname="eth1", addrs=["198.51.100.1/24"])
        pod_ips = sorted({a for a, _ in PODS.values()} | {UDP_POD})
        self.topo.connect(h["pods"], back, addrs=[f"{a}/24" for a in pod_ips])
        for name, address in GATEWAYS.items():
            self.topo.connect(h[name], back, addrs=[f"{address}/24"])
            h[name].add_address("lo", f"{VIP}/32")
            h[name].ip("route", "add", "default", "via", "198.51.100.1")
        h["client"].ip("route", "add", "default", "via", "203.0.113.1")
        h["pods"].ip("route", "add", "default", "via", "198.51.100.1")
        h["router"].sysctl("net.ipv4.ip_forward", "1")
        h["router"].sysctl("net.ipv4.fib_multipath_hash_policy", "1")  # by ports too
        for name, (_address, port) in PODS.items():
            h["pods"].popen([sys.executable, "-m", "teapot_lb.lab.serve", "--name", name,
                             "--port", str(port)], stdout=subprocess.DEVNULL)  # fmt: skip
        h["pods"].popen([sys.executable, "-c", _UDP_ECHO])
        certs = self.work / "certs"
        certs.mkdir(exist_ok=True)
        for host in (ACME_HOST, BOLT_HOST):
            self.certs[host] = _certificate(certs, host)

    def write(self, acme_pod: str = "acme-a", theft: bool = False) -> None:
        """The mirrored objects as files (replaced by rename: a reader never sees half)."""

        def pod(name: str) -> tuple[list[str], int]:
            address, port = PODS[name]
            return [address], port

        objs: list[dict[str, Any]] = [
            gm.tenant("acme", ["acme.example", "shared.example"], "198.51.100.0/29"),
            gm.tenant("bolt", ["bolt.example", "shared.example"], "198.51.100.8/29"),
            *gm.stream_gateway("acme"),
            gm.endpoints("acme", "tcp-echo", *pod("tcp")),
            gm.endpoints("acme", "udp-echo", [UDP_POD], gm.UDP_PORT, udp=True),
        ]
        for tenant, host, svc, addresses in (
            ("acme", ACME_HOST, "web", pod(acme_pod)),
            ("bolt", BOLT_HOST, "web", pod("bolt")),
            *([("bolt", ACME_HOST, "steal", pod("bolt"))] if theft else []),
        ):
            _cert, cert_pem, key_pem = self.certs[host]
            name = "shop" if svc == "web" else svc
            objs += [
                gm.ingress(tenant, name, host, svc, f"{name}-tls"),
                gm.secret(tenant, f"{name}-tls", cert_pem, key_pem),
                gm.endpoints(tenant, svc, *addresses),
            ]
        staged = self.manifests / "objects.yaml.new"
        staged.write_text(yaml.safe_dump_all(objs))
        staged.replace(self.manifests / "objects.yaml")

    def start(self, name: str) -> None:
        port = free_port()
        self.metrics[name] = port
        log = (self.work / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [str(Path(sys.executable).parent / "teapot-lb"), "gateway",
             "--manifests", str(self.manifests), "--address", VIP,
             "--netns", self.hosts[name].ns, "--state-dir", str(self.work / name),
             "--metrics-addr", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )  # fmt: skip

    def start_bgp(self) -> None:
        """BIRD on the router (a session with BFD per gateway node) and the speakers."""
        bfd = BfdSpec(gm.BFD_MS, gm.BFD_MS, gm.BFD_MULTIPLIER)
        sessions = tuple(Session(a, gm.SPEAKER_ASN, gm.HOLD_S, gm.KEEPALIVE_S, bfd)
                         for a in GATEWAYS.values())  # fmt: skip
        config = RouterConfig(gm.ROUTER_ASN, ROUTER, sessions)
        self.router = make_router("bird", self.hosts["router"], self.work / "router", config)
        self.router.start()
        wait_for(self.router.ready, timeout=30, what="BIRD to answer", every=0.1)
        speaker = self.work / "speaker"
        speaker.mkdir(exist_ok=True)
        write_docs(speaker / "gateway.yaml", gm.speaker_docs(VIP, ROUTER, GATEWAYS))
        for name in GATEWAYS:
            self.procs[f"{name}-speaker"] = start_run(
                self.hosts[name], name, manifests=speaker, state_dir=self.work / f"{name}-run",
                modes=("bgp",), poll_interval=None, log_path=self.work / f"{name}-speaker.log",
            )  # fmt: skip

    def hops(self) -> list[str]:
        return sorted(fib_next_hops(self.hosts["router"], host_prefix(VIP)))

    def crash(self, name: str) -> float:
        """The gateway node dies: link down, then every process of it SIGKILLed (HAProxy,
        nginx, the speaker, and `teapot-lb gateway`, which runs outside the namespace)."""
        host = self.hosts[name]
        t0 = time.monotonic()
        host.ip("link", "set", "eth0", "down")
        host.kill_processes()  # the speaker and everything else in the namespace
        for proc in (self.procs[name], self.procs[f"{name}-speaker"]):
            proc.kill()
            proc.wait(timeout=10)
        return t0

    def logged_refusal(self, name: str, what: str) -> bool:
        """Whether gateway `name` logged the refusal of an object whose name has `what`."""
        try:
            text = (self.work / f"{name}.log").read_text(errors="replace")
        except OSError:
            return False
        return any('"refused"' in line and what in line for line in text.splitlines())

    def ready(self, name: str) -> bool:
        try:
            url = f"http://127.0.0.1:{self.metrics[name]}/readyz"
            with urllib.request.urlopen(url, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def reloads(self) -> int:
        total = 0
        for name, port in self.metrics.items():
            if self.procs[name].poll() is not None:
                continue
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("teapot_lb_gateway_reloads_total "):
                        total += int(float(line.split()[1]))
        return total

    # ----- clients

    def https(self, host: str) -> str:
        ca = self.certs[host][0]
        out = self.hosts["client"].run(
            "curl", "-sS", "--max-time", "5", "--resolve", f"{host}:443:{VIP}", "--cacert",
            str(ca), f"https://{host}/", check=False,
        )  # fmt: skip
        return out.strip()

    def stream(self, udp: bool) -> str:
        kind, port = ("SOCK_DGRAM", gm.UDP_PORT) if udp else ("SOCK_STREAM", gm.TCP_PORT)
        payload = b"ping" if udp else b"GET / HTTP/1.0\r\n\r\n"
        code = (
            "import socket,sys;"
            f"s=socket.socket(socket.AF_INET,socket.{kind});s.settimeout(3);"
            f"s.connect(({VIP!r},{port}));s.send({payload!r});"
            "d=s.recv(4096).decode();"
            "sys.stdout.write(d.rsplit(chr(10),2)[-2] if 'HTTP' in d else d)"
        )
        return self.hosts["client"].run(sys.executable, "-c", code, check=False).strip()

    def load(self, host: str, seconds: float) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-c", _LOAD, VIP, host, str(self.certs[host][0]), str(seconds)]
        return self.hosts["client"].popen(argv, stdout=subprocess.PIPE)

    # ----- the scenario

    def run(self, r: GatewayResult) -> None:
        try:
            self._scenario(r)
        except Exception:
            for name in GATEWAYS:  # what the speakers said, for a failed run
                tail = log_tail(self.work / f"{name}-speaker.log", 8)
                if tail:
                    r.errors.append(f"{name} speaker log:\n{tail}")
            raise

    def _scenario(self, r: GatewayResult) -> None:
        self.build()
        self.write()
        for name in GATEWAYS:
            self.start(name)
        self.start_bgp()
        for name in GATEWAYS:
            wait_for(lambda n=name: self.ready(n), timeout=30, what=f"{name} ready")  # type: ignore[misc]
        both = sorted(GATEWAYS.values())
        wait_for(lambda: self.hops() == both, timeout=30, what=f"the router's FIB: {VIP} via both",
                 detail=lambda: f"FIB: {self.hops()}")  # fmt: skip
        r.hops_before = self.hops()
        self.progress(f"lab: gateway: two gateways ready behind one IP, FIB via {r.hops_before}")
        for host in (ACME_HOST, BOLT_HOST):
            wait_for(lambda h=host: self.https(h), timeout=15, what=f"https://{host}")  # type: ignore[misc]
            r.https[host] = self.https(host)
        r.tcp, r.udp = self.stream(udp=False), self.stream(udp=True)

        # Endpoint churn under load: acme's pod alternates between two addresses.
        before = self.reloads()
        load = self.load(ACME_HOST, 3.0 + CHURN_CHANGES * 0.25)
        time.sleep(1.0)
        for i in range(CHURN_CHANGES):
            self.write(acme_pod="acme-b" if i % 2 == 0 else "acme-a")
            r.churn_changes += 1
            time.sleep(0.25)
        self.write()
        counts = json.loads(load.communicate(timeout=60)[0])
        r.churn_requests, r.churn_failed = counts["ok"] + counts["failed"], counts["failed"]
        r.churn_names = counts["names"]
        r.churn_reloads = self.reloads() - before
        self.progress(f"lab: gateway: churn: {r.churn_failed}/{r.churn_requests} failed")

        # bolt mirrors an Ingress for acme's hostname: refused, acme keeps it.
        self.write(theft=True)
        translation, _problems = translate_directory(self.manifests, [ip_address(VIP)])
        for ref, result in translation.results.items():
            if result.tenant == "bolt" and result.refusals and "steal" in str(ref):
                r.theft_refused = str(result.refusals[0])
        # Each running gateway has translated the theft (it logs the refusal) before the
        # victim is checked.
        for name in GATEWAYS:
            wait_for(lambda n=name: self.logged_refusal(n, "steal"), timeout=15,  # type: ignore[misc]
                     what=f"{name} refusing the theft")  # fmt: skip
        r.theft_victim_served = all(self.https(ACME_HOST) == "acme-a" for _ in range(5))

        # gw1 dies under load; BFD/BGP withdraw its next hop (the lab only watches the FIB).
        load = self.load(ACME_HOST, 3.0)
        time.sleep(1.0)
        t0 = self.crash("gw1")
        wait_for(lambda: GATEWAYS["gw1"] not in self.hops(), timeout=15, every=0.01,
                 what="the router to drop gw1's next hop",
                 detail=lambda: f"FIB: {self.hops()}")  # fmt: skip
        r.withdrawn_s = time.monotonic() - t0
        r.hops_after = self.hops()
        counts = json.loads(load.communicate(timeout=60)[0])
        r.killed_requests, r.killed_failed = counts["ok"] + counts["failed"], counts["failed"]
        r.served_after_kill = all(self.https(ACME_HOST) == "acme-a" for _ in range(5))
        self.progress(
            f"lab: gateway: gw1 killed: {r.killed_failed}/{r.killed_requests} failed,"
            f" next hop withdrawn after {r.withdrawn_s * 1000:.0f} ms, FIB via {r.hops_after}"
        )

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.router is not None:
            self.router.stop()


def missing() -> str | None:
    tools = ("haproxy", "nginx", "curl", "openssl", "bird", "birdc")
    absent = [p for p in tools if shutil.which(p) is None]
    return f"not installed: {', '.join(absent)}" if absent else None


def run_gateway(progress: Progress, workdir: Path | None = None) -> GatewayResult:
    """Run the group (root, HAProxy installed); failures are in ``result.errors``."""
    result = GatewayResult()

    def make(work: Path, topology: Topology) -> GatewayGroup:
        return GatewayGroup(work, topology, progress)

    run_group("gateway", result, make, progress, workdir, missing())
    return result


def gateway_lines(r: GatewayResult) -> list[str]:
    """The group in the lab's text report."""
    if r.skipped is not None:
        return [f"gateway: skipped: {r.skipped}"]
    served = ", ".join(f"{h} → {b or '-'}" for h, b in sorted(r.https.items())) or "-"
    withdrawn = "-" if r.withdrawn_s is None else f"{r.withdrawn_s * 1000:.0f} ms"
    lines = [
        f"gateway: {'ok' if r.ok else 'FAILED'}; two tenants on {r.ip}; HA: {r.ha}",
        f"  HTTPS by SNI: {served}; TCP :{gm.TCP_PORT} → {r.tcp or '-'};"
        f" UDP :{gm.UDP_PORT} → {r.udp or '-'}",
        f"  endpoint churn: {r.churn_changes} changes under load, {r.churn_failed} of"
        f" {r.churn_requests} requests failed, {r.churn_reloads} reloads",
        f"  another tenant's hostname: {r.theft_refused or 'NOT refused'};"
        f" victim still served: {'yes' if r.theft_victim_served else 'no'}",
        f"  gw1 killed under load: {r.killed_failed} of {r.killed_requests} requests failed;"
        f" FIB {', '.join(r.hops_before) or '-'} → {', '.join(r.hops_after) or '-'}"
        f" after {withdrawn}; served after: {'yes' if r.served_after_kill else 'no'}",
    ]
    return lines + [f"gateway: {err}" for err in r.errors]


__all__ = ["GatewayResult", "gateway_lines", "run_gateway"]
