"""A throwaway PostgreSQL cluster for the lab's real Neutron and Octavia
(:mod:`teapot_lb.lab.octavia_ovn`): Debian's PostgreSQL 15, its data and its unix socket
in a directory of the stack's work directory, no TCP, stopped and deleted with the stack.

Why not SQLite: SQLite has one writer for the whole file. Neutron's
``add_router_interface`` holds that write lock while its OVN driver, handling the new
port's Northbound event in the same process, waits for it; under load the request stalled
for minutes until SQLite's busy timeout let go. Octavia's API, whose transactions read and
then write, answered "database is locked" when its driver agent wrote a status at the same
moment. PostgreSQL locks rows, so those writers do not wait for each other.

PostgreSQL refuses to run as root. The cluster runs in a user namespace whose only uid
is the ``postgres`` user's, mapped to ours (``unshare --user --map-user``): the server
sees itself as ``postgres`` and its data directory as its own, while the directory stays
ours on disk, inside pytest's temporary directory (mode 0700, which the real
``postgres`` user could not enter), and is removed like any other file. Durability is off
(``fsync``, ``synchronous_commit``, ``full_page_writes``): a lab database dies with the
stack.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from teapot_lb.lab.processes import terminate
from teapot_lb.lab.wait import wait_for

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"  # the server's user inside its namespace (and the databases' superuser)
START_TIMEOUT_S = 120.0

# A lab's cluster: no TCP, no durability, room for Neutron's and Octavia's pools (each
# process of theirs keeps up to 5 connections and 50 more at a peak).
_SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "400",
    "shared_buffers": "32MB",
}


@functools.cache
def missing() -> str | None:
    """Why the lab cannot run PostgreSQL here (None: it can); asked once."""
    for tool in ("initdb", "postgres", "createdb"):
        if not (BIN / tool).exists():
            return f"{BIN / tool} is missing: run scripts/setup.sh (Debian's postgresql)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing: the lab runs PostgreSQL in a user namespace"
    return None


def _as_postgres(*argv: str) -> list[str]:
    """`argv` run as the ``postgres`` user of a user namespace mapped to ours."""
    return ["unshare", "--user", f"--map-user={USER}", f"--map-group={USER}", *argv]


@dataclass
class Postgres:
    """One cluster in `work`: data in ``work/data``, the socket in ``work/socket``."""

    work: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_dir(self) -> Path:
        return self.work / "socket"

    @property
    def log(self) -> Path:
        return self.work / "postgres.log"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of `database` (psycopg2, over the unix socket)."""
        return f"postgresql+psycopg2://{USER}@/{database}?host={self.socket_dir}"

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self, *databases: str) -> Postgres:
        """Make the cluster and `databases` (empty), start the server; ready when they
        exist."""
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        data = self.work / "data"
        with self.log.open("ab") as log:
            made = subprocess.run(
                _as_postgres(str(BIN / "initdb"), "--pgdata", str(data), "--username", USER,
                             "--auth", "trust", "--encoding", "UTF8", "--no-sync",
                             "--no-instructions"),
                stdout=log, stderr=subprocess.STDOUT, check=False, timeout=START_TIMEOUT_S,
            )  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"initdb of the lab's PostgreSQL failed:\n{self.tail()}")
        settings = [arg for k, v in _SETTINGS.items() for arg in ("-c", f"{k}={v}")]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                _as_postgres(str(BIN / "postgres"), "-D", str(data),
                             "-k", str(self.socket_dir), *settings),
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        for database in databases:
            wait_for(functools.partial(self._created, database), timeout=START_TIMEOUT_S,
                     what=f"PostgreSQL creating database {database}", every=0.1,
                     detail=self.tail)  # fmt: skip
        return self

    def _created(self, database: str) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"postgres exited ({self.proc.returncode}):\n{self.tail()}")
        done = subprocess.run(
            [str(BIN / "createdb"), "--host", str(self.socket_dir), "--username", USER,
             database],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        if done.returncode != 0 and "already exists" in done.stderr:
            return True  # (an earlier try that timed out on our side had made it)
        return done.returncode == 0

    def stop(self) -> None:
        """Stop the server and delete its data. SIGINT is PostgreSQL's fast shutdown (it
        ends its clients' sessions; SIGTERM would wait for them), SIGQUIT its immediate
        one; a SIGKILL of the postmaster would leave its backends running."""
        if self.proc is not None and self.proc.poll() is None:
            for sig, within in ((signal.SIGINT, 20.0), (signal.SIGQUIT, 10.0)):
                self.proc.send_signal(sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=within)
                    break
            terminate(self.proc)
        shutil.rmtree(self.work / "data", ignore_errors=True)


__all__ = ["Postgres", "missing"]
