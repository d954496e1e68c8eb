"""Every query of the Grafana dashboard, run by a real Prometheus scraping a running lab.

The lab of `teapot-lb lab` (BIRD, three nodes running `teapot-lb run` in BGP, L2 and VIP
mode on examples/lab, each serving /metrics on its LAN address: ``metrics_port``) plus a
controller and its webhook against the fake API server, serving /metrics in the client's
namespace, where Prometheus runs. Each dashboard expression must return at least one
series and none may be refused; the alert rules must load and evaluate without error.
`teapot-lb status` reads the same lab (its manifests and the nodes' status.json).
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from fakeapi.wait import until
from needs import require_binary, require_root
from teapot_lb.cli.status import standalone_status
from teapot_lb.controller.kube_runner import KubeController, RunnerConfig, running
from teapot_lb.controller.metrics import ControllerMetrics
from teapot_lb.httpserve import MonitoringServer
from teapot_lb.kube.client import connect
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.manifests import copy_manifests, layout, read_dir
from teapot_lb.lab.netns import in_netns, netns_socket
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.prometheus import Prometheus, PromQLError
from teapot_lb.lab.runner import REPO_EXAMPLES
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology
from teapot_lb.status import ClusterStatus
from teapot_lb.webhook import VALIDATE_PATH, WebhookServer

from .chart_monitoring import RULES
from .test_dashboard import expressions

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

SPEAKER_PORT = 7472
RATE_INTERVAL = "15s"  # what Grafana's $__rate_interval is at a 1 s scrape interval and more


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabNetwork]:
    require_root()
    require_binary("prometheus", "bird", "birdc", "keepalived")
    work = tmp_path_factory.mktemp("dashlab")
    manifests = work / "manifests"
    copy_manifests(REPO_EXAMPLES, manifests, drop_nodes=False)
    topology = Topology("dash")
    try:
        net = LabNetwork(
            topology, layout(read_dir(manifests), nodes=None), work, manifests,
            router="bird", modes=("bgp", "l2", "vip"), poll_interval=None,
        )  # fmt: skip
        net.metrics_port = SPEAKER_PORT
        net.build()
        net.start_router()
        for name in net.nodes:
            net.start_speaker(name)
        wait_for(
            lambda: all(net.status(n).get("generation", 0) >= 1 for n in net.nodes),
            timeout=60, what="every node's teapot-lb run", every=0.1,
        )  # fmt: skip
        yield net
    finally:
        topology.close()


async def serve_in(ns: str, app: web.Application) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on 127.0.0.1 of namespace ``ns`` (the socket is made there)."""
    sock = netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner, int(sock.getsockname()[1])


