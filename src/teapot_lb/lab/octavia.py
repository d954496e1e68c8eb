"""The Octavia stack on one machine: a real Octavia API with the teapot provider, and
teapot-lb's management side, as processes (scripts/octavia-stack, tests/octavia,
bench/octavia*.py). It needs .venv-octavia (scripts/setup.sh); the management API is the
lab's fake API server (teapot_lb.lab.fakeapi).

- the management API: the in-repo fake API server (``python -m teapot_lb.lab.fakeapi``),
  seeded with an
  AddressPool and a Tenant labelled with the OpenStack project;
- the real ``teapot-lb manager`` command;
- Octavia 19 from .venv-octavia: ``octavia-driver-agent`` and ``octavia-api`` with
  ``auth_strategy = noauth`` (or Keystone's tokens, :func:`cli_stack`), ``transport_url =
  fake://``, the noop network, compute and amphora drivers, and SQLite (the schema from
  the models' ``metadata.create_all`` plus ``octavia-db-manage stamp head``: Octavia's
  migrations do not run on SQLite);
- for the ``openstack`` CLI (:func:`cli_stack`): Keystone from PyPI
  (:mod:`teapot_lb.lab.keystone`) and the Neutron stand-in (:mod:`teapot_lb.lab.neutron`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    BGP_ADVERTISEMENTS,
    BGP_PEERS,
    ENDPOINT_SLICES,
    NAMESPACES,
    NODES,
    TENANTS,
    Resource,
)
from teapot_lb.lab import neutron as neutron_standin
from teapot_lb.lab.keystone import Keystone, octavia_auth, openrc
from teapot_lb.lab.kubeplane import free_port, project_root
from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host

T = TypeVar("T")

ROOT = project_root()
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


@functools.cache
def missing() -> str | None:
    """Why the stack cannot run here (None: it can); asked once per process."""
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


_RESOURCES = {r.kind: r for r in (ADDRESS_POOLS, BGP_ADVERTISEMENTS, BGP_PEERS, ENDPOINT_SLICES,
                                   NAMESPACES, NODES, TENANTS)}  # fmt: skip


def _run_here(fn: Callable[[], T]) -> T:
    return fn()


class Rest:
    """A few plain HTTP verbs on the management fake API server (the test's hands);
    `inside` runs each call where the server is reachable (a lab namespace)."""

    def __init__(self, url: str, inside: Callable[[Callable[[], Any]], Any] = _run_here) -> None:
        self.url = url.rstrip("/")
        self.inside = inside

    def call(self, method: str, path: str, body: Any = None, *, patch: bool = False) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer fake-token")
        kind = "application/merge-patch+json" if patch else "application/json"
        request.add_header("Content-Type", kind)

        def send() -> Any:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read() or b"null")

        return self.inside(send)

    def create(self, obj: dict[str, Any]) -> Any:
        """POST an object of a kind in _RESOURCES (its status too, for a Node)."""
        res: Resource = _RESOURCES[obj["kind"]]
        namespace = obj["metadata"].get("namespace")
        base = "/api/v1" if not res.group else f"/apis/{res.group}/{res.version}"
        scope = f"/namespaces/{namespace}" if res.namespaced else ""
        created = self.call("POST", f"{base}{scope}/{res.plural}", obj)
        if "status" in obj and res is NODES:
            path = f"{base}/{res.plural}/{obj['metadata']['name']}/status"
            self.call("PATCH", path, {"status": obj["status"]}, patch=True)
        return created

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


def stack_conf(
    work: Path,
    port: int,
    *,
    provider: str = "teapot",
    description: str = "teapot-lb provider",
    agents: str = "",
    network_driver: str = "network_noop_driver",
    database: str = "",
) -> str:
    """The octavia.conf sections every lab stack shares: the API on 127.0.0.1:`port`
    without authentication and with one `provider`, the driver agent's sockets (with
    `agents`), the `database` URL (empty: SQLite in `work`), certificates in `work`, the
    noop compute and amphora drivers."""
    database = database or f"sqlite:///{work / 'octavia.db'}?timeout=60"
    agents_line = f"enabled_provider_agents = {agents}" if agents else "enabled_provider_agents ="
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
        enabled_provider_drivers = {provider}:{description}
        default_provider_driver = {provider}

        [database]
        connection = {database}
        pool_timeout =

        [driver_agent]
        status_socket_path = {work / "status.sock"}
        stats_socket_path = {work / "stats.sock"}
        get_socket_path = {work / "get.sock"}
        {agents_line}

        [controller_worker]
        network_driver = {network_driver}
        compute_driver = compute_noop_driver
        amphora_driver = amphora_noop_driver

        [oslo_messaging]
        topic = octavia_prov

        [certificates]
        cert_manager = local_cert_manager
        storage_path = {work / "certificates"}

        """
    )


