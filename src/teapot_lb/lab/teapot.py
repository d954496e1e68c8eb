"""The lab's ``teapot`` group: the Teapot flow with the standalone manager and a standalone
tenant agent (real ``teapot-lb manager --manifests`` and ``teapot-lb tenant-agent
--manifests`` processes on directories, see :mod:`teapot_lb.standalone.teapot`).

- tenant acme (nodes n1..n3, 192.0.2.11-13) creates Service default/web in its cluster
  directory; the agent writes the request, the manager allocates an IP and wants a route
  with the tenant's nodes as next hops (ECMP); measured: Service written → IP back at the
  agent, and → route with every node;
- node n2 is removed from acme's cluster (its Node and endpoint gone, as after a drain):
  measured until the route's next hops are n1 and n3;
- the Service is deleted: measured until the route is no longer wanted;
- tenant globex (nodes 192.0.2.17-18, quota one load balancer, Route mode only) writes
  requests it must not get; each row is the refusal's reason and message from the
  request's status conditions.

Route mode with a router and traffic is the second half of the group
(:mod:`teapot_lb.lab.teapot_route`, namespaces: root); this half needs no root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.tenancy.request import TEAPOT_CLOUD_CLASS

API = "lb.teapot.io/v1alpha1"
POOL = "tenants"
ACME_NODES = {"n1": "192.0.2.11", "n2": "192.0.2.12", "n3": "192.0.2.13"}
GLOBEX_NODES = {"g1": "192.0.2.17", "g2": "192.0.2.18"}
TIMEOUT_S = 20.0

Progress = Callable[[str], None]


@dataclass
class Refused:
    """One attempt by the other tenant, and what its request's status says."""

    attempt: str
    request: str
    reason: str | None = None  # the condition's reason (None: not refused)
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is not None


@dataclass
class TeapotResult:
    ip: str | None = None
    next_hops: list[str] = field(default_factory=list)
    create_to_ip_s: float | None = None
    create_to_route_s: float | None = None
    node_gone_to_route_s: float | None = None
    next_hops_after: list[str] = field(default_factory=list)
    delete_to_withdrawn_s: float | None = None
    refused: list[Refused] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Why the route flow (router, traffic) did not run; "" when it ran (its row is with
    # the modes').
    not_done: str = ""

    @property
    def ok(self) -> bool:
        return (
            not self.errors
            and self.delete_to_withdrawn_s is not None
            and bool(self.refused)
            and all(r.ok for r in self.refused)
        )


def _tenant(name: str, cidr: str, nodes: str, **spec: Any) -> dict[str, Any]:
    body = {
        "namespace": f"tenant-{name}",
        "allocations": [{"addressPool": POOL, "cidrs": [cidr]}],
        "nodeNetworks": [nodes],
        "modes": ["Route"],
        **spec,
    }
    return {"apiVersion": API, "kind": "Tenant", "metadata": {"name": name}, "spec": body}


def management_docs() -> list[dict[str, Any]]:
    pool = {
        "apiVersion": API,
        "kind": "AddressPool",
        "metadata": {"name": POOL},
        "spec": {"addresses": ["203.0.113.0/28"], "autoAssign": False},
    }
    return [
        pool,
        _tenant("acme", "203.0.113.0/29", "192.0.2.8/29"),
        _tenant("globex", "203.0.113.8/29", "192.0.2.16/29", quotas={"loadBalancers": 1}),
    ]


def cluster_docs(nodes: dict[str, str], with_service: bool) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
        }
        for n, ip in nodes.items()
    ]
    if not with_service:
        return docs
    return [*docs, service_doc("web", 30080), endpoints_doc("web", nodes, ready=nodes)]


def service_doc(
    name: str, node_port: int, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Tenant Service default/`name` of the Teapot cloud's class, TCP 80 at `node_port`,
    `externalTrafficPolicy: Local`, with these annotations (`lb.teapot.io/provider`, ...)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": TEAPOT_CLOUD_CLASS,
            "externalTrafficPolicy": "Local",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": node_port}],
            "selector": {"app": name},
        },
    }