def lab_documents() -> list[dict[str, Any]]:
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
        for n in ("demo", "teapot-lab")
    ]
    for path in sorted(REPO_EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(
    lab: LabNetwork, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Prometheus]:
    """The controller and webhook (fake API) and Prometheus scraping them and the nodes,
    once for the module (the tests only read)."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    api = FakeApiServer()
    await api.start()
    api.write_kubeconfig(tmp_path / "kubeconfig")
    for doc in lab_documents():
        api.seed(doc)
    client = await connect(api.kubeconfig_path)
    metrics = ControllerMetrics()
    controller = KubeController(client, RunnerConfig(pool_status_delay_s=0.1), metrics=metrics)
    webhook = WebhookServer(
        controller.config_objects,
        ready=controller.readiness,
        observe=lambda kind, allowed: metrics.webhook_requests.labels(
            kind, str(allowed).lower()
        ).inc(),
        fail=lambda reason: metrics.webhook_errors.labels(reason).inc(),
    )
    ns = lab.client.ns
    runners: list[web.AppRunner] = []
    prom = Prometheus(lab.client, tmp_path / "prometheus")
    try:
        async with running(controller):
            metrics_runner, metrics_port = await serve_in(
                ns, MonitoringServer(metrics.registry).make_app()
            )
            webhook_runner, webhook_port = await serve_in(ns, webhook.make_app())
            runners += [metrics_runner, webhook_runner]
            await until(lambda: not controller.readiness(), 15, "the controller's cache")
            await asyncio.to_thread(review_one_pool, ns, webhook_port)
            jobs = {
                "speaker": {f"{n.address}:{SPEAKER_PORT}": n.name for n in lab.nodes.values()},
                "controller": {f"127.0.0.1:{metrics_port}": ""},
            }
            await asyncio.to_thread(prom.start, jobs, [RULES])
            yield prom
    finally:
        prom.stop()
        for r in runners:
            await r.cleanup()
        await client.close()
        await api.stop()


def review_one_pool(ns: str, port: int) -> None:
    """One admission review, so that the webhook's counters have series."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "1", "operation": "CREATE",
            "kind": {"group": "lb.teapot.io", "version": "v1alpha1", "kind": "AddressPool"},
            "object": {
                "apiVersion": "lb.teapot.io/v1alpha1", "kind": "AddressPool",
                "metadata": {"name": "extra", "namespace": "teapot-lab"},
                "spec": {"addresses": ["198.51.100.128/28"]},
            },
        },
    }  # fmt: skip

    def post() -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{VALIDATE_PATH}",
            data=json.dumps(review).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)

    assert in_netns(ns, post) == 200


async def poll(check: Any, *, within: float, what: str) -> Any:
    """Like wait_for_async, for a blocking check (run in a thread: the loop keeps serving
    the controller's /metrics meanwhile)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await asyncio.to_thread(check)
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


async def test_every_dashboard_query_returns_series_from_the_lab(prometheus: Prometheus) -> None:
    targets = await poll(
        lambda: (t := prometheus.targets()) and all(h == "up" for h in t.values()) and t,
        within=60,
        what="Prometheus to scrape every node and the controller",
    )
    assert len(targets) == 4
    queries = [
        (title, expr.replace("$__rate_interval", RATE_INTERVAL)) for title, expr in expressions()
    ]
    refused: list[str] = []
    empty: dict[str, str] = {}

    def missing() -> bool:
        for title, expr in queries:
            if expr in refused:
                continue
            try:
                series = prometheus.query(expr)
            except PromQLError as err:
                refused.append(expr)
                empty.pop(expr, None)
                pytest.fail(f"panel {title!r}: {expr}: {err}")
            if series:
                empty.pop(expr, None)
            else:
                empty[expr] = title
        return not empty

    # Rates need a few scrapes; VRRP masters and the L2 owner a few seconds.
    await poll(missing, within=90, what=f"series for every query; still empty: {empty}")
    assert not refused


async def test_the_alert_rules_load_and_evaluate_in_a_real_prometheus(
    prometheus: Prometheus,
) -> None:
    def evaluated() -> list[dict[str, Any]] | None:
        groups = prometheus.api("/api/v1/rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return (
            rules
            if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules)
            else None
        )

    rules = await poll(evaluated, within=30, what="every rule evaluated once")
    assert {r["health"] for r in rules} == {"ok"}, [r for r in rules if r["health"] != "ok"]
    assert len(rules) == len(
        [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    )


async def test_status_shows_the_running_lab_sessions_holders_and_no_problem(
    lab: LabNetwork,
) -> None:
    """`teapot-lb status` on the lab's directory: the manifests and the nodes' state dirs."""

    def settled() -> ClusterStatus | None:
        status = standalone_status(lab.manifests, lab.workdir / "state")
        return None if status.problems else status

    status = await poll(settled, within=60, what="a status without problems")
    assert {(s.node, s.state) for s in status.sessions} == {(n, "Established") for n in lab.nodes}
    modes = {h.mode for h in status.holders}
    assert modes == {"bgp", "l2", "vip"}
    for h in status.holders:
        assert h.known and h.nodes, h
        if h.mode in ("l2", "vip"):
            assert len(h.nodes) == 1, h  # one owner, one VRRP master
