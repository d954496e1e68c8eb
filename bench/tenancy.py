"""Benchmark Teapot tenancy: tenants' Services through agent -> management API -> manager
-> management API -> agent -> Service status.

Three processes: the management fake API server (teapot_lb.lab.fakeapi, with a
namespace-restricted token per tenant); the real `teapot-lb manager` command
(leader-elected, as deployed); and this script, which hosts one fake API server per tenant
cluster and every tenant's `TenantAgent` (the product's agent, as `teapot-lb tenant-agent`
wires it). Services are
created at --rate per second, round-robin over the tenants; a Service's latency runs from
the create's response to its IP appearing in its status.loadBalancer (polled every 5 ms
in the tenant's fake server, no HTTP).

Then: an isolation pass (tenant t1 tries to get t0's address, nodes, requests, quota,
over HTTP with its own credentials; each attempt must be refused), and a churn pass
(--churn create/delete cycles in t2's cluster, 1,000 by default, while t2's agent runs
as the real `teapot-lb tenant-agent` process, SIGKILLed at random points and started
again); orphans_after_churn counts requests without a Service and Services without their
request or status once it settles.

    .venv/bin/python bench/tenancy.py [--tenants 100] [--services 20] [--rate 100]

With ``--real-api`` the management side is the real control plane (etcd and kube-apiserver
from ../shared/kube, the CRDs of deploy/crds, an audit log; issue 37's goal 3: 1,000 tenants
x 20 Services). The manager runs as an identity of its own, the agents as another (both
system:masters: RBAC is tested in tests/tenancy/test_real_rbac.py, not timed here), so the
isolation pass is left out. After the load, a restart pass: once the manager has written
nothing for 3 s it is SIGKILLed and started again; restart_to_serving_s runs from the start
until a new Service has its IP, and writes_for_unchanged counts what the restarted manager
wrote (the audit log: create, update, patch, delete; not its Lease nor Events) to any object
but the new request and its Tenant's status.

    .venv/bin/python bench/tenancy.py --real-api --tenants 1000 --services 20 --churn 0

Last line, JSON: create_to_status_p50_s, create_to_status_p99_s, rss_mb (manager peak),
isolation_cases, isolation_refused, orphans_after_churn (and more). Addresses are from
2001:db8::/32 (documentation); nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller_scale import cpu_seconds, free_port, peak_rss_mb, percentile, wait_ready
from teapot_lb import log
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import ApiStatusError, NotFound
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    NAMESPACES,
    SERVICES,
    TENANT_LOAD_BALANCERS,
    TENANTS,
)
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.lab.kubeplane import missing as kube_missing
from teapot_lb.lab.processes import Restartable, tenant_agent_command
from teapot_lb.tenancy.request import TEAPOT_CLOUD_CLASS
from teapot_lb.tenant_agent.kube import AgentConfig, TenantAgent

CONFIG_NS = "teapot-lb-system"
API = "lb.teapot.io/v1alpha1"


def tenant_name(i: int) -> str:
    return f"t{i}"


def tenant_body(i: int, services: int) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Tenant",
        "metadata": {"name": tenant_name(i)},
        "spec": {
            "namespace": f"tenant-{i}",
            "allocations": [{"addressPool": "bench", "cidrs": [f"2001:db8:1000::{i:x}00/120"]}],
            "quotas": {"addresses": services + 50, "loadBalancers": services + 50, "ports": 200},
            "nodeNetworks": [f"2001:db8:2:{i:x}::/64"],
            "modes": ["Route"],
        },
    }


def node(i: int, n: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n{n}"},
        "status": {"addresses": [{"type": "InternalIP", "address": f"2001:db8:2:{i:x}::{n + 1}"}]},
    }


def service(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": TEAPOT_CLOUD_CLASS,
            "ipFamilies": ["IPv6"],
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}],
        },
    }


def ingress(api: FakeApiServer, name: str) -> list[Any]:
    svc = api.get("services", name, "default") or {}
    return list(svc.get("status", {}).get("loadBalancer", {}).get("ingress") or [])


@dataclass
class Cluster:
    index: int
    api: FakeApiServer
    admin: KubeClient
    remote: KubeClient
    agent: TenantAgent
    task: asyncio.Task[None] | None = None

    def start_agent(self) -> None:
        self.task = asyncio.create_task(self.agent.run())

    async def stop_agent(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    def fresh_agent(self) -> None:
        config = self.agent.config
        self.agent = TenantAgent(self.admin, self.remote, config, watch_timeout_s=120)


def in_namespace(kubeconfig: Path, out: Path, namespace: str, token: str | None = None) -> Path:
    """`kubeconfig` (JSON or YAML) with its context's namespace set (and its user's bearer
    token, when given)."""
    config = yaml.safe_load(kubeconfig.read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    if token is not None:
        config["users"][0]["user"]["token"] = token
    out.write_text(json.dumps(config))
    return out


CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"


async def start_management(kubeconfig: Path, tenants: int) -> asyncio.subprocess.Process:
    tokens = [f"--token=agent-{i}=tenant-{i}" for i in range(tenants)]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "teapot_lb.lab.fakeapi", "--kubeconfig", str(kubeconfig),
        "--history", "400000", "--bookmark-interval", "5", "--token=fake-token", *tokens,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), 60)  # its URL: it is listening
    return process


async def start_cluster(
    management: Path, tmp: Path, i: int, plane: ControlPlane | None = None
) -> Cluster:
    api = FakeApiServer(bookmark_interval=5.0, history_size=20_000)
    await api.start()
    api.write_kubeconfig(tmp / f"tenant-{i}")
    for n in range(2):
        api.seed(node(i, n))
    # The fake API: the agent's own token; the real one: the agents' identity. Both in
    # the tenant's namespace.
    token = f"agent-{i}" if plane is None else None
    remote_config = in_namespace(management, tmp / f"remote-{i}", f"tenant-{i}", token)
    assert api.kubeconfig_path is not None
    admin = await connect(api.kubeconfig_path, request_timeout_s=30.0)
    remote = await connect(remote_config, request_timeout_s=30.0)
    agent = TenantAgent(
        admin, remote, AgentConfig(cluster=f"c{i}", namespace=f"tenant-{i}"), watch_timeout_s=120
    )
    return Cluster(i, api, admin, remote, agent)


async def start_manager(kubeconfig: Path, port: int, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from teapot_lb.cli import main; main()",
        "--log-level",
        "warning",
        "manager",
        "--kubeconfig",
        str(kubeconfig),
        "--config-namespace",
        CONFIG_NS,
        "--identity",
        "bench",
        "--metrics-addr",
        f"127.0.0.1:{port}",
        "--webhook-addr",
        "",
        stderr=log.open("wb"),
    )


async def wait_leading(port: int) -> None:
    """Until the manager holds its Lease (its own /metrics says so)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                if "teapot_lb_manager_leader 1.0" in await resp.text():
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("the manager never took its Lease")


