"""Octavia 19 with the real ``ovn-octavia-provider`` on the lab's real OVN and real Neutron.

The stack issue 38's Octavia provider is to be tested against (all from the virtualenv
:func:`teapot_lb.lab.neutron_server.venv` names, each process logging into the work
directory):

- Keystone (:mod:`teapot_lb.lab.keystone`): Octavia and the provider reach Neutron with a
  Keystone session. A noauth one cannot be had: keystoneauth's ``none`` plugin (and
  ``http_basic``, ``admin_token``) registers an ``endpoint`` option in ``[neutron]``,
  which ovn-octavia-provider registers too (its deprecated one): "duplicate option:
  endpoint"; without an ``auth_type`` openstacksdk refuses ("An auth plugin is required to
  determine endpoint URL"). Neutron itself stays noauth: it accepts the token unchecked.
- Neutron (:class:`~teapot_lb.lab.neutron_server.Neutron`): ML2/OVN on the given OVN.
- octavia-driver-agent (with the ``ovn`` provider agent, which follows the Northbound to
  report member status) and octavia-api, ``auth_strategy = noauth``, providers ``ovn``
  only, the ``allowed_address_pairs_driver`` network driver (the VIP subnet is looked up
  in the real Neutron) with ``allow_invisible_resource_usage`` (a noauth request has no
  user token to look it up with);
- PostgreSQL (:mod:`teapot_lb.lab.postgres`): Neutron's and Octavia's databases (on
  SQLite's single write lock Neutron stalled for minutes under load, and Octavia answered
  "database is locked"). Keystone keeps SQLite: it is read once per token.

ovn-octavia-provider opens octavia-lib's ``DriverLibrary()`` with its default socket paths
(/var/run/octavia/*.sock), not the ``[driver_agent]`` ones: each Octavia process first sets
those defaults from its octavia.conf (:data:`_SOCKETS`), so stacks can run side by side.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from teapot_lb.lab.keystone import ADMIN_PASSWORD, Keystone
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.neutron_server import Neutron, venv
from teapot_lb.lab.neutron_server import missing as neutron_missing
from teapot_lb.lab.octavia import Stack, stack_conf, start_database, start_octavia
from teapot_lb.lab.ovnstack import OVNDatabases
from teapot_lb.lab.postgres import Postgres
from teapot_lb.lab.postgres import missing as postgres_missing

PROVIDER = "ovn"

# octavia-lib's DriverLibrary defaults pointed at this process's [driver_agent] sockets.
_SOCKETS = """
import configparser, sys
_conf = configparser.ConfigParser(interpolation=None)
_conf.read(sys.argv[sys.argv.index("--config-file") + 1])
_agent = _conf["driver_agent"]
from octavia_lib.api.drivers import driver_lib
driver_lib.DriverLibrary.__init__.__defaults__ = (
    _agent["status_socket_path"], _agent["stats_socket_path"], _agent["get_socket_path"])
"""


def missing() -> str | None:
    """Why the stack cannot run here (None: it can): the Neutron virtualenv or
    PostgreSQL."""
    return neutron_missing() or postgres_missing()


def _service_auth(keystone: Keystone) -> str:
    return textwrap.dedent(
        f"""\
        auth_type = password
        auth_url = {keystone.url}
        username = admin
        password = {ADMIN_PASSWORD}
        project_name = admin
        user_domain_name = Default
        project_domain_name = Default
        """
    )


def octavia_conf(
    work: Path, port: int, ovn: OVNDatabases, neutron: Neutron, keystone: Keystone, database: str
) -> str:
    """octavia.conf with the ``ovn`` provider on `ovn`'s databases and `neutron`, its own
    tables in `database` (a SQLAlchemy URL)."""
    auth = _service_auth(keystone)
    sections = stack_conf(
        work,
        port,
        provider=PROVIDER,
        description="ovn-octavia-provider",
        agents=PROVIDER,
        network_driver="allowed_address_pairs_driver",
        database=database,
    )
    return (
        sections
        + textwrap.dedent(
            f"""\
            [networking]
            allow_invisible_resource_usage = True

            [ovn]
            ovn_nb_connection = {ovn.nb_remote}
            ovn_sb_connection = {ovn.sb_remote}

            [neutron]
            endpoint_override = {neutron.url}
            """
        )
        + auth
        + "\n[service_auth]\n"
        + auth
    )


def rss_mb(pid: int) -> float:
    """A process's resident set (VmRSS) in MB; 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(child) for child in found]


@dataclass
class OctaviaOVN:
    """The running stack: Octavia's processes in `stack`, Neutron, Keystone and the
    PostgreSQL of Neutron and Octavia."""

    stack: Stack
    neutron: Neutron
    keystone: Keystone
    postgres: Postgres
    startup_s: dict[str, float] = field(default_factory=dict)

    @property
    def octavia_url(self) -> str:
        return self.stack.octavia_url

    def pids(self) -> dict[str, int]:
        """Every process of the stack by name (the driver agent's listeners and provider
        agent are its children)."""
        found: dict[str, int] = {}
        for name, proc in (("keystone", self.keystone.proc), ("neutron", self.neutron.proc),
                           ("postgres", self.postgres.proc)):  # fmt: skip
            if proc is not None:
                found[name] = proc.pid
        for name, proc in self.stack.procs.items():
            found[name] = proc.pid
            for child in _children(proc.pid):
                found[f"{name}/{child}"] = child
        return found

    def rss_mb(self) -> dict[str, float]:
        return {name: rss_mb(pid) for name, pid in self.pids().items()}

    def stop(self) -> None:
        children = [c for p in self.stack.procs.values() for c in _children(p.pid)]
        self.stack.stop()
        for child in children:  # (a provider agent its parent did not reap)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, 9)
        self.neutron.stop()
        self.keystone.stop()
        self.postgres.stop()


@contextlib.contextmanager
def running(work: Path, ovn: OVNDatabases) -> Iterator[OctaviaOVN]:
    """Keystone, Neutron and Octavia with the ``ovn`` provider on `ovn` (started), in
    `work`; everything stopped on exit, on failure too."""
    bin_dir = venv() / "bin"
    postgres = Postgres(work / "postgres")
    keystone = Keystone(work / "keystone", bin_dir, free_port())
    neutron = Neutron(work / "neutron", ovn, free_port(), postgres.url("neutron"))
    stack = Stack(work / "octavia")
    stack.work.mkdir(parents=True, exist_ok=True)
    running = OctaviaOVN(stack, neutron, keystone, postgres)
    try:
        started = time.monotonic()
        postgres.start("neutron", "octavia")
        running.startup_s["postgres"] = time.monotonic() - started
        started = time.monotonic()
        # (Octavia's tables made while the others start)
        database = start_database(stack, bin_dir, postgres.url("octavia"))
        keystone.start()
        running.startup_s["keystone"] = time.monotonic() - started
        neutron.start()
        running.startup_s.update({f"neutron_{k}": v for k, v in neutron.startup_s.items()})
        port = free_port()
        stack.octavia_url = f"http://127.0.0.1:{port}"
        conf = octavia_conf(stack.work, port, ovn, neutron, keystone, postgres.url("octavia"))
        (stack.work / "octavia.conf").write_text(conf)
        started = time.monotonic()
        start_octavia(stack, database, bin_dir, _SOCKETS)
        running.startup_s["octavia"] = time.monotonic() - started
        yield running
    finally:
        running.stop()


__all__ = ["PROVIDER", "OctaviaOVN", "missing", "octavia_conf", "rss_mb", "running"]