def endpoints_doc(name: str, nodes: Iterable[str], ready: Container[str]) -> dict[str, Any]:
    """The EndpointSlice of Service default/`name`: a pod on each of `nodes`, ready on
    those in `ready`."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-x",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": name},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [f"10.0.0.{i + 1}"], "nodeName": n, "conditions": {"ready": n in ready}}
            for i, n in enumerate(nodes)
        ],
    }


def _request(name: str, *, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "source": {"cluster": "c1", "namespace": "default", "name": name, "uid": f"uid-{name}"},
        "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}],
        "backends": [
            {"node": n, "addresses": [ip], "ready": True} for n, ip in GLOBEX_NODES.items()
        ],
        **spec,
    }
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": "TenantLoadBalancer", "metadata": meta, "spec": body}


def attempts(acme_ip: str) -> list[tuple[str, dict[str, Any]]]:
    """globex's requests: its own (a-own, within quota) and what it must not get."""
    return [
        ("its own load balancer (within quota)", _request("a-own")),
        ("acme's IP", _request("b-acme-ip", requestedIPs=[acme_ip])),
        (
            "a backend at acme's node",
            _request(
                "c-acme-node",
                backends=[{"node": "n1", "addresses": [ACME_NODES["n1"]], "ready": True}],
            ),
        ),
        ("a second load balancer (over quota)", _request("d-over-quota")),
        ("a mode it may not use (Gateway)", _request("e-gateway", mode="Gateway")),
        ("a request claiming acme's namespace", _request("f-forged", namespace="tenant-acme")),
    ]


