"""Benchmark the controller: 10,000 LoadBalancer Services created against the fake API server.

Three processes: the fake API server (teapot_lb.lab.fakeapi), the real `teapot-lb controller`
command (leader-elected, as deployed) and this script, which creates the Services and
watches their status. Prints the time until every Service has an IP, the create→status
latency (from the create's response to the watch event showing the IP), the controller's
peak RSS (VmHWM) and each process's CPU time, so that a saturated fake server shows.

    .venv/bin/python bench/controller_scale.py [--services 10000] [--concurrency 32]

Last line, JSON: all_assigned_s, p50_s, p99_s, rss_mb (and more). Addresses come from
198.18.0.0/15 (RFC 2544, for benchmarks); nothing is sent on any network but loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import StreamCut
from teapot_lb.kube.resources import ADDRESS_POOLS, NAMESPACES, SERVICES

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
CONFIG_NAMESPACE = "teapot-lb-system"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values`, `q` a fraction (0.5 is the median; 50 is refused, not
    read as the maximum)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile: q={q} is not a fraction in [0, 1]")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def start_fake_api(kubeconfig: Path, history: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "teapot_lb.lab.fakeapi",
        "--kubeconfig",
        str(kubeconfig),
        "--history",
        str(history),
        "--bookmark-interval",
        "5",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.readline(), 30)  # its URL: it is listening
    return process


async def start_controller(
    kubeconfig: Path, metrics_port: int, log: Path
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        # The command as `teapot-lb controller` runs it (registered here until the CLI does).
        "from teapot_lb.cli import main\n"
        "from teapot_lb.cli.controller import controller\n"
        "main.commands.setdefault('controller', controller)\n"
        "main()",
        "--log-level",
        "warning",
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        "--config-namespace",
        CONFIG_NAMESPACE,
        "--identity",
        "bench",
        "--metrics-addr",
        f"127.0.0.1:{metrics_port}",
        "--webhook-addr",
        "",
        stderr=log.open("wb"),
    )


def warnings_in(log: Path) -> dict[str, int]:
    """How often the controller logged each warning (leadership lost, reconcile failed...)."""
    counts: dict[str, int] = {}
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("warning", "error"):
            event = str(entry.get("event"))
            counts[event] = counts.get(event, 0) + 1
    return counts


async def reconcile_count(metrics_port: int) -> float:
    """Service reconciles the controller ran (from its own /metrics)."""
    import aiohttp

    name = 'teapot_lb_controller_reconcile_duration_seconds_count{kind="service"}'
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp,
    ):
        for line in (await resp.text()).splitlines():
            if line.startswith(name):
                return float(line.split()[-1])
    return 0.0


async def wait_ready(metrics_port: int) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            try:
                async with session.get(f"http://127.0.0.1:{metrics_port}/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("controller never became ready")


def service(i: int) -> dict[str, object]:
    return {
        "metadata": {"name": f"svc-{i:05d}", "namespace": NAMESPACE},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    }


async def watch_assigned(
    kube: KubeClient, rv: str, seen: dict[str, float], done: asyncio.Event, total: int
) -> None:
    while True:
        stream = kube.watch(SERVICES, resource_version=rv, namespace=NAMESPACE, timeout_s=600)
        try:
            async for event in stream:
                meta = event.object.get("metadata", {})
                rv = meta.get("resourceVersion", rv)
                if event.type not in ("ADDED", "MODIFIED"):
                    continue
                status = event.object.get("status") or {}
                ingress = status.get("loadBalancer", {}).get("ingress")
                name = meta.get("name", "")
                if ingress and name not in seen:
                    seen[name] = time.perf_counter()
                    if len(seen) == total:
                        done.set()
                        return
        except StreamCut:
            continue  # a stream cut under load: resume from the last version seen


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        fake = await start_fake_api(kubeconfig, history=max(200_000, args.services * 6))
        controller = None
        try:
            kube = await connect(kubeconfig, request_timeout_s=60.0)
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await kube.create(NAMESPACES, {"metadata": {"name": CONFIG_NAMESPACE}})
            await kube.create(
                ADDRESS_POOLS,
                {
                    "metadata": {"name": "bench", "namespace": CONFIG_NAMESPACE},
                    "spec": {"addresses": ["198.18.0.0/15"]},
                },
            )
            metrics_port = free_port()
            controller_log = Path(tmp) / "controller.log"
            controller = await start_controller(kubeconfig, metrics_port, controller_log)
            await wait_ready(metrics_port)
            fake_cpu0, ctl_cpu0 = cpu_seconds(fake.pid), cpu_seconds(controller.pid)
            listed = await kube.list(SERVICES, namespace=NAMESPACE)
            seen: dict[str, float] = {}
            created: dict[str, float] = {}
            done = asyncio.Event()
            watcher = asyncio.create_task(
                watch_assigned(kube, listed.resource_version, seen, done, args.services)
            )
            next_index = iter(range(args.services))
            start = time.perf_counter()

            async def creator() -> None:
                for i in next_index:
                    obj = await kube.create(SERVICES, service(i))
                    created[obj["metadata"]["name"]] = time.perf_counter()

            await asyncio.gather(*(creator() for _ in range(args.concurrency)))
            created_s = time.perf_counter() - start
            await asyncio.wait_for(done.wait(), args.timeout)
            all_assigned = max(seen.values()) - start
            latencies = [max(0.0, seen[name] - t) for name, t in created.items()]
            watcher.cancel()
            await kube.close()
            reconciles = await reconcile_count(metrics_port)
            return {
                "services": float(args.services),
                "all_assigned_s": round(all_assigned, 2),
                "created_s": round(created_s, 2),
                "p50_s": round(percentile(latencies, 0.50), 3),
                "p99_s": round(percentile(latencies, 0.99), 3),
                "rss_mb": round(peak_rss_mb(controller.pid), 1),
                "controller_cpu_s": round(cpu_seconds(controller.pid) - ctl_cpu0, 1),
                "fake_api_cpu_s": round(cpu_seconds(fake.pid) - fake_cpu0, 1),
                "bench_client_cpu_s": round(time.process_time(), 1),
                "reconciles_per_service": round(reconciles / args.services, 2),
                "controller_warnings": warnings_in(controller_log),
            }
        finally:
            for process in (controller, fake):
                if process is not None and process.returncode is None:
                    process.terminate()
                    try:
                        await asyncio.wait_for(process.wait(), 10)
                    except TimeoutError:
                        process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32, help="parallel creates")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    print(f"services created:            {args.services} in {figures['created_s']} s")
    print(f"all assigned after:          {figures['all_assigned_s']} s (goal <= 60 s)")
    print(f"create->status latency:      p50 {figures['p50_s']} s, p99 {figures['p99_s']} s")
    print(f"controller peak RSS:         {figures['rss_mb']} MB (goal <= 300 MB)")
    print(
        f"CPU during the run:          controller {figures['controller_cpu_s']} s, "
        f"fake API server {figures['fake_api_cpu_s']} s, this client "
        f"{figures['bench_client_cpu_s']} s (2 shared cores)"
    )
    print(f"controller warnings:         {figures['controller_warnings'] or 'none'}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