async def wait_until(check: Any, within: float) -> bool:
    deadline = time.perf_counter() + within
    while time.perf_counter() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())


# ----------------------------------------------------------------------- phases


async def load(clusters: list[Cluster], services: int, rate: float) -> list[float]:
    """Create every Service at `rate` per second; latencies create -> IP in status."""
    pending: dict[tuple[int, str], float] = {}
    latencies: list[float] = []
    created_all = asyncio.Event()

    async def poll() -> None:
        while not (created_all.is_set() and not pending):
            now = time.perf_counter()
            for key, t0 in list(pending.items()):
                if ingress(clusters[key[0]].api, key[1]):
                    latencies.append(now - t0)
                    del pending[key]
            await asyncio.sleep(0.005)

    poller = asyncio.create_task(poll())
    plan = [(c, f"svc-{s:03d}") for s in range(services) for c in clusters]
    start = time.perf_counter()

    async def create(cluster: Cluster, name: str) -> None:
        await cluster.admin.create(SERVICES, service(name))
        pending[(cluster.index, name)] = time.perf_counter()

    tasks = []
    for n, (cluster, name) in enumerate(plan):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(create(cluster, name)))
    await asyncio.gather(*tasks)
    created_all.set()
    await asyncio.wait_for(poller, 300)
    return latencies


