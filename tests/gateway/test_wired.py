"""The gateway wired end to end: the real tenant agent (two fake API servers) mirrors a
tenant's Ingress, EndpointSlice and TLS Secret into the management cluster; the
`teapot-lb gateway` process reads them from there (kubeconfig, `--address`) and drives
real HAProxy in a namespace: HTTPS with SNI reaches the tenant's pods, an endpoint
change moves traffic without a reload, another tenant's theft of the hostname is
refused and the victim keeps being served. Plus `--manifests DIR` (standalone)."""

from __future__ import annotations

import asyncio
import base64
import copy
import signal
import subprocess
from collections.abc import Callable, Iterator
from ipaddress import ip_address
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from needs import require_binary, require_root
from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7mirror import (
    AGENT,
    ANNOTATION_REFUSED,
    ANNOTATION_SERVICE_PORTS,
    LABEL_BACKENDS,
    MANAGED_BY,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.lab.gateway_lab import (
    GATEWAY,
    GatewayLab,
    gateway_lab,
    make_certificate,
    metric,
    ready,
    start_gateway,
)
from teapot_lb.lab.wait import LabTimeout, wait_for, wait_for_async
from teapot_lb.tenancy.l7vet import LABEL_SOURCE_NAME, LABEL_SOURCE_NAMESPACE
from teapot_lb.tenancy.request import LABEL_CLUSTER
from tenancy.builders import tenant_body

from .control.tenant_world import NS, ingress, service, slice_of, tenant_world, tls_secret

HOST = "www.apps.example"
WITHIN = 20.0
T = TypeVar("T")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    with gateway_lab(tmp_path_factory.mktemp("gwwire"), "gwwire") as lab:
        proc = lab.start_backends(
            "http:acme-a:198.51.100.2:8080",
            "http:acme-b:198.51.100.3:8080",
            "http:bolt:198.51.100.4:8080",
        )
        # Another HAProxy on the machine (as when tests run side by side), even in the
        # gateway's namespace: stopping the gateway must not wait for it.
        other = lab.work / "bystander.cfg"
        other.write_text(
            "defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1s\n"
            "  timeout server 1s\nfrontend bystander\n  bind 127.0.0.1:9\n"
        )
        bystander = subprocess.Popen(
            lab.gateway.exec_argv(["haproxy", "-db", "-f", str(other)]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            yield lab
        finally:
            bystander.terminate()
            bystander.wait(timeout=10)
            proc.terminate()
            proc.wait(timeout=10)


def tenants() -> list[dict[str, Any]]:
    # Both hold apps.example (so a theft is HostnameTaken, not outside the domains); the
    # gateway reaches their pods (PodIPs) in their pod networks.
    nets = {"acme": "198.51.100.0/30", "bolt": "198.51.100.4/30"}
    return [
        tenant_body(
            name,
            dnsDomains=["apps.example"],
            modes=["Route", "Gateway"],
            gatewayBackends="PodIPs",
            podNetworks=[nets[name]],
        )
        for name in ("acme", "bolt")
    ]


async def eventually(check: Callable[[], T | None], what: str, within: float = WITHIN) -> T:
    """Poll a blocking check (a curl, a metrics read) off the event loop, which keeps
    serving the fake API servers and the agent meanwhile."""
    last: T | None = None
    try:
        async with asyncio.timeout(within):
            while True:
                last = await asyncio.to_thread(check)
                if last:
                    return last
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise LabTimeout(
            f"timed out after {within:g} s waiting for {what}; last={last!r}"
        ) from None


def https_served_by(lab: GatewayLab, ca: Path) -> str | None:
    r = lab.curl(f"https://{HOST}/", "--cacert", str(ca), host=HOST, port=443)
    return r.json()["name"] if r.code == 200 else None


def haproxy_pids(state: Path) -> set[int]:
    """The gateway's own HAProxy: the master (from the pid file in its state directory)
    and the master's children, never another HAProxy on the machine (namespaces do not
    isolate PIDs, and other tests run HAProxy beside this one)."""
    masters = {int(text) for f in state.rglob("haproxy.pid") if (text := f.read_text().strip())}
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) in masters:
            children.add(int(stat.parent.name))
    return masters | children


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_gateway(lab: GatewayLab, proc: subprocess.Popen[bytes], state: str) -> None:
    pids = haproxy_pids(lab.work / state)
    assert pids, "the gateway's HAProxy pid file names no process"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    wait_for(lambda: not any(alive(p) for p in pids), timeout=15,
             what=f"the gateway's HAProxy ({sorted(pids)}) stopped with it")  # fmt: skip


@pytest.mark.root
@pytest.mark.daemon
async def test_a_tenants_ingress_is_served_over_https_from_the_cluster(
    lab: GatewayLab, tmp_path: Path
) -> None:
    ca, key, _ = make_certificate(lab.work / "certs", HOST)
    seed = [
        service("web"),
        slice_of("web", ["198.51.100.2"]),
        tls_secret("shop-tls", ca.read_bytes(), key.read_bytes()),
        ingress("shop", HOST, tls=[{"hosts": [HOST], "secretName": "shop-tls"}]),
    ]
    async with tenant_world(tmp_path, *seed) as world:
        for body in tenants():
            world.management.seed(body)
        admin = tmp_path / "admin"  # the management kubeconfig tenant_world wrote
        proc, port = start_gateway(lab, ["--kubeconfig", str(admin)], "cluster")
        # The manager's part (status, Events, refusal annotations), in process.
        manager = GatewayControl(world.admin, [ip_address(GATEWAY)], watch_timeout_s=30)
        try:
            async with running(manager):
                await eventually(lambda: ready(port), "the gateway ready")
                assert await eventually(lambda: https_served_by(lab, ca), "HTTPS") == "acme-a"
                # SNI picked the tenant's certificate.
                subject = await asyncio.to_thread(lab.peer_certificate_subject, 443, HOST)
                assert f"CN={HOST}" in subject.replace(" = ", "=")
                reloads = metric(port, "teapot_lb_gateway_reloads_total")
                actions = metric(port, "teapot_lb_gateway_runtime_actions_total") or 0.0

                # An endpoint change in the tenant cluster moves the traffic, no reload.
                world.tenant.put(slice_of("web", ["198.51.100.3"]))
                await eventually(lambda: https_served_by(lab, ca) == "acme-b", "the new pod")
                assert metric(port, "teapot_lb_gateway_reloads_total") == reloads
                assert (metric(port, "teapot_lb_gateway_runtime_actions_total") or 0) > actions

                # Another tenant's agent mirrors an Ingress for the same hostname, with
                # its own pod behind it: refused (HostnameTaken), acme keeps the name.
                theft = copy.deepcopy(world.management.get("ingresses", "c1.web.shop", NS))
                stolen_slice = next(
                    copy.deepcopy(s)
                    for s in world.management.list("endpointslices", NS)
                    if s["metadata"]["labels"].get("multicluster.kubernetes.io/service-name")
                )
                assert theft is not None
                for obj in (theft, stolen_slice):
                    obj["metadata"] = {
                        k: v for k, v in obj["metadata"].items()
                        if k in ("name", "labels", "annotations")
                    } | {"namespace": "tenant-bolt"}  # fmt: skip
                theft.pop("status", None)
                stolen_slice["endpoints"][0]["addresses"] = ["198.51.100.4"]
                world.management.seed(stolen_slice)
                world.management.seed(theft)
                refused = await wait_for_async(
                    lambda: (
                        (world.management.get("ingresses", "c1.web.shop", "tenant-bolt") or {})
                        .get("metadata", {}).get("annotations", {}).get(ANNOTATION_REFUSED)
                    ),
                    within=WITHIN, what="the refusal annotation",
                )  # fmt: skip
                assert refused.startswith("HostnameTaken")
                for _ in range(5):
                    assert await asyncio.to_thread(https_served_by, lab, ca) == "acme-b"
        finally:
            await asyncio.to_thread(stop_gateway, lab, proc, "cluster")


def _write_manifests(root: Path, endpoint: str, ca: Path, key: Path) -> None:
    """What the agent would have mirrored, as files (one tenant, one Ingress over TLS)."""
    source = {LABEL_CLUSTER: "c1", LABEL_SOURCE_NAMESPACE: "web"}
    objs: list[dict[str, Any]] = [tenants()[0]]
    for obj, name in (
        (ingress("shop", HOST, tls=[{"hosts": [HOST], "secretName": "shop-tls"}]), "shop"),
        (tls_secret("shop-tls", ca.read_bytes(), key.read_bytes()), "shop-tls"),
        (slice_of("web", [endpoint]), "web"),
    ):
        obj["metadata"]["name"] = f"c1.web.{obj['metadata']['name']}"
        obj["metadata"]["namespace"] = NS
        obj["metadata"]["labels"] = {
            **obj["metadata"].get("labels", {}), **source, LABEL_SOURCE_NAME: name
        }  # fmt: skip
        objs.append(obj)
    objs[-1]["metadata"]["labels"] |= {
        MCS_SOURCE_CLUSTER: "c1", MCS_SERVICE_NAME: "web", MANAGED_BY: AGENT,
        LABEL_BACKENDS: "PodIPs",
    }  # fmt: skip
    objs[-1]["metadata"]["annotations"] = {
        ANNOTATION_SERVICE_PORTS: '[{"name":"http","port":80,"protocol":"TCP"}]'
    }
    staged = root / "objects.yaml.new"
    staged.write_text(yaml.safe_dump_all(objs))
    staged.replace(root / "objects.yaml")


@pytest.mark.root
@pytest.mark.daemon
async def test_a_manifest_directory_is_served_and_followed(lab: GatewayLab) -> None:
    ca, key, _ = make_certificate(lab.work / "certs-dir", HOST)
    root = lab.work / "manifests"
    root.mkdir()
    _write_manifests(root, "198.51.100.2", ca, key)
    proc, port = start_gateway(lab, ["--manifests", str(root)], "dir")
    try:
        await eventually(lambda: ready(port), "the gateway ready")
        assert await eventually(lambda: https_served_by(lab, ca), "HTTPS") == "acme-a"
        _write_manifests(root, "198.51.100.3", ca, key)
        await eventually(lambda: https_served_by(lab, ca) == "acme-b", "the new endpoint")
    finally:
        await asyncio.to_thread(stop_gateway, lab, proc, "dir")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gateway"


def _example_certificate(lab: GatewayLab, file: str) -> Path:
    """The example Secret's certificate (self-signed: its own CA for curl)."""
    (secret,) = yaml.safe_load_all((EXAMPLES / file).read_text())
    path = lab.work / f"{file}.crt"
    path.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    return path


@pytest.mark.root
@pytest.mark.daemon
async def test_the_shipped_gateway_example_serves_each_tenant(lab: GatewayLab) -> None:
    """examples/gateway as it is (two tenants: an Ingress over TLS, a Gateway with an
    HTTPRoute over HTTP and HTTPS); the lab's backends are at its EndpointSlices' IPs."""
    acme_ca, bolt_ca = (_example_certificate(lab, f) for f in ("acme-tls.yaml", "bolt-tls.yaml"))
    proc, port = start_gateway(lab, ["--manifests", str(EXAMPLES)], "examples")

    def https(host: str, ca: Path) -> str | None:
        r = lab.curl(f"https://{host}/", "--cacert", str(ca), host=host, port=443)
        return r.json()["name"] if r.code == 200 else None

    try:
        await eventually(lambda: ready(port), "the gateway ready")
        acme = "www.acme.example.com"
        assert await eventually(lambda: https(acme, acme_ca), "acme over HTTPS") == "acme-a"
        bolt = "www.bolt.test"
        assert await eventually(lambda: https(bolt, bolt_ca), "bolt over HTTPS") == "bolt"
        assert await asyncio.to_thread(lab.served_by, "/", bolt) == "bolt"
    finally:
        await asyncio.to_thread(stop_gateway, lab, proc, "examples")


def test_the_deployed_gateway_arguments_are_accepted_and_its_ip_is_the_services() -> None:
    from teapot_lb.cli.gateway import gateway

    deploy = Path(__file__).resolve().parents[2] / "deploy" / "teapot" / "gateway-node.yaml"
    objs = [d for d in yaml.safe_load_all(deploy.read_text()) if d]
    (daemonset,) = [o for o in objs if o["kind"] == "DaemonSet"]
    (service,) = [o for o in objs if o["kind"] == "Service"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["teapot-lb", "gateway"]
    gateway.make_context("gateway", container["args"][2:], resilient_parsing=True)
    assert (
        "--address=" + service["metadata"]["annotations"]["lb.teapot.io/ips"] in container["args"]
    )
    assert service["spec"]["externalTrafficPolicy"] == "Local"  # announced where it runs
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_only_termination_and_passthrough_may_share_a_socket() -> None:
    from teapot_lb.gateway.config import GatewayConfig, Protocol, problems

    from .builders import listener

    def found(*protocols: Protocol) -> list[str]:
        listeners = tuple(listener(f"l{i}", 443, p) for i, p in enumerate(protocols))
        return [p for p in problems(GatewayConfig(listeners=listeners)) if "listeners on" in p]

    assert found(Protocol.HTTPS, Protocol.TLS_PASSTHROUGH) == []
    assert found(Protocol.HTTPS, Protocol.HTTPS) == ["listeners: 2 listeners on 192.0.2.10:443/tcp"]
    assert found(Protocol.TLS_PASSTHROUGH, Protocol.TLS_PASSTHROUGH) != []
    assert found(Protocol.HTTPS, Protocol.TLS_PASSTHROUGH, Protocol.TCP) != []
