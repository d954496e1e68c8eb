"""A small namespace lab for the gateway's end-to-end tests and benchmarks: a gateway host,
a client and a host for backends on one LAN, plus clients (curl, openssl s_client, a socket
one-liner), certificates, and `teapot-lb gateway` started in it with its metrics read.

    client 192.0.2.20 ─┐
    gateway 192.0.2.10, 198.51.100.1 ─┤ lan
    backends 198.51.100.2-9 ─┘
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host, Topology

GATEWAY = "192.0.2.10"
CLIENT = "192.0.2.20"
BACKEND_IPS = [f"198.51.100.{i}" for i in range(2, 10)]
BACKENDS_SCRIPT = Path(__file__).with_name("gateway_backends.py")
H2_CLIENT = Path(__file__).with_name("h2client.py")


@dataclass(frozen=True)
class Response:
    code: int
    body: str
    http_version: str = ""

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data


@dataclass
class GatewayLab:
    topo: Topology
    gateway: Host
    client: Host
    backends: Host
    work: Path

    def start_backends(self, *specs: str) -> subprocess.Popen[bytes]:
        """Backend servers (see gateway_backends.py) in the backends' namespace; waits for them."""
        proc = self.backends.popen(
            [sys.executable, str(BACKENDS_SCRIPT), *specs], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == b"ready", f"backends did not start: {line!r}"
        return proc

    @contextmanager
    def serving(self, *specs: str) -> Iterator[subprocess.Popen[bytes]]:
        """:meth:`start_backends`, stopped on leaving (even on a failure)."""
        proc = self.start_backends(*specs)
        try:
            yield proc
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    def curl_argv(self, url: str, *args: str, host: str | None = None, port: int = 80) -> list[str]:
        resolve = ["--resolve", f"{host}:{port}:{GATEWAY}"] if host else []
        return self.client.exec_argv(
            ["curl", "-sS", "--max-time", "10", *resolve, "-o", "-",
             "-w", "\n%{http_code} %{http_version}", *args, url]
        )  # fmt: skip

    def curl(self, url: str, *args: str, host: str | None = None, port: int = 80) -> Response:
        """One request from the client; host: resolve it to the gateway (SNI, Host)."""
        out = subprocess.run(
            self.curl_argv(url, *args, host=host, port=port),
            capture_output=True,
            text=True,
            timeout=20,
        )
        return parse_curl(out.stdout)

    def served_by(self, path: str, host: str, port: int = 80) -> str | None:
        """The name of the backend that answers http://host:port/path (None: no 200)."""
        r = self.curl(f"http://{host}:{port}{path}", host=host, port=port)
        return r.json()["name"] if r.code == 200 else None

    def peer_certificate_subject(self, port: int, servername: str | None) -> str:
        """The subject and SHA-256 fingerprint of the certificate the gateway presents
        for `servername` (None: a ClientHello without SNI)."""
        sni = f"-servername {servername}" if servername else "-noservername"
        out = self.client.run(
            "sh", "-c",
            f"openssl s_client -connect {GATEWAY}:{port} {sni}"
            " </dev/null 2>/dev/null | openssl x509 -noout -subject -fingerprint -sha256",
        )  # fmt: skip
        return out.strip()

    def h2(self, port: int, sni: str | None, *authorities: str) -> list[dict[str, Any]]:
        """GET / for each authority, in turn, over one HTTP/2 connection (TLS, ALPN h2)
        with `sni` (None: none): [{"authority", "status", "body"}] (h2client.py)."""
        out = self.client.run(
            sys.executable, str(H2_CLIENT), GATEWAY, str(port), sni or "-", *authorities
        )
        answers: list[dict[str, Any]] = json.loads(out)
        return answers

    def tcp_exchange(self, address: str, port: int, line: str, udp: bool = False) -> str:
        """Send one line over TCP (or one datagram over UDP) and return the answer."""
        kind = "SOCK_DGRAM" if udp else "SOCK_STREAM"
        code = (
            "import socket,sys;"
            f"s=socket.socket(socket.AF_INET,socket.{kind});s.settimeout(5);"
            f"s.connect(({address!r},{port}));s.send({(line + chr(10)).encode()!r});"
            "sys.stdout.write(s.recv(4096).decode())"
        )
        return self.client.run(sys.executable, "-c", code, check=False).strip()


def parse_curl(stdout: str) -> Response:
    body, _, tail = stdout.rpartition("\n")
    code, _, version = tail.partition(" ")
    return Response(int(code) if code.isdigit() else 0, body, version)


@contextmanager
def gateway_lab(work: Path, label: str = "gw") -> Iterator[GatewayLab]:
    with Topology(label) as topo:
        lan = topo.add_switch("lan")
        gateway = topo.add_host("gw")
        client = topo.add_host("client")
        backends = topo.add_host("be")
        topo.connect(gateway, lan, addrs=[f"{GATEWAY}/24", "198.51.100.1/24"])
        topo.connect(client, lan, addrs=[f"{CLIENT}/24"])
        topo.connect(backends, lan, addrs=[f"{ip}/24" for ip in BACKEND_IPS])
        yield GatewayLab(topo, gateway, client, backends, work)


def make_certificate(directory: Path, hostname: str, tag: str = "") -> tuple[Path, Path, str]:
    """A self-signed certificate for `hostname` (its own CA for curl --cacert): the
    certificate file, the key file, and both as one PEM."""
    directory.mkdir(parents=True, exist_ok=True)
    cert = directory / f"{hostname}{tag}.crt"
    key = directory / f"{hostname}{tag}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", f"/CN={hostname}", "-addext", f"subjectAltName=DNS:{hostname}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key, cert.read_text() + key.read_text()


def wait_served_by(lab: GatewayLab, url: str, host: str, name: str, port: int = 80) -> None:
    wait_for(
        lambda: lab.served_by(url, host, port) == name,
        timeout=10,
        what=f"{host}{url} served by {name}",
    )


# --- the gateway process in the lab -----------------------------------------------------

TEAPOT_LB = str(Path(sys.executable).parent / "teapot-lb")


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start_gateway(
    lab: GatewayLab, source: list[str], state: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [TEAPOT_LB, "gateway", *source, "--address", GATEWAY,
         "--state-dir", str(lab.work / state), "--netns", lab.gateway.ns,
         "--metrics-addr", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(lab.work / f"{state}.log").open("wb"),
    )  # fmt: skip
    return proc, port
