"""A real Octavia API with the teapot provider, and teapot-lb's management side, as
processes (for tests/octavia and bench/octavia.py).

- the management API: the in-repo fake API server (``python -m fakeapi``), seeded with an
  AddressPool and a Tenant labelled with the OpenStack project;
- the real ``teapot-lb manager`` command;
- Octavia 19 from .venv-octavia (``scripts/setup.sh`` makes it): ``octavia-driver-agent``
  and ``octavia-api`` with ``auth_strategy = noauth``, ``transport_url = fake://``, the
  noop network, compute and amphora drivers, and SQLite (the schema from the models'
  ``metadata.create_all`` plus ``octavia-db-manage stamp head``: Octavia's migrations
  do not run on SQLite).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
OCTAVIA_VENV = ROOT / ".venv-octavia"
OCTAVIA_BIN = OCTAVIA_VENV / "bin"
TEAPOT = Path(sys.executable).parent / "teapot-lb"

API = "lb.teapot.io/v1alpha1"
CONFIG_NS = "teapot-lb-system"
PROJECT = "0123456789abcdef0123456789abcdef"
OTHER_PROJECT = "fedcba9876543210fedcba9876543210"
TENANT_NS = "tenant-acme"
POOL_CIDR = "203.0.113.0/28"
NODE_NETWORK = "192.0.2.0/24"


def missing() -> str | None:
    """Why the stack cannot run here (None: it can)."""
    for tool in ("octavia-api", "octavia-driver-agent", "octavia-db-manage", "python"):
        if not (OCTAVIA_BIN / tool).exists():
            return f"{OCTAVIA_BIN / tool} is missing: run scripts/setup.sh (Octavia's virtualenv)"
    probe = subprocess.run(
        [str(OCTAVIA_BIN / "python"), "-c", "import teapot_lb.octavia.driver"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"teapot_lb[octavia] is not importable in {OCTAVIA_VENV}: {probe.stderr[-300:]}"
    if not TEAPOT.exists():
        return f"{TEAPOT} is missing"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Rest:
    """A few plain HTTP verbs on the management fake API server (the test's hands)."""

    def __init__(self, url: str, token: str = "fake-token") -> None:
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def get(self, path: str) -> Any:
        try:
            return self.call("GET", path)
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise

    def tlbs(self, namespace: str = TENANT_NS) -> list[dict[str, Any]]:
        found = self.get(f"/apis/{API}/namespaces/{namespace}/tenantloadbalancers")
        return list(found["items"]) if found else []

    def tlb(self, lb_id: str, namespace: str = TENANT_NS) -> dict[str, Any] | None:
        path = f"/apis/{API}/namespaces/{namespace}/tenantloadbalancers/octavia-{lb_id}"
        found = self.get(path)
        return dict(found) if found else None


def tenant(name: str, namespace: str, project: str, cidr: str, **spec: Any) -> dict[str, Any]:
    body = {
        "namespace": namespace,
        "allocations": [{"addressPool": "octavia", "cidrs": [cidr]}],
        "nodeNetworks": [NODE_NETWORK],
        "modes": ["Route", "Gateway"],
        "quotas": {"addresses": 8, "loadBalancers": 8, "ports": 16},
        **spec,
    }
    return {
        "apiVersion": API,
        "kind": "Tenant",
        "metadata": {"name": name, "labels": {"octavia.lb.teapot.io/project": project}},
        "spec": body,
    }


def _octavia_conf(work: Path, port: int, kubeconfig: Path) -> str:
    return textwrap.dedent(
        f"""\
        [DEFAULT]
        transport_url = fake://
        debug = False
        use_stderr = True

        [api_settings]
        bind_host = 127.0.0.1
        bind_port = {port}
        auth_strategy = noauth
        enabled_provider_drivers = teapot:teapot-lb provider
        default_provider_driver = teapot

        [database]
        connection = sqlite:///{work / "octavia.db"}
        pool_timeout =

        [driver_agent]
        status_socket_path = {work / "status.sock"}
        stats_socket_path = {work / "stats.sock"}
        get_socket_path = {work / "get.sock"}
        enabled_provider_agents =

        [controller_worker]
        network_driver = network_noop_driver
        compute_driver = compute_noop_driver
        amphora_driver = amphora_noop_driver

        [oslo_messaging]
        topic = octavia_prov

        [teapot]
        kubeconfig = {kubeconfig}
        answer_timeout = 10
        """
    )


# The schema from the models, and the lookup tables' rows the migrations would insert
# (Octavia's sessions enforce SQLite's foreign keys).
_CREATE_SCHEMA = """
import sys
from sqlalchemy import create_engine, insert
from octavia.common import constants as c
from octavia.db import base_models, models  # noqa: F401 (models fill the metadata)
lookups = {
    "algorithm": c.SUPPORTED_LB_ALGORITHMS,
    "amphora_roles": c.SUPPORTED_AMPHORA_ROLES,
    "client_authentication_mode": c.SUPPORTED_CLIENT_AUTH_MODES,
    "health_monitor_type": c.SUPPORTED_HEALTH_MONITOR_TYPES,
    "l7policy_action": c.SUPPORTED_L7POLICY_ACTIONS,
    "l7rule_compare_type": c.SUPPORTED_L7RULE_COMPARE_TYPES,
    "l7rule_type": c.SUPPORTED_L7RULE_TYPES,
    "lb_topology": c.SUPPORTED_LB_TOPOLOGIES,
    "operating_status": c.SUPPORTED_OPERATING_STATUSES,
    "protocol": c.SUPPORTED_PROTOCOLS,
    "provisioning_status": c.SUPPORTED_PROVISIONING_STATUSES,
    "session_persistence_type": c.SUPPORTED_SP_TYPES,
    "vrrp_auth_method": c.SUPPORTED_VRRP_AUTH,
}
metadata = base_models.BASE.metadata
engine = create_engine(sys.argv[1])
metadata.create_all(engine)
with engine.begin() as db:
    for table, names in lookups.items():
        db.execute(insert(metadata.tables[table]), [{"name": n} for n in names])
"""


@dataclass
class Stack:
    work: Path
    octavia_url: str = ""
    management_url: str = ""
    kubeconfig: Path = Path()
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str) -> Any:
        return (self.work / f"{name}.log").open("ab")

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.work / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.procs[name] = subprocess.Popen(
            argv,
            stdout=self.log(name),
            stderr=subprocess.STDOUT,
            cwd=self.work,
            env={**os.environ, **(env or {})},
        )

    def alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.tail(name)}")

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _management(stack: Stack) -> Rest:
    stack.kubeconfig = stack.work / "management.kubeconfig"
    tests = str(ROOT / "tests")
    stack.start(
        "fakeapi",
        [sys.executable, "-m", "fakeapi", "--kubeconfig", str(stack.kubeconfig),
         "--bookmark-interval", "0.5", "--token", "fake-token"],
        env={"PYTHONPATH": tests},
    )  # fmt: skip
    wait_for(stack.kubeconfig.exists, timeout=20, what="the fake API server's kubeconfig")
    config = json.loads(stack.kubeconfig.read_text())
    stack.management_url = config["clusters"][0]["cluster"]["server"]
    rest = Rest(stack.management_url)
    for namespace in (CONFIG_NS, TENANT_NS, "tenant-bolt"):
        rest.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    rest.call(
        "POST",
        f"/apis/{API}/namespaces/{CONFIG_NS}/addresspools",
        {"apiVersion": API, "kind": "AddressPool", "metadata": {"name": "octavia"},
         "spec": {"addresses": [POOL_CIDR], "autoAssign": False}},
    )  # fmt: skip
    rest.call("POST", f"/apis/{API}/tenants", tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29"))
    rest.call(
        "POST",
        f"/apis/{API}/tenants",
        tenant("bolt", "tenant-bolt", OTHER_PROJECT, "203.0.113.8/29", modes=["Gateway"]),
    )
    stack.start(
        "manager",
        [str(TEAPOT), "manager", "--kubeconfig", str(stack.kubeconfig), "--no-leader-elect",
         "--metrics-addr", "", "--webhook-addr", "", "--config-namespace", CONFIG_NS],
    )  # fmt: skip
    return rest


def _octavia(stack: Stack) -> None:
    port = free_port()
    conf = stack.work / "octavia.conf"
    conf.write_text(_octavia_conf(stack.work, port, stack.kubeconfig))
    python = str(OCTAVIA_BIN / "python")
    url = f"sqlite:///{stack.work / 'octavia.db'}"
    subprocess.run([python, "-c", _CREATE_SCHEMA, url], check=True, capture_output=True)
    subprocess.run(
        [str(OCTAVIA_BIN / "octavia-db-manage"), "--config-file", str(conf), "stamp", "head"],
        check=True,
        capture_output=True,
    )
    args = ["--config-file", str(conf)]
    stack.start("driver-agent", [str(OCTAVIA_BIN / "octavia-driver-agent"), *args])
    stack.start("octavia-api", [str(OCTAVIA_BIN / "octavia-api"), *args])
    stack.octavia_url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        stack.alive()
        try:
            with urllib.request.urlopen(stack.octavia_url + "/", timeout=2):
                return (stack.work / "get.sock").exists()
        except (urllib.error.URLError, OSError):
            return False

    wait_for(serving, timeout=60, what="octavia-api and the driver agent",
             detail=lambda: stack.tail("octavia-api"))  # fmt: skip


@contextlib.contextmanager
def running(work: Path) -> Iterator[tuple[Stack, Rest]]:
    """The whole stack in `work` (logs there), stopped on exit."""
    stack = Stack(work)
    try:
        rest = _management(stack)
        _octavia(stack)
        yield stack, rest
    finally:
        stack.stop()


def connection(stack: Stack) -> Any:
    """An openstacksdk connection to the noauth Octavia API."""
    import openstack.connection  # the test client (dev dependency)

    return openstack.connection.Connection(
        auth_type="none",
        auth={"endpoint": stack.octavia_url},
        load_balancer_endpoint_override=stack.octavia_url,
    )


def timed(check: Any, *, timeout: float, what: str) -> float:
    """Seconds until `check()` holds (wait_for's deadline and message)."""
    start = time.perf_counter()
    wait_for(check, timeout=timeout, what=what)
    return time.perf_counter() - start
