"""The real Neutron from PyPI on the lab's real OVN: ML2 with the OVN mechanism driver.

Where :mod:`teapot_lb.lab.neutron` is a read-only stand-in, this runs Neutron 29's API
(the WSGI application ``neutron.wsgi.api:application``, served by werkzeug on 127.0.0.1)
from the virtualenv :func:`venv` names, with ``auth_strategy = noauth`` (every request is
the admin of project ``fake_project_id``; a request may name another ``project_id``),
the geneve and flat type drivers, the ``ovn-router`` service plugin, no RPC workers and
no agents, and the database it is given (PostgreSQL in the lab). A network, subnet or
port made through its API lands in the Northbound of the
:class:`~teapot_lb.lab.ovnstack.OVNDatabases` given as a Logical_Switch / Logical_Switch_Port
named ``neutron-<network id>`` / ``<port id>``:
``ovn-octavia-provider`` (:mod:`teapot_lb.lab.octavia_ovn`) looks its subnets and ports
up there and makes its VIP ports there.

Gotchas this encodes (Neutron 29 under a plain WSGI server):

- the schema comes from the models' ``metadata.create_all`` (as Neutron's unit tests make
  theirs; its migrations do not run on SQLite, and take minutes on PostgreSQL);
- the OVN driver asks uWSGI or mod_wsgi for the number of API workers and, finding
  neither, refuses to use its hash ring ("The Neutron API workers count is zero"): it
  reads ``ASGI_WORKERS`` then, set to 1;
- the start time of the worker group is a file keyed by the parent's pid in the temp
  directory: ``TMPDIR`` is the work directory, so two servers started by one process
  (two test modules) do not share it;
- its SIGTERM handler only leaves the hash ring: the server replaces it with one that
  exits;
- its database is PostgreSQL (:mod:`teapot_lb.lab.postgres`), given as a URL: on SQLite's
  single write lock ``add_router_interface`` stalled for minutes under load (the request
  held the lock while the OVN driver, handling the new port's Northbound event in the same
  process, waited for it). A ``sqlite:///`` URL still works for a quick look on a quiet
  machine: every transaction then takes the write lock at BEGIN and waits for it (the
  deferred BEGIN failed a transaction that had read when another thread wrote).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.kubeplane import project_root
from teapot_lb.lab.ovnstack import OVNDatabases
from teapot_lb.lab.processes import terminate
from teapot_lb.lab.wait import wait_for

VENV_VARIABLE = "TEAPOT_NEUTRON_VENV"
NOAUTH_PROJECT = "fake_project_id"  # the project of a noauth request that names none
START_TIMEOUT_S = 240.0  # (a start costs 10-50 s on the 2-core machine under load)


def venv() -> Path:
    """The virtualenv with Neutron 29, Octavia 19, ovn-octavia-provider and Keystone:
    ``$TEAPOT_NEUTRON_VENV``, else ``.venv-neutron`` in the repository
    (``TEAPOT_INSTALL_NEUTRON=1 scripts/setup.sh`` makes it)."""
    return Path(os.environ.get(VENV_VARIABLE) or project_root() / ".venv-neutron")


@functools.cache
def _missing(where: Path) -> str | None:
    python = where / "bin" / "python"
    if not python.exists():
        return (f"{python} is missing: run TEAPOT_INSTALL_NEUTRON=1 "
                f"scripts/setup.sh or point ${VENV_VARIABLE} at a virtualenv with "
                "neutron, octavia, "
                "ovn-octavia-provider, keystone and psycopg2")  # fmt: skip
    for tool in ("keystone-manage",):
        if not (where / "bin" / tool).exists():
            return f"{where / 'bin' / tool} is missing (pip install keystone into {where})"
    probe = subprocess.run(
        [str(python), "-c", "import neutron.wsgi, octavia.api, ovn_octavia_provider.driver, "
         "werkzeug, psycopg2"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"{where} cannot import what the stack runs: {probe.stderr.strip()[-300:]}"
    return None


def missing() -> str | None:
    """Why the real Neutron cannot run here (None: it can); asked once per venv."""
    return _missing(venv())


def neutron_conf(work: Path, ovn: OVNDatabases, database: str) -> str:
    """neutron.conf of the lab: ML2/OVN on `ovn`'s databases, noauth, its own tables in
    `database` (a SQLAlchemy URL)."""
    paste = venv() / "etc" / "neutron" / "api-paste.ini"
    return textwrap.dedent(
        f"""\
        [DEFAULT]
        core_plugin = ml2
        service_plugins = ovn-router
        auth_strategy = noauth
        api_paste_config = {paste}
        transport_url = fake://
        state_path = {work / "state"}
        host = teapot-lab
        rpc_workers = 0
        rpc_state_report_workers = 0
        debug = False
        use_stderr = True

        [oslo_concurrency]
        lock_path = {work / "lock"}

        [database]
        connection = {database}

        [ml2]
        mechanism_drivers = ovn
        type_drivers = geneve,flat
        tenant_network_types = geneve
        extension_drivers = port_security

        [ml2_type_geneve]
        vni_ranges = 1:65536
        max_header_size = 38

        [ml2_type_flat]
        flat_networks = *

        [ovn]
        ovn_nb_connection = {ovn.nb_remote}
        ovn_sb_connection = {ovn.sb_remote}
        ovn_metadata_enabled = False
        """
    )


# Every model imported (neutron.db.migration.models.head), then the tables they declare.
_CREATE_SCHEMA = """
import sys
from sqlalchemy import create_engine
from neutron.db.migration.models import head  # noqa: F401
from neutron_lib.db import model_base
model_base.BASEV2.metadata.create_all(create_engine(sys.argv[1]))
"""

# The API: the configuration from the environment (oslo.config must not see our
# arguments), the application loaded (that connects the OVN driver), then served. On
# SQLite every transaction takes the write lock at BEGIN and waits for it (the URL's
# timeout): under the deferred BEGIN a transaction that has read fails at once ("database
# is locked") when another thread writes, as the OVN driver's revision bump of a port did
# while its Northbound events were being written.
_SERVE = """
import os, signal, sys
import sqlalchemy

@sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "begin")
def _immediate(conn):
    if conn.dialect.name != "sqlite" or "in_transaction" in conn.info:
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE")
    conn.info["in_transaction"] = True  # (oslo.db's own BEGIN then stands aside)

port, conf = int(sys.argv[1]), sys.argv[2]
sys.argv = sys.argv[:1]
os.environ["OS_NEUTRON_CONFIG_DIR"] = os.path.dirname(conf)
os.environ["OS_NEUTRON_CONFIG_FILES"] = os.path.basename(conf)
from neutron.wsgi.api import application
from werkzeug.serving import run_simple
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
run_simple("127.0.0.1", port, application, threaded=True)
"""


class NeutronError(RuntimeError):
    """Neutron answered an error: the request and Neutron's own message."""


@dataclass
class Neutron:
    """One Neutron API in `work` on `ovn`'s databases, listening on `port`, its tables in
    `database`."""

    work: Path
    ovn: OVNDatabases
    port: int
    database: str  # the SQLAlchemy URL of its (empty) database
    proc: subprocess.Popen[bytes] | None = None
    startup_s: dict[str, float] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.work / "neutron.log"

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> Neutron:
        """Make the database, start the API; ready when it lists networks."""
        for sub in ("state", "lock", "tmp"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        conf = self.work / "neutron.conf"
        conf.write_text(neutron_conf(self.work, self.ovn, self.database))
        python = str(venv() / "bin" / "python")
        started = time.monotonic()
        with self.log.open("ab") as log:
            made = subprocess.run(
                [python, "-c", _CREATE_SCHEMA, self.database],
                stdout=log, stderr=subprocess.STDOUT, check=False, timeout=START_TIMEOUT_S,
            )  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"making Neutron's database failed:\n{self.tail()}")
        self.startup_s["database"] = time.monotonic() - started
        env = {**os.environ, "ASGI_WORKERS": "1", "TMPDIR": str(self.work / "tmp")}
        started = time.monotonic()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [python, "-c", _SERVE, str(self.port), str(conf)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.work,
            )  # fmt: skip
        wait_for(self._answers, timeout=START_TIMEOUT_S, what="neutron's API answering",
                 every=0.2, detail=self.tail)  # fmt: skip
        self.startup_s["api"] = time.monotonic() - started
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"neutron exited ({self.proc.returncode}):\n{self.tail()}")
        try:
            self.call("GET", "/v2.0/networks")
            return True
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        terminate(self.proc)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request to the API; its JSON answer (None for an empty one). An error
        answer raises :class:`NeutronError` with Neutron's message."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            raise NeutronError(f"{method} {path}: {err.code} {err.read()[:500]!r}") from None

    def create(self, kind: str, **fields: Any) -> dict[str, Any]:
        """POST one `kind` (network, subnet, port, router) with these fields; the object."""
        return dict(self.call("POST", f"/v2.0/{kind}s", {kind: fields})[kind])

    def delete(self, kind: str, object_id: str) -> None:
        self.call("DELETE", f"/v2.0/{kind}s/{object_id}")


__all__ = [
    "NOAUTH_PROJECT",
    "VENV_VARIABLE",
    "Neutron",
    "NeutronError",
    "missing",
    "neutron_conf",
    "venv",
]