def _write(path: Path, docs: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump_all(docs, sort_keys=False) if docs else "")
    tmp.replace(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _teapot_lb() -> str:
    return str(Path(sys.executable).parent / "teapot-lb")


class TeapotGroup:
    """The standalone manager and acme's agent as processes on a work directory."""

    def __init__(self, workdir: Path, progress: Progress) -> None:
        self.workdir = workdir
        self.root = workdir / "root"
        self.acme = workdir / "acme-c1"
        self.progress = progress
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: list[str] = []  # of the processes, in order (their logs: NAME.log)

    def say(self, text: str) -> None:
        self.progress(f"lab: teapot: {text}")

    def _start(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.adopt(name, subprocess.Popen(argv, stdout=log, stderr=log))
        log.close()

    def adopt(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """A process of the group: watched while waiting, stopped by :meth:`close`."""
        self.procs.append(proc)
        self.names.append(name)

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> None:
        _write(self.root / "management" / "config.yaml", management_docs())
        for tenant in ("acme", "globex"):
            (self.root / "tenants" / tenant).mkdir(parents=True, exist_ok=True)
        _write(self.acme / "cluster.yaml", cluster_docs(ACME_NODES, with_service=False))
        self._start("manager", [_teapot_lb(), "manager", "--manifests", str(self.root),
                                "--metrics-addr", "", "--webhook-addr", ""])  # fmt: skip
        self.start_agent("agent", "acme", self.acme)

    def start_agent(self, name: str, tenant: str, cluster_dir: Path) -> None:
        """A tenant's agent (cluster c1) on its cluster directory; its log NAME.log."""
        self._start(name, [_teapot_lb(), "tenant-agent", "--manifests", str(cluster_dir),
                           "--teapot-root", str(self.root), "--tenant", tenant,
                           "--cluster-name", "c1", "--metrics-addr", ""])  # fmt: skip

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def status(self, tenant: str) -> dict[str, Any]:
        return _read_json(self.root / "status" / f"{tenant}.json")

    def acme_ip(self) -> str | None:
        return self.service_ip("acme")

    def service_ip(self, tenant: str) -> str | None:
        """The IP of default/web in the tenant's cluster c1, as its agent reads it back."""
        ips = _read_json(self.root / "status" / f"{tenant}.c1.services.json").get("default/web")
        return str(ips[0]) if isinstance(ips, list) and ips else None

    def route(self, ip: str) -> list[str] | None:
        for route in self.status("acme").get("routes") or []:
            if route.get("prefix") == f"{ip}/32":
                return sorted(route.get("nextHops") or [])
        return None

    def _alive(self) -> None:
        for name, proc in zip(self.names, self.procs, strict=True):
            if proc.poll() is not None:
                raise LabTimeout(f"teapot-lb {name} exited:\n{self.log_tail(name)}")

    def wait_step(self, check: Callable[[], Any], what: str) -> float:
        started = time.monotonic()

        def alive_check() -> Any:
            self._alive()
            return check()

        wait_for(alive_check, timeout=TIMEOUT_S, what=what, every=0.02,
                 detail=lambda: f"status: {self.status('acme')}")  # fmt: skip
        return time.monotonic() - started

    def wait_started(self) -> None:
        up = [self.root / "tenants" / "acme" / "c1.yaml", self.root / "status" / "acme.json"]
        what = "the agent's and the manager's first pass"
        self.wait_step(lambda: all(p.exists() for p in up), what)

    def run(self, result: TeapotResult) -> None:
        self.start()
        self.wait_started()
        self.say("manager and acme's agent up (standalone, on manifest directories)")
        started = time.monotonic()
        _write(self.acme / "cluster.yaml", cluster_docs(ACME_NODES, with_service=True))
        result.create_to_ip_s = self.wait_step(
            self.acme_ip, "acme's Service to get an IP back through the agent"
        )
        ip = self.acme_ip()
        if ip is None:
            raise LabTimeout("acme's Service lost its IP")
        result.ip = ip
        want = sorted(ACME_NODES.values())
        self.wait_step(lambda: self.route(ip) == want, "the route over n1..n3")
        result.create_to_route_s = time.monotonic() - started
        result.next_hops = want
        self.say(
            f"default/web got {ip} in {result.create_to_ip_s:.2f} s; route over"
            f" {', '.join(want)} after {result.create_to_route_s:.2f} s"
        )
        rest = {n: a for n, a in ACME_NODES.items() if n != "n2"}
        _write(self.acme / "cluster.yaml", cluster_docs(rest, with_service=True))
        result.node_gone_to_route_s = self.wait_step(
            lambda: self.route(ip) == sorted(rest.values()), "n2 dropped from the route"
        )
        result.next_hops_after = sorted(rest.values())
        self.say(f"n2 gone: route over the rest after {result.node_gone_to_route_s:.2f} s")
        self._refusals(ip, result)
        _write(self.acme / "cluster.yaml", cluster_docs(rest, with_service=False))
        result.delete_to_withdrawn_s = self.wait_step(
            lambda: self.route(ip) is None, "the route withdrawn after the Service's deletion"
        )
        self.say(f"Service deleted: route withdrawn after {result.delete_to_withdrawn_s:.2f} s")

    def _refusals(self, acme_ip: str, result: TeapotResult) -> None:
        tried = attempts(acme_ip)
        _write(self.root / "tenants" / "globex" / "attempts.yaml", [b for _, b in tried])
        names = [b["metadata"]["name"] for _, b in tried]

        def decided() -> dict[str, Any] | None:
            requests = self.status("globex").get("requests") or {}
            return requests if all(requests.get(n, {}).get("conditions") for n in names) else None

        requests = wait_for(decided, timeout=TIMEOUT_S, what="the manager's verdict on globex's",
                            detail=lambda: f"status: {self.status('globex')}")  # fmt: skip
        for attempt, body in tried:
            name = body["metadata"]["name"]
            conditions = requests[name].get("conditions") or []
            refusal = next((c for c in conditions if c.get("status") == "False"), None)
            row = Refused(attempt, name)
            if refusal is not None:
                row.reason = str(refusal.get("reason"))
                row.message = str(refusal.get("message", ""))
            if name == "a-own":
                if refusal is not None:
                    result.errors.append(f"globex's own request refused: {refusal}")
                continue
            result.refused.append(row)
            if refusal is None:
                result.errors.append(f"globex's {attempt} was not refused: {conditions}")
        self.say(f"{sum(r.ok for r in result.refused)} of {len(result.refused)} attempts refused")


def run_teapot(workdir: Path, progress: Progress) -> TeapotResult:
    """Run the group; failures are in ``result.errors``."""
    workdir.mkdir(parents=True, exist_ok=True)
    result = TeapotResult()
    group = TeapotGroup(workdir, progress)
    try:
        group.run(result)
    except LabTimeout as exc:
        result.errors.append(str(exc))
        for name in ("manager", "agent"):
            tail = group.log_tail(name)
            if tail:
                result.errors.append(f"{name} log:\n{tail}")
    finally:
        group.close()
    return result


__all__ = ["Refused", "TeapotResult", "cluster_docs", "endpoints_doc", "run_teapot", "service_doc"]