def _octavia_conf(
    work: Path, port: int, kubeconfig: Path, teapot: dict[str, str] | None = None
) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in (teapot or {}).items())
    # (extra goes last: into the [teapot] section)
    teapot_section = f"[teapot]\nkubeconfig = {kubeconfig}\nanswer_timeout = 10\n"
    return stack_conf(work, port) + teapot_section + extra


def _with_agent(agent: dict[str, str] | None, conf: str) -> str:
    """`conf` with the teapot provider agent enabled and these `[teapot]` options."""
    if agent is None:
        return conf
    conf = conf.replace("enabled_provider_agents =\n", "enabled_provider_agents = teapot\n")
    return conf + "".join(f"{k} = {v}\n" for k, v in agent.items())


# The schema from the models, the lookup tables' rows the migrations would insert
# (Octavia's sessions enforce SQLite's foreign keys), and `octavia-db-manage stamp head`
# done in the same process (alembic with the stand-in config env.py reads).
_CREATE_SCHEMA = """
import os, sys, types
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, insert
import octavia.db.migration
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
alembic = Config(os.path.join(os.path.dirname(octavia.db.migration.__file__), "alembic.ini"))
alembic.set_main_option("script_location", "octavia.db.migration:alembic_migrations")
database = types.SimpleNamespace(connection=sys.argv[1])
alembic.octavia_config = types.SimpleNamespace(database=database)
command.stamp(alembic, "head")
"""


@dataclass
class Stack:
    work: Path
    host: Host | None = None  # a lab namespace to run every process in (None: this one)
    octavia_url: str = ""
    management_url: str = ""
    kubeconfig: Path = Path()
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    commands: dict[str, tuple[list[str], dict[str, str] | None]] = field(default_factory=dict)

    def log(self, name: str) -> Any:
        return (self.work / f"{name}.log").open("ab")

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.work / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def inside(self, fn: Callable[[], T]) -> T:
        """Run `fn` where the stack's processes are reachable."""
        return in_netns(self.host.ns, fn) if self.host is not None else fn()

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        popen: Any = self.host.popen if self.host is not None else subprocess.Popen
        self.commands[name] = (argv, env)
        self.procs[name] = popen(
            argv,
            stdout=self.log(name),
            stderr=subprocess.STDOUT,
            cwd=self.work,
            env={**os.environ, **(env or {})},
        )

    @contextlib.contextmanager
    def down(self, name: str) -> Iterator[None]:
        """Process `name` stopped (SIGTERM, as a service manager stops it) for the block,
        then started again with the same command."""
        proc = self.procs[name]
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        try:
            yield
        finally:
            self.start(name, *self.commands[name])

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


def store_certificate(stack: Stack, cert_pem: str, key_pem: str) -> str:
    """A TLS container reference Octavia's certificate manager resolves: the test stack
    uses Octavia's `local_cert_manager` (files <ref>.crt and <ref>.key in its storage
    path) where production uses Barbican."""
    ref = str(uuid.uuid4())
    store = stack.work / "certificates"
    store.mkdir(mode=0o700, exist_ok=True)
    (store / f"{ref}.crt").write_text(cert_pem)
    (store / f"{ref}.key").write_text(key_pem)
    return ref