async def isolation(admin: KubeClient, clusters: list[Cluster]) -> tuple[int, int]:
    """Tenant t1 against t0, over HTTP with t1's credentials: (attempts, refused)."""
    victim, thief = clusters[0], clusters[1]
    victim_ip = ingress(victim.api, "svc-000")[0]["ip"]
    victim_node = node(0, 0)["status"]["addresses"][0]["address"]
    attempts = 0
    refused = 0

    async def forbidden(call: Any) -> None:
        nonlocal attempts, refused
        attempts += 1
        try:
            await call
        except ApiStatusError as err:
            refused += err.code == 403

    body = {"apiVersion": API, "kind": "TenantLoadBalancer"}
    await forbidden(thief.remote.list(TENANT_LOAD_BALANCERS, namespace="tenant-0"))
    await forbidden(thief.remote.list(TENANT_LOAD_BALANCERS))
    await forbidden(thief.remote.get(TENANTS, "t0"))
    await forbidden(thief.remote.patch(TENANTS, "t1", {"spec": {"quotas": {"addresses": 9999}}}))
    await forbidden(thief.remote.create(TENANT_LOAD_BALANCERS, {**body, "metadata": {
        "name": "x", "namespace": "tenant-0"}, "spec": {}}))  # fmt: skip
    await forbidden(thief.remote.delete(TENANT_LOAD_BALANCERS, "c0.default.svc-000", "tenant-0"))

    source = {"cluster": "c1", "namespace": "default", "name": "attack"}
    own_node = node(1, 0)["status"]["addresses"][0]["address"]
    backends = [{"node": "n0", "addresses": [own_node], "ready": True}]
    cases = [
        ("AddressNotAllocated", {"requestedIPs": [victim_ip], "ipFamilies": ["IPv6"]}),
        ("AddressNotAllocated", {"requestedIPs": ["2001:db8:1000::5"], "ipFamilies": ["IPv6"]}),
        ("BackendNotAllowed", {"backends": [{"node": "x", "addresses": [victim_node]}]}),
        ("BackendNotAllowed", {"backends": [{"node": "x", "addresses": ["2001:db8:ffff::1"]}]}),
        ("ModeNotAllowed", {"mode": "Gateway"}),
        ("QuotaExceeded", {"ports": [{"port": p} for p in range(1, 202)]}),
    ]
    names = []
    for n, (_, spec) in enumerate(cases):
        name = f"attack-{n}"
        names.append(name)
        await thief.remote.create(TENANT_LOAD_BALANCERS, {
            **body, "metadata": {"name": name, "namespace": "tenant-1"},
            "spec": {"source": source, "backends": backends, **spec}})  # fmt: skip

    async def verdicts() -> list[str | None]:
        out: list[str | None] = []
        for name in names:
            obj = await admin.get(TENANT_LOAD_BALANCERS, name, "tenant-1")
            reasons = [
                c["reason"]
                for c in obj.get("status", {}).get("conditions") or []
                if c["type"] == "Accepted" and c["status"] == "False"
            ]
            out.append(reasons[0] if reasons else None)
        return out

    got = await verdicts()
    deadline = time.perf_counter() + 30
    while not all(got) and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
        got = await verdicts()
    for (reason, _), verdict in zip(cases, got, strict=True):
        attempts += 1
        refused += verdict == reason
    still = ingress(victim.api, "svc-000")
    if not still or still[0]["ip"] != victim_ip:
        refused = 0  # the victim was disturbed: nothing counts as refused
    for name in names:
        await thief.remote.delete(TENANT_LOAD_BALANCERS, name, "tenant-1")
    return attempts, refused


