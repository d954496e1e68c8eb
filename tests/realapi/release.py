"""One install of the chart per test on the shared real control plane, and its processes.

A :class:`Release` renders the chart (tests/controller/chart.py) into a namespace of its
own, with its own ``loadBalancerClass`` (``classOnly``), so tests sharing one apiserver do
not serve each other's Services. From the render it applies what the components' identity
is made of: the ServiceAccounts, Roles and RoleBindings as rendered, and the ClusterRole
bindings under a name of this release (the ClusterRoles themselves are the shipped ones,
applied once by the ``installed`` fixture). The controller and the speaker then run as
processes with TokenRequest tokens of their own ServiceAccounts, with the arguments the
chart renders for their containers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from controller.chart import render_objects
from teapot_lb.lab.kubeplane import ControlPlane, Daemon, free_port
from teapot_lb.lab.wait import wait_for
from teapot_lb.model.gateway_api_schema import CRD_FILES
from teapot_lb.netlab import Host

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_NAMESPACE = "teapot-lb-system"
TEAPOT_LB = [sys.executable, "-c", "from teapot_lb.cli import main; main()"]
_RENDERED_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRoleBinding"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def in_namespace(namespace: str, *docs: dict[str, Any]) -> list[dict[str, Any]]:
    """Copies of builder documents (tests/model/builders.py) moved into ``namespace``."""
    moved = []
    for doc in docs:
        copy = json.loads(json.dumps(doc))
        copy["metadata"]["namespace"] = namespace
        moved.append(copy)
    return moved


def install_shipped(plane: ControlPlane) -> None:
    """The CRDs and deploy/teapot-lb.yaml applied as they are, the CRDs established.

    The shipped ValidatingWebhookConfiguration is removed again afterwards: it reaches the
    controller through a Service, and no Pod runs here to back it (with failurePolicy Fail
    every lb.teapot.io write would be refused). Tests register the webhook by URL instead
    (test_webhook.py)."""
    crds = str(ROOT / "deploy" / "crds")
    plane.kubectl("apply", "-f", crds)
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", crds)
    plane.kubectl("apply", "-f", str(ROOT / "deploy" / "teapot-lb.yaml"))
    plane.kubectl("delete", "validatingwebhookconfiguration", "teapot-lb")


GATEWAY_API = ROOT.parent / "shared" / "gateway-api"


def install_gateway_api(plane: ControlPlane) -> None:
    """The upstream Gateway API CRDs the gateway reads (../shared/gateway-api) applied as
    they are and established; skips the test when they are absent."""
    if not GATEWAY_API.is_dir():
        pytest.skip(f"the Gateway API CRDs are not in {GATEWAY_API}")
    files = [str(GATEWAY_API / file) for file in CRD_FILES.values()]
    for file in files:
        plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", file)

    def established() -> bool:
        # A CRD just created has no conditions yet, which `kubectl wait` takes for an error.
        lines = plane.kubectl(
            "get", *(f"-f={f}" for f in files),
            "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Established')]"
            ".status}{'\\n'}{end}",
        ).split()  # fmt: skip
        return lines == ["True"] * len(files)

    wait_for(established, timeout=60, what="the Gateway API CRDs established", every=0.2)


class Release:
    """The chart's identities in namespace ``namespace`` and the processes run with them."""

    def __init__(self, plane: ControlPlane, namespace: str, workdir: Path) -> None:
        self.plane = plane
        self.namespace = namespace
        self.workdir = workdir
        self.load_balancer_class = f"lb.teapot.io/{namespace}"
        self.values = {"loadBalancerClass": self.load_balancer_class, "classOnly": True}
        self.objects = render_objects(self.values, namespace=namespace)
        self.daemons: list[Component] = []
        self._bindings: list[str] = []

    # --- install -----------------------------------------------------------------------

    def install(self) -> Release:
        self.plane.kubectl("create", "namespace", self.namespace)
        docs = []
        for obj in self.objects:
            if obj["kind"] not in _RENDERED_KINDS:
                continue
            if obj["kind"] == "ClusterRoleBinding":
                obj = json.loads(json.dumps(obj))
                obj["metadata"]["name"] += f"-{self.namespace}"
                self._bindings.append(obj["metadata"]["name"])
            docs.append(obj)
        self.apply(*docs)
        return self

    def apply(self, *docs: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
        """``kubectl apply`` of the documents as the admin; the completed process (stderr
        holds a rejection) and, with ``check``, an error when kubectl fails."""
        done = self.kubectl("apply", "-f", "-", input=_as_list(docs))
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl apply: {done.stderr.strip()}")
        return done

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.plane.admin_kubeconfig}", *args],
            input=input, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def get(self, resource: str, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            self.plane.kubectl("get", resource, name, "-n", self.namespace, "-o", "json")
        )
        return doc

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.plane.kubectl("get", "events", "-n", self.namespace, "-o", "json")
        )["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop(timeout=10.0)
        for name in self._bindings:
            self.plane.kubectl("delete", "clusterrolebinding", name, "--ignore-not-found")
        self.plane.kubectl("delete", "namespace", self.namespace, "--wait=false")

    # --- identities and processes ------------------------------------------------------

    def username(self, component: str) -> str:
        return f"system:serviceaccount:{self.namespace}:teapot-lb-{component}"

    def kubeconfig(self, component: str, *, server: str | None = None) -> Path:
        """A kubeconfig with a TokenRequest token of ``teapot-lb-<component>``."""
        token = self.plane.service_account_token(self.namespace, f"teapot-lb-{component}")
        return self.plane.token_kubeconfig(
            token, f"{self.namespace}-{component}-{uuid.uuid4().hex[:4]}", server=server
        )

    def rendered_args(self, kind: str, name: str) -> list[str]:
        (obj,) = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        (container,) = obj["spec"]["template"]["spec"]["containers"]
        return list(container["args"])

    def controller(
        self,
        identity: str,
        *,
        webhook: tuple[Path, Path, int] | None = None,
        host: Host | None = None,
        server: str | None = None,
    ) -> Component:
        """``teapot-lb controller`` with the Deployment's arguments, as ``identity`` (the
        pod name), on local ports; the webhook on ``127.0.0.1:port`` with this certificate
        and key when given; in ``host``'s namespace reaching the apiserver at ``server``
        (a :func:`forward_into`) when given."""
        args = _override(
            self.rendered_args("Deployment", "teapot-lb-controller"),
            {"--metrics-address": f"127.0.0.1:{free_port()}"},
        )
        if webhook is None:
            args = [a for a in args if not a.startswith("--webhook-")]
        else:
            cert, key, port = webhook
            args = _override(
                args,
                {
                    "--webhook-addr": f"127.0.0.1:{port}",
                    "--webhook-cert": str(cert),
                    "--webhook-key": str(key),
                },
            )
        kubeconfig = self.kubeconfig("controller", server=server)
        log_level, command, *rest = args
        argv = [*TEAPOT_LB, log_level, "--log-format=json", command,
                f"--kubeconfig={kubeconfig}", f"--identity={identity}", *rest]  # fmt: skip
        if host is not None:
            argv = host.exec_argv(argv)
        return self._start(f"controller-{identity}", argv, {"POD_NAMESPACE": self.namespace})

    def speaker(self, node: str, host: Host, server: str, *, modes: str = "bgp") -> Component:
        """``teapot-lb speaker`` with the DaemonSet's arguments for ``node``, in ``host``'s
        namespace, reaching the apiserver at ``server`` (a :func:`forward_into`)."""
        state = self.workdir / f"state-{node}"
        state.mkdir(parents=True, exist_ok=True)
        args = [
            a.replace("$(NODE_NAME)", node)
            for a in self.rendered_args("DaemonSet", "teapot-lb-speaker")
            if not a.startswith("--heartbeat-key-file")
        ]
        args = _override(
            args, {"--state-dir": str(state), "--metrics-address": f"127.0.0.1:{free_port()}"}
        )
        kubeconfig = self.kubeconfig("speaker", server=server)
        log_level, command, *rest = args
        argv = [*TEAPOT_LB, log_level, "--log-format=json", command,
                f"--kubeconfig={kubeconfig}", f"--modes={modes}", *rest]  # fmt: skip
        wrapped = host.exec_argv(argv)
        return self._start(f"speaker-{node}", wrapped, {"POD_NAMESPACE": self.namespace})

    def _start(self, name: str, argv: list[str], env: dict[str, str]) -> Component:
        daemon = Component(name, argv, self.workdir / f"{name}.log", env)
        daemon.start()
        self.daemons.append(daemon)
        return daemon

    # --- what they did ---------------------------------------------------------------------

    def requests_of(self, component: str) -> list[dict[str, Any]]:
        """The audit events of the component's ServiceAccount."""
        return self.plane.audit_events(self.username(component))

    def denied(self, component: str) -> list[str]:
        return [
            f"{e['verb']} {e.get('requestURI')} -> {e['responseStatus'].get('code')}"
            for e in self.requests_of(component)
            if e.get("responseStatus", {}).get("code") == 403
        ]


class Component(Daemon):
    """A controller or speaker process: a daemon with environment variables and a JSON log."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> None:
        super().__init__(name, argv, log)
        self.env = env

    def start(self) -> None:
        if self.running:
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.env},
            )

    def lines(self) -> list[dict[str, Any]]:
        """Its JSON log lines."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def _override(args: Sequence[str], values: dict[str, str]) -> list[str]:
    out = []
    for arg in args:
        flag = arg.split("=", 1)[0]
        out.append(f"{flag}={values[flag]}" if flag in values else arg)
    return out


def _as_list(docs: Iterable[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)})


def wait_until(check: Callable[[], object], what: str, timeout: float = 30.0,
               daemons: Sequence[Daemon] = ()) -> None:  # fmt: skip
    """``wait_for`` with the daemons' log tails as the failure detail."""
    wait_for(
        check,
        timeout=timeout,
        what=what,
        every=0.1,
        detail=lambda: "\n".join(f"--- {d.name}\n{d.tail(15)}" for d in daemons),
    )
