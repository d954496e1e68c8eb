"""Keystone from PyPI on SQLite, for the Octavia lab stack (the ``openstack`` CLI needs an
identity service: it finds projects and the load-balancer and network endpoints there).

The real Keystone (the ``keystone`` package, installed into ``.venv-octavia`` by
``scripts/setup.sh``): ``keystone-manage db_sync``, ``fernet_setup``,
``credential_setup`` and ``bootstrap`` (user ``admin`` in project ``admin``, password
:data:`ADMIN_PASSWORD`, region ``RegionOne``), then its WSGI application served by
werkzeug on 127.0.0.1. A lab's identity only: the password is fixed and the database is
a file in the work directory.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.processes import terminate
from teapot_lb.lab.wait import wait_for

ADMIN_PASSWORD = "teapot-lab"
REGION = "RegionOne"

# keystone reads its configuration files from the environment; oslo.config must not see
# the server's own arguments.
_SERVE = """
import os, sys
port, conf = int(sys.argv[1]), sys.argv[2]
sys.argv = sys.argv[:1]
os.environ["OS_KEYSTONE_CONFIG_FILES"] = conf
from keystone.wsgi.api import application
from werkzeug.serving import run_simple
run_simple("127.0.0.1", port, application, threaded=True)
"""


@dataclass
class Keystone:
    """One Keystone in `work`, its commands from `bin_dir` (a virtualenv's bin)."""

    work: Path
    bin_dir: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    _token: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v3"

    @property
    def conf(self) -> Path:
        return self.work / "keystone.conf"

    def _manage(self, *args: str) -> None:
        argv = [str(self.bin_dir / "keystone-manage"), "--config-file", str(self.conf), *args]
        with (self.work / "keystone-manage.log").open("ab") as log:
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = (self.work / "keystone-manage.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"keystone-manage {args[0]} failed ({done.returncode}):\n{tail}")

    def start(self) -> None:
        """Make the database and keys, bootstrap the admin, serve; ready when it answers."""
        self.work.mkdir(parents=True, exist_ok=True)
        w = self.work
        self.conf.write_text(
            textwrap.dedent(
                f"""\
                [DEFAULT]
                use_stderr = True
                [database]
                connection = sqlite:///{w / "keystone.db"}
                [fernet_tokens]
                key_repository = {w / "fernet-keys"}
                [fernet_receipts]
                key_repository = {w / "fernet-receipts"}
                [credential]
                key_repository = {w / "credential-keys"}
                [token]
                provider = fernet
                """
            )
        )
        self._manage("db_sync")
        for setup in ("fernet_setup", "credential_setup"):
            self._manage(setup, "--keystone-user", "root", "--keystone-group", "root")
        self._manage("bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                     "--bootstrap-admin-url", self.url, "--bootstrap-public-url", self.url,
                     "--bootstrap-internal-url", self.url,
                     "--bootstrap-region-id", REGION)  # fmt: skip
        python = str(self.bin_dir / "python")
        log = (w / "keystone.log").open("ab")
        self.proc = subprocess.Popen([python, "-c", _SERVE, str(self.port), str(self.conf)],
                                     stdout=log, stderr=subprocess.STDOUT)  # fmt: skip

        def answers() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                tail = (w / "keystone.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"keystone exited ({self.proc.returncode}):\n{tail}")
            try:
                with urllib.request.urlopen(self.url, timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                return False

        wait_for(answers, timeout=120, what="keystone answering")

    def stop(self) -> None:
        terminate(self.proc)

    def _call(self, method: str, path: str, body: Any = None, *, token: bool = True) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("X-Auth-Token", self.token())
        with urllib.request.urlopen(request, timeout=30) as response:
            if path == "/auth/tokens" and method == "POST":
                return response.headers["X-Subject-Token"]
            return json.loads(response.read() or b"null")

    def token(self) -> str:
        """The admin's project-scoped token."""
        if not self._token:
            auth = {"auth": {
                "identity": {"methods": ["password"], "password": {"user": {
                    "name": "admin", "domain": {"id": "default"}, "password": ADMIN_PASSWORD}}},
                "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
            }}  # fmt: skip
            self._token = str(self._call("POST", "/auth/tokens", auth, token=False))
        return self._token

    def project(self, name: str) -> str:
        """The id of project `name` (made when missing), the admin a member of it."""
        found = self._call("GET", f"/projects?name={name}")["projects"]
        if found:
            return str(found[0]["id"])
        body = {"project": {"name": name, "domain_id": "default"}}
        return str(self._call("POST", "/projects", body)["project"]["id"])

    def register(self, service_type: str, name: str, url: str) -> None:
        """A service of the catalog with its public endpoint in :data:`REGION`."""
        body = {"service": {"type": service_type, "name": name}}
        service = self._call("POST", "/services", body)["service"]["id"]
        endpoint = {"service_id": service, "interface": "public", "url": url, "region_id": REGION}
        self._call("POST", "/endpoints", {"endpoint": endpoint})


def octavia_auth(keystone: Keystone) -> str:
    """The sections of octavia.conf that make its API check Keystone tokens (the lab's
    admin validates them; legacy policy defaults: the admin role may do everything)."""
    return textwrap.dedent(
        f"""\
        [keystone_authtoken]
        www_authenticate_uri = {keystone.url}
        auth_url = {keystone.url}
        auth_type = password
        username = admin
        password = {ADMIN_PASSWORD}
        project_name = admin
        user_domain_name = Default
        project_domain_name = Default

        [oslo_policy]
        enforce_scope = False
        enforce_new_defaults = False
        """
    )


def openrc(keystone: Keystone, project: str = "admin") -> str:
    """Shell lines that point the ``openstack`` CLI at the lab as its admin."""
    return textwrap.dedent(
        f"""\
        export OS_AUTH_URL={keystone.url}
        export OS_IDENTITY_API_VERSION=3
        export OS_USERNAME=admin
        export OS_PASSWORD={ADMIN_PASSWORD}
        export OS_PROJECT_NAME={project}
        export OS_USER_DOMAIN_NAME=Default
        export OS_PROJECT_DOMAIN_NAME=Default
        export OS_REGION_NAME={REGION}
        """
    )


__all__ = ["ADMIN_PASSWORD", "REGION", "Keystone", "octavia_auth", "openrc"]