async def churn(
    admin: KubeClient, cluster: Cluster, cycles: int, seed: int, tmp: Path
) -> tuple[int, int]:
    """Create/delete cycles while the real `teapot-lb tenant-agent` process of the cluster
    (taking over from the in-process agent) is SIGKILLed at random points and started
    again; returns the orphans once it settles, and the kills."""
    rng = random.Random(seed)
    names = [f"churn-{n:02d}" for n in range(15)]
    i = cluster.index
    await cluster.stop_agent()
    agent = Restartable(tenant_agent_command(tmp / f"tenant-{i}", tmp / f"remote-{i}", f"c{i}"))
    await agent.start()
    try:
        for cycle in range(cycles):
            name = rng.choice(names)
            if cluster.api.get("services", name, "default") is None:
                await cluster.admin.create(SERVICES, service(name))
            else:
                with contextlib.suppress(NotFound):
                    await cluster.admin.delete(SERVICES, name, "default")
            if rng.random() < 0.03:
                await asyncio.sleep(rng.random() * 0.5)  # let it be mid-work
                await agent.kill()
                await agent.start()
            elif cycle % 10 == 0:
                await asyncio.sleep(0.01)
        left = await settled_orphans(admin, cluster)
    finally:
        await agent.kill()
    return left, agent.kills - 1  # the last kill is the end of the run


async def settled_orphans(admin: KubeClient, cluster: Cluster) -> int:
    """Requests without their Service, Services without their request or status, or stuck
    in deletion, once the churn settles (or after 120 s)."""
    namespace = f"tenant-{cluster.index}"

    async def orphans() -> int:
        services = {
            s["metadata"]["name"]: s
            for s in cluster.api.list("services", "default")
            if s["metadata"]["name"] != "kubernetes"
        }
        listed = await admin.list(TENANT_LOAD_BALANCERS, namespace=namespace)
        requests = {
            r["spec"]["source"]["name"]
            for r in listed.items
            if not r["metadata"]["name"].startswith("attack")
        }
        stuck = sum(
            1
            for s in services.values()
            if s["metadata"].get("deletionTimestamp")
            or not s.get("status", {}).get("loadBalancer", {}).get("ingress")
        )
        return len(requests ^ set(services)) + stuck

    deadline = time.perf_counter() + 120
    left = await orphans()
    while left and time.perf_counter() < deadline:
        await asyncio.sleep(0.2)
        left = await orphans()
    return left


MANAGER_USER = "teapot-lb-manager"
WRITES = frozenset({"create", "update", "patch", "delete"})