def config(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An object of teapot-lb's configuration namespace."""
    meta = {"name": name, "namespace": CONFIG_NS}
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def default_objects() -> list[dict[str, Any]]:
    """The pool and the two Tenants: acme (project PROJECT, Route and Gateway, DNS domain
    acme.example) and bolt
    (project OTHER_PROJECT, Gateway only)."""
    return [
        config("AddressPool", "octavia", {"addresses": [POOL_CIDR], "autoAssign": False}),
        tenant("acme", TENANT_NS, PROJECT, "203.0.113.0/29", dnsDomains=["acme.example"]),
        tenant("bolt", "tenant-bolt", OTHER_PROJECT, "203.0.113.8/29", modes=["Gateway"]),
    ]


def _management(stack: Stack, address: str, objects: Iterable[dict[str, Any]]) -> Rest:
    stack.kubeconfig = stack.work / "management.kubeconfig"
    stack.start(
        "fakeapi",
        [sys.executable, "-m", "teapot_lb.lab.fakeapi", "--host", address, "--kubeconfig",
         str(stack.kubeconfig), "--bookmark-interval", "0.5", "--token", "fake-token"],
    )  # fmt: skip

    def written() -> dict[str, Any] | None:
        stack.alive()
        try:  # the server may be writing it
            return dict(json.loads(stack.kubeconfig.read_text()))
        except (OSError, ValueError):
            return None

    config = wait_for(written, timeout=20, what="the fake API server's kubeconfig")
    stack.management_url = config["clusters"][0]["cluster"]["server"]
    rest = Rest(stack.management_url, stack.inside)
    objects = list(objects)
    tenants = [o["spec"]["namespace"] for o in objects if o["kind"] == "Tenant"]
    for namespace in dict.fromkeys([CONFIG_NS, TENANT_NS, "tenant-bolt", *tenants]):
        rest.create({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": namespace}})
    for obj in objects:
        rest.create(obj)
    stack.start(
        "manager",
        [str(TEAPOT), "manager", "--kubeconfig", str(stack.kubeconfig), "--no-leader-elect",
         "--metrics-addr", "", "--webhook-addr", "", "--config-namespace", CONFIG_NS],
    )  # fmt: skip
    return rest


def _with_auth(auth: str | None, conf: str) -> str:
    """`conf` checking Keystone tokens with these sections (None: noauth)."""
    if auth is None:
        return conf
    conf = conf.replace("auth_strategy = noauth\n", "auth_strategy = keystone\n")
    return conf.replace("[teapot]\n", auth + "\n[teapot]\n")


def _database(
    stack: Stack,
    agent: dict[str, str] | None = None,
    teapot: dict[str, str] | None = None,
    auth: str | None = None,
) -> subprocess.Popen[bytes]:
    """Write octavia.conf and start making the database while the management side
    starts."""
    conf = stack.work / "octavia.conf"
    port = free_port()
    stack.octavia_url = f"http://127.0.0.1:{port}"
    kubeconfig = stack.work / "management.kubeconfig"
    text = _octavia_conf(stack.work, port, kubeconfig, teapot)
    conf.write_text(_with_auth(auth, _with_agent(agent, text)))
    return start_database(stack)


def start_database(
    stack: Stack, bin_dir: Path = OCTAVIA_BIN, url: str = ""
) -> subprocess.Popen[bytes]:
    """Start making Octavia's tables in the (empty) database of `url` (empty: SQLite in
    the stack's directory) with the Python of `bin_dir` (:func:`start_octavia` waits for
    it)."""
    url = url or f"sqlite:///{stack.work / 'octavia.db'}"
    return subprocess.Popen([str(bin_dir / "python"), "-c", _CREATE_SCHEMA, url],
                            stdout=stack.log("database"), stderr=subprocess.STDOUT)  # fmt: skip


# Octavia's command `main` (the module the first argument names), on the stand-in SQLite
# database (production runs MySQL or PostgreSQL). Octavia's transactions read, then write;
# under SQLite's deferred BEGIN a transaction that has read cannot wait for another writer:
# it fails at once ("database is locked"). The driver agent's status and statistics
# listeners only write what they were sent, one session each, so they take the write lock
# at BEGIN and wait for it (the `timeout` of the connection URL): a status update is never
# lost. The API keeps the deferred BEGIN (it reads in a second session while its own
# transaction holds the write lock, which a lock taken at BEGIN would deadlock); the rare
# request refused that way is rolled back and made again by the test client
# (`again_if_locked`).
_IMMEDIATE_MAIN = """
import importlib, multiprocessing, sys
import sqlalchemy

@sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "begin")
def _immediate(conn):
    if not str(conn.engine.url.database).endswith("octavia.db"):
        return  # (the noop network driver's in-memory database has its own BEGIN)
    if "in_transaction" in conn.info:
        return
    if multiprocessing.current_process().name not in ("status_listener", "stats_listener"):
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE")
    conn.info["in_transaction"] = True  # (oslo.db's own BEGIN then stands aside)

module = importlib.import_module(sys.argv.pop(1))
sys.exit(module.main())
"""


def start_octavia(
    stack: Stack,
    database: subprocess.Popen[bytes],
    bin_dir: Path = OCTAVIA_BIN,
    prelude: str = "",
) -> None:
    """Once `database` is made, octavia-driver-agent and octavia-api on the stack's
    octavia.conf with the Python of `bin_dir`, `prelude` run first in each; returns when
    the API answers and the agent's sockets are there."""
    if database.wait(timeout=240) != 0:
        raise RuntimeError(f"making Octavia's database failed:\n{stack.tail('database')}")
    conf = stack.work / "octavia.conf"
    args = ["--config-file", str(conf)]
    python = [str(bin_dir / "python"), "-c", prelude + _IMMEDIATE_MAIN]
    stack.start("driver-agent", [*python, "octavia.cmd.driver_agent", *args])
    stack.start("octavia-api", [*python, "octavia.cmd.api", *args])

    def answers() -> bool:
        try:
            with urllib.request.urlopen(stack.octavia_url + "/", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def serving() -> bool:
        stack.alive()
        return (stack.work / "get.sock").exists() and stack.inside(answers)

    wait_for(serving, timeout=120, what="octavia-api and the driver agent",
             detail=lambda: stack.tail("octavia-api"))  # fmt: skip


@contextlib.contextmanager
def running(
    work: Path,
    *,
    host: Host | None = None,
    address: str = "127.0.0.1",
    objects: Iterable[dict[str, Any]] | None = None,
    agent: dict[str, str] | None = None,
    teapot: dict[str, str] | None = None,
    auth: str | None = None,
) -> Iterator[tuple[Stack, Rest]]:
    """The whole stack in `work` (logs there), stopped on exit: in lab namespace `host`
    when given (the management API listening on `address`), with these `objects` in the
    management API (default: default_objects()); `agent`: the teapot provider agent
    runs in the driver agent, with these `[teapot]` options; `teapot`: more driver
    options; `auth`: octavia.conf's Keystone sections (lab.keystone.octavia_auth; None:
    noauth)."""
    stack = Stack(work, host)
    try:
        database = _database(stack, agent, teapot, auth)
        rest = _management(stack, address, default_objects() if objects is None else objects)
        start_octavia(stack, database)
        yield stack, rest
    finally:
        stack.stop()


def cli_missing() -> str | None:
    """Why the stack the `openstack` CLI works against cannot run here (None: it can)."""
    for tool in ("openstack", "keystone-manage"):
        if not (OCTAVIA_BIN / tool).exists():
            return (f"{OCTAVIA_BIN / tool} is missing: run scripts/setup.sh (the openstack "
                    "CLI and Keystone in Octavia's virtualenv)")  # fmt: skip
    return missing()


CLI_PROJECT = "acme"
"""The Keystone project (and Tenant) of the CLI stack."""


@contextlib.contextmanager
def cli_stack(work: Path) -> Iterator[tuple[Stack, Rest, Keystone]]:
    """The stack the `openstack` CLI works against as documented (docs/octavia.md,
    "Trying it"): Keystone from PyPI on SQLite (project acme; the admin in
    `work/openrc`), the Neutron stand-in (lab.neutron: the "teapot VIPs" network and
    subnet the CLI looks up), and the whole stack above with Octavia checking Keystone
    tokens, Tenant acme labelled with Keystone's project acme (Route and Gateway, DNS
    domain acme.example, node network 192.0.2.0/24, addresses 203.0.113.0/29)."""
    keystone = Keystone(work / "keystone", OCTAVIA_BIN, free_port())
    neutron: Any = None
    try:
        keystone.start()
        project = keystone.project(CLI_PROJECT)
        neutron_port = free_port()
        neutron = neutron_standin.serve(neutron_port)
        objects = [
            config("AddressPool", "octavia", {"addresses": [POOL_CIDR], "autoAssign": False}),
            tenant(CLI_PROJECT, TENANT_NS, project, "203.0.113.0/29",
                   dnsDomains=["acme.example"]),
        ]  # fmt: skip
        with running(work, objects=objects, auth=octavia_auth(keystone)) as (stack, rest):
            keystone.register("load-balancer", "octavia", stack.octavia_url)
            keystone.register("network", "neutron", f"http://127.0.0.1:{neutron_port}")
            (work / "openrc").write_text(openrc(keystone))
            yield stack, rest, keystone
    finally:
        if neutron is not None:
            neutron.shutdown()
        keystone.stop()