class Audit:
    """The real apiserver's audit log, read on from where the last look stopped."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0
        self.writes: list[dict[str, Any]] = []  # the manager's, but its Lease's and Events'

    def read(self) -> int:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being written waits for the next look
        self.offset += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if (
                event.get("user", {}).get("username") == MANAGER_USER
                and event.get("verb") in WRITES
                and ref.get("resource") not in ("leases", "events")
            ):
                self.writes.append(event)
        return len(self.writes)

    async def quiet(self, seconds: float = 3.0, within: float = 300.0) -> None:
        """Until the manager has written nothing for `seconds`."""
        deadline = time.perf_counter() + within
        count, since = self.read(), time.perf_counter()
        while time.perf_counter() < deadline:
            await asyncio.sleep(0.5)
            if self.read() != count:
                count, since = len(self.writes), time.perf_counter()
            elif time.perf_counter() - since >= seconds:
                return
        raise RuntimeError(f"the manager kept writing for {within} s")


async def restart(
    plane: ControlPlane, kubeconfig: Path, port: int, tmp: Path, cluster: Cluster,
    manager: asyncio.subprocess.Process,
) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:  # fmt: skip
    """SIGKILL the quiet manager, start it again: seconds until a new Service is served,
    and what the new manager wrote to objects that did not change."""
    assert plane.audit_log is not None
    audit = Audit(plane.audit_log)
    await audit.quiet()
    before = len(audit.writes)
    manager.kill()
    await manager.wait()
    start = time.perf_counter()
    manager = await start_manager(kubeconfig, port, tmp / "manager-restarted.log")
    await wait_ready(port)
    await wait_leading(port)
    leading_s = time.perf_counter() - start
    await cluster.admin.create(SERVICES, service("after-restart"))
    if not await wait_until(lambda: ingress(cluster.api, "after-restart"), 60):
        raise RuntimeError("the restarted manager did not serve a new Service in 60 s")
    serving_s = time.perf_counter() - start
    await audit.quiet()
    new = f"c{cluster.index}.default.after-restart"
    tenant = tenant_name(cluster.index)
    unchanged = [
        e for e in audit.writes[before:]
        if e["objectRef"].get("name") not in (new, tenant)
    ]  # fmt: skip
    return manager, {
        "restart_to_leading_s": round(leading_s, 2),
        "restart_to_serving_s": round(serving_s, 2),
        "writes_after_restart": len(audit.writes) - before,
        "writes_for_unchanged": len(unchanged),
        "writes_for_unchanged_sample": [
            f"{e['verb']} {e['objectRef'].get('resource')}/{e['objectRef'].get('subresource', '')}"
            f" {e['objectRef'].get('namespace', '')}/{e['objectRef'].get('name')}"
            for e in unchanged[:5]
        ],
    }


async def start_real_management(tmp: Path) -> tuple[ControlPlane, Path, Path]:
    """The real control plane with the CRDs; (plane, the manager's kubeconfig, the
    agents' kubeconfig)."""
    plane = ControlPlane(tmp / "kube", controller_manager=False, audit=True)
    await asyncio.to_thread(plane.start)
    await asyncio.to_thread(plane.kubectl, "apply", "-f", str(CRDS))
    await asyncio.to_thread(
        plane.kubectl, "wait", "--for=condition=established", "crd", "--all", "--timeout=60s"
    )
    masters = ["system:masters"]
    manager = await asyncio.to_thread(plane.user_kubeconfig, MANAGER_USER, groups=masters)
    agents = await asyncio.to_thread(plane.user_kubeconfig, "teapot-lb-agents", groups=masters)
    return plane, manager, agents


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        plane: ControlPlane | None = None
        fake: asyncio.subprocess.Process | None = None
        if args.real_api:
            plane, kubeconfig, agents_config = await start_real_management(tmp)
        else:
            kubeconfig = agents_config = tmp / "management"
            fake = await start_management(kubeconfig, args.tenants)
        admin = await connect(kubeconfig, request_timeout_s=60.0)
        for ns in (CONFIG_NS, *(f"tenant-{i}" for i in range(args.tenants))):
            await admin.create(NAMESPACES, {"metadata": {"name": ns}})
        await admin.create(ADDRESS_POOLS, {
            "metadata": {"name": "bench", "namespace": CONFIG_NS},
            "spec": {"addresses": ["2001:db8:1000::/104"], "autoAssign": False}})  # fmt: skip
        for i in range(args.tenants):
            await admin.create(TENANTS, tenant_body(i, args.services))
        clusters = [await start_cluster(agents_config, tmp, i, plane) for i in range(args.tenants)]
        port = free_port()
        manager = await start_manager(kubeconfig, port, tmp / "manager.log")
        try:
            await wait_ready(port)
            await wait_leading(port)
            for cluster in clusters:
                cluster.start_agent()
            if not await wait_until(lambda: all(not c.agent.readiness() for c in clusters), 300):
                raise RuntimeError("the agents' caches did not sync")
            api_pid = fake.pid if fake is not None else plane.apiserver.pid  # type: ignore[union-attr]
            cpu0, fake0 = cpu_seconds(manager.pid), cpu_seconds(api_pid)
            bench0 = time.process_time()
            start = time.perf_counter()
            latencies = await load(clusters, args.services, args.rate)
            load_s = time.perf_counter() - start
            figures = {
                "manager_cpu_s": round(cpu_seconds(manager.pid) - cpu0, 1),
                "management_api_cpu_s": round(cpu_seconds(api_pid) - fake0, 1),
                "bench_process_cpu_s": round(time.process_time() - bench0, 1),
            }
            rss_mb = round(peak_rss_mb(manager.pid), 1)
            restarted: dict[str, Any] = {}
            if plane is not None:
                manager, restarted = await restart(
                    plane, kubeconfig, port, tmp, clusters[0], manager
                )
                cases = refused = 0  # RBAC: tests/tenancy/test_real_rbac.py
            else:
                cases, refused = await isolation(admin, clusters)
            orphans, kills = await churn(admin, clusters[2], args.churn, seed=7, tmp=tmp)
            return {
                "management_api": "kube-apiserver" if plane is not None else "fake",
                "tenants": args.tenants,
                "services": len(latencies),
                "rate_per_s": args.rate,
                "load_s": round(load_s, 1),
                "create_to_status_p50_s": round(percentile(latencies, 0.50), 3),
                "create_to_status_p99_s": round(percentile(latencies, 0.99), 3),
                "rss_mb": rss_mb,
                **figures,
                **restarted,
                "isolation_cases": cases,
                "isolation_refused": refused,
                "churn_cycles": args.churn,
                "churn_agent_kills": kills,
                "orphans_after_churn": orphans,
            }
        finally:
            for cluster in clusters:
                await cluster.stop_agent()
                await cluster.admin.close()
                await cluster.remote.close()
                await cluster.api.stop()
            await admin.close()
            for process in (manager, fake):
                if process is None:
                    continue
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
            if plane is not None:
                await asyncio.to_thread(plane.close)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--services", type=int, default=20, help="Services per tenant")
    parser.add_argument("--rate", type=float, default=100.0, help="Services created per second")
    parser.add_argument("--churn", type=int, default=1000, help="churn create/delete cycles")
    parser.add_argument("--real-api", action="store_true",
                        help="the management side on the real kube-apiserver (../shared/kube),"
                        " with a restart pass read from its audit log")  # fmt: skip
    args = parser.parse_args()
    if args.real_api and kube_missing():
        parser.error(f"--real-api: {kube_missing()}")
    log.configure(level="warning")
    if args.tenants < 3:
        parser.error("--tenants must be at least 3 (isolation and churn use t0, t1, t2)")
    figures = asyncio.run(run(args))
    print(f"tenants x services:          {figures['tenants']} x {args.services}")
    print(f"created at:                  {figures['rate_per_s']}/s ({figures['load_s']} s)")
    print(f"create -> IP in status p50:  {figures['create_to_status_p50_s']} s (goal <= 0.3)")
    print(f"create -> IP in status p99:  {figures['create_to_status_p99_s']} s (goal <= 1)")
    print(f"manager peak RSS:            {figures['rss_mb']} MB (goal <= 300)")
    print(f"CPU during load:             manager {figures['manager_cpu_s']} s, "
          f"management API {figures['management_api_cpu_s']} s, "
          f"agents + tenant APIs {figures['bench_process_cpu_s']} s")  # fmt: skip
    if args.real_api:
        print(f"restart -> serving:          {figures['restart_to_serving_s']} s (leading after "
              f"{figures['restart_to_leading_s']} s; goal <= 10)")  # fmt: skip
        print(f"writes for unchanged objects: {figures['writes_for_unchanged']} "
              f"{figures['writes_for_unchanged_sample']}")  # fmt: skip
    else:
        print(
            f"isolation attempts refused:  {figures['isolation_refused']}/"
            f"{figures['isolation_cases']}"
        )
    print(f"orphans after churn:         {figures['orphans_after_churn']} ({args.churn} cycles,"
          f" the agent process SIGKILLed {figures['churn_agent_kills']} times)")  # fmt: skip
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
