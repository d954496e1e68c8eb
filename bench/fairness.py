"""Fairness between tenants (issue 37, goal 2): a quiet tenant's change → served, timed
while a noisy tenant churns and while it does not, on the product's own path.

- `gateway`: the real `teapot-lb gateway` process with HAProxy (in a namespace), fed by the
  in-repo fake API server (its own process). The noisy tenant replaces its mirrored
  EndpointSlices at --gateway-rate changes/s; the quiet tenant's Ingress backend change
  (its EndpointSlice moved to the other backend) is timed until HAProxy answers from it.
- `relay`: the real `teapot-lb relay`, an upstream BIRD (the router) and one BIRD per
  tenant node. The noisy tenant sends --junk routes its filter rejects (outside its
  allocation), withdrawn and sent again; the quiet tenant's new route is timed until the
  router's table holds it.
- `manager`: the real `teapot-lb manager` process and the fake API server. The noisy tenant
  changes its TenantLoadBalancers at --manager-rate changes/s; the quiet tenant's new
  TenantLoadBalancer is timed until its status holds an address.

Each: --samples changes, p50/p99/max without noise, then with; `ratio_p99` = with / without
(the goal: ≤ 2). `api_write_p50_s` (gateway, manager): the quiet write's own answer time
without and with the noise, the part of the delay that is the (fake) API server's. The
drivers run in this process: on a small machine they take CPU from what they measure (the
achieved noise rates are printed). `--quick`: few samples, small sizes (the smoke test).

    .venv/bin/python bench/fairness.py [--only gateway,relay,manager] [--quick]

Last line JSON: per part, quiet/noisy p50_s, p99_s, max_s, ratio_p99 and the noise achieved;
`timed_out` (manager): the request not addressed within 60 s (counted as 60 s, the last).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_control as gc
import relay as rb
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import NotFound
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    ENDPOINT_SLICES,
    INGRESSES,
    NAMESPACES,
    TENANT_LOAD_BALANCERS,
    TENANTS,
    Resource,
)
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.measure import percentile
from teapot_lb.netlab import Topology, netns_available

TEAPOT_LB = str(Path(sys.executable).parent / "teapot-lb")
API = "lb.teapot.io/v1alpha1"
CONFIG_NS = "teapot-lb-system"
LIMIT_S = 60.0  # a manager sample not served by then is counted as this, and the last


def figures(values: list[float]) -> dict[str, float]:
    return {
        "p50_s": round(statistics.median(values), 4),
        "p99_s": round(percentile(values, 99) or 0.0, 4),
        "max_s": round(max(values), 4),
    }


def compare(quiet: list[float], noisy: list[float], **noise: Any) -> dict[str, Any]:
    q, n = figures(quiet), figures(noisy)
    return {"quiet": q, "noisy": n, "ratio_p99": round(n["p99_s"] / q["p99_s"], 2), **noise}


def show(part: str, result: dict[str, Any]) -> None:
    q, n = result["quiet"], result["noisy"]
    noise = {k: v for k, v in result.items() if k not in ("quiet", "noisy", "ratio_p99")}
    print(f"{part}: without noise p50 {q['p50_s'] * 1000:.1f} ms p99 {q['p99_s'] * 1000:.1f} ms;"
          f" with p50 {n['p50_s'] * 1000:.1f} ms p99 {n['p99_s'] * 1000:.1f} ms;"
          f" p99 ratio {result['ratio_p99']}  {noise}", flush=True)  # fmt: skip


def until(check: Callable[[], bool], limit_s: float, what: str, every: float = 0.002) -> float:
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > limit_s:
            raise RuntimeError(f"timed out after {limit_s:g} s waiting for {what}")
        time.sleep(every)
    return time.perf_counter() - started


async def until_async(
    check: Callable[[], Awaitable[bool]], limit_s: float, what: str, every: float = 0.005
) -> float:
    started = time.perf_counter()
    while not await check():
        if time.perf_counter() - started > limit_s:
            raise RuntimeError(f"timed out after {limit_s:g} s waiting for {what}")
        await asyncio.sleep(every)
    return time.perf_counter() - started


@contextlib.contextmanager
def fake_api(work: Path) -> Iterator[Path]:
    """The in-repo fake API server as a process of its own; its kubeconfig."""
    kubeconfig = work / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "teapot_lb.lab.fakeapi", "--kubeconfig", str(kubeconfig),
         "--bookmark-interval", "1"],
        stdout=subprocess.PIPE, stderr=(work / "fakeapi.log").open("wb"),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        yield kubeconfig
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def create_all(kubeconfig: Path, bodies: list[tuple[Resource, dict[str, Any]]]) -> None:
    async with await connect(kubeconfig) as client:
        for resource, body in bodies:
            await client.create(resource, body)


def namespace(name: str) -> tuple[Resource, dict[str, Any]]:
    return NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


class Noise:
    """`change(k)` called at `rate` per second (as many in flight as it takes), on its own
    thread and event loop, until stopped; counts what was done."""

    def __init__(self, kubeconfig: Path, rate: float,
                 change: Callable[[KubeClient, int], Awaitable[None]]) -> None:  # fmt: skip
        self.kubeconfig, self.rate, self.change = kubeconfig, rate, change
        self.done = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Noise:
        self._thread.start()
        time.sleep(0.5)  # under way before the first sample
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    @property
    def achieved(self) -> float:
        return round(self.done / self.seconds, 1) if self.seconds else 0.0

    async def _run(self) -> None:
        async with await connect(self.kubeconfig) as client:
            gate = asyncio.Semaphore(64)
            tasks: set[asyncio.Task[None]] = set()

            async def one(k: int) -> None:
                async with gate:
                    with contextlib.suppress(Exception):
                        await self.change(client, k)
                        self.done += 1

            started = time.perf_counter()
            k = 0
            while not self._stop.is_set():
                due = int((time.perf_counter() - started) * self.rate)
                while k < due:
                    if len(tasks) < 256:  # behind: the API (or this machine) is the limit
                        task = asyncio.create_task(one(k))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    k += 1
                await asyncio.sleep(0.005)
            self.seconds = time.perf_counter() - started
            await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------------------------ manager


def tenant_body(name: str, cidr: str, node_net: str, asn: int) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": "Tenant", "metadata": {"name": name},
        "spec": {"namespace": f"tenant-{name}", "asn": asn, "modes": ["Route"],
                 "nodeNetworks": [node_net],
                 "allocations": [{"addressPool": "tenants", "cidrs": [cidr]}],
                 "quotas": {"addresses": 256, "loadBalancers": 256, "ports": 512}},
    }  # fmt: skip


def tlb_body(tenant: str, name: str, node_ip: str, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": "TenantLoadBalancer",
        "metadata": {"name": name, "namespace": f"tenant-{tenant}"},
        "spec": {"source": {"cluster": "c1", "namespace": "default", "name": name,
                            "uid": f"uid-{tenant}-{name}"},
                 "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}],
                 "backends": [{"node": "n0", "addresses": [node_ip], "ready": ready}]},
    }  # fmt: skip


def manager_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    noisy_count = 20 if args.quick else 100
    with fake_api(work) as kubeconfig:
        bodies = [namespace(n) for n in (CONFIG_NS, "tenant-noisy", "tenant-quiet")]
        bodies.append((ADDRESS_POOLS, {
            "apiVersion": API, "kind": "AddressPool",
            "metadata": {"name": "tenants", "namespace": CONFIG_NS},
            "spec": {"addresses": ["198.51.100.0/24", "203.0.113.0/24"], "autoAssign": False},
        }))  # fmt: skip
        bodies.append((TENANTS, tenant_body("noisy", "198.51.100.0/25", "192.0.2.0/26", 64601)))
        bodies.append((TENANTS, tenant_body("quiet", "203.0.113.0/25", "192.0.2.64/26", 64602)))
        bodies += [(TENANT_LOAD_BALANCERS, tlb_body("noisy", f"n{i}", "192.0.2.11"))
                   for i in range(noisy_count)]  # fmt: skip
        asyncio.run(create_all(kubeconfig, bodies))
        teapot = [TEAPOT_LB]
        if args.profile is not None:  # cProfile while the noise runs (bench/relay.py's)
            teapot = [sys.executable, "-c", rb.PROFILED, str(args.profile)]
        argv = [*teapot, "--log-level", "warning", "manager", "--kubeconfig", str(kubeconfig),
                "--no-leader-elect", "--metrics-addr", f"127.0.0.1:{free_port()}",
                "--webhook-addr", f"127.0.0.1:{free_port()}"]  # fmt: skip
        with process(argv, work / "manager.log") as manager:

            async def addressed(client: KubeClient, name: str) -> bool:
                try:
                    obj = await client.get(TENANT_LOAD_BALANCERS, name, "tenant-quiet")
                except NotFound:
                    return False
                return bool((obj.get("status") or {}).get("addresses"))

            writes: dict[str, list[float]] = {}
            timed_out: list[str] = []

            async def samples(tag: str) -> list[float]:
                out = []
                async with await connect(kubeconfig) as client:
                    for k in range(args.samples):
                        name = f"q-{tag}-{k}"
                        started = time.perf_counter()
                        await client.create(TENANT_LOAD_BALANCERS,
                                            tlb_body("quiet", name, "192.0.2.71"))  # fmt: skip
                        writes.setdefault(tag, []).append(time.perf_counter() - started)
                        try:
                            await until_async(lambda n=name: addressed(client, n), LIMIT_S,
                                              f"{name}'s address")  # fmt: skip
                        except RuntimeError:  # counted as the limit; the next would wait too
                            out.append(LIMIT_S)
                            timed_out.append(name)
                            break
                        out.append(time.perf_counter() - started)
                        if args.verbose:
                            print(f"  manager {name}: {out[-1] * 1000:.1f} ms", flush=True)
                        await client.delete(TENANT_LOAD_BALANCERS, name, "tenant-quiet")
                        await asyncio.sleep(0.05)
                return out

            async def settled() -> None:
                async with await connect(kubeconfig) as client:
                    for i in range(noisy_count):
                        await until_async(lambda i=i: noisy_addressed(client, i), 120,
                                          "the noisy tenant's requests addressed")  # fmt: skip

            async def noisy_addressed(client: KubeClient, i: int) -> bool:
                obj = await client.get(TENANT_LOAD_BALANCERS, f"n{i}", "tenant-noisy")
                return bool((obj.get("status") or {}).get("addresses"))

            asyncio.run(settled())
            quiet = asyncio.run(samples("alone"))

            async def churn(client: KubeClient, k: int) -> None:
                # Its node's readiness flipped: the request's next hops (its status) change.
                patch = {"spec": {"backends": [{"node": "n0", "addresses": ["192.0.2.11"],
                                                "ready": k // noisy_count % 2 == 0}]}}  # fmt: skip
                await client.patch(TENANT_LOAD_BALANCERS, f"n{k % noisy_count}", patch,
                                   namespace="tenant-noisy")  # fmt: skip

            with Noise(kubeconfig, args.manager_rate, churn) as noise:
                if args.profile is not None:
                    manager.send_signal(signal.SIGUSR1)
                noisy = asyncio.run(samples("noise"))
                if args.profile is not None:
                    manager.send_signal(signal.SIGUSR2)
                    until(args.profile.exists, 60, "the manager's profile")
                    time.sleep(1.0)  # written in one go
    return compare(quiet, noisy, noise_rate_wanted=args.manager_rate,
                   noise_rate_achieved=noise.achieved,
                   api_write_p50_s=[round(statistics.median(writes[t]), 4)
                                    for t in ("alone", "noise")],
                   timed_out=timed_out)  # fmt: skip


# ------------------------------------------------------------------------------ gateway


def gateway_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    per_tenant = 10 if args.quick else 40
    tenants = 2  # t0 noisy, t1 quiet
    c = gc.cloud(per_tenant * tenants, tenants)
    quiet_t, noisy_t = 1, 0
    host = f"quiet.t{quiet_t}.example"
    with fake_api(work) as kubeconfig, Topology("fair") as topo:
        gw = topo.add_host("gw")
        gw.add_address("lo", f"{gc.ADDRESS}/32")
        for i, address in enumerate(gc.BACKENDS):
            gw.add_address("lo", f"{address}/32")
            gw.popen([sys.executable, "-c", gc.BACKEND_SERVER, address, "ab"[i]])
        bodies = [namespace(f"tenant-{t}") for t in range(tenants)]
        bodies += [(TENANTS, gc.tenant_body(t)) for t in range(tenants)]
        bodies += [(ENDPOINT_SLICES, s) for s in c.every_slice()]
        bodies += [(INGRESSES, gc.ingress_body(i % tenants, i)) for i in range(per_tenant * 2)]
        quiet_ingress = gc.ingress_body(quiet_t, 10_000)
        quiet_ingress["spec"]["rules"][0]["host"] = host
        quiet_ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] = "s0"
        quiet_ingress["spec"]["tls"] = []
        bodies.append((INGRESSES, quiet_ingress))
        asyncio.run(create_all(kubeconfig, bodies))
        teapot = [TEAPOT_LB]
        if args.profile is not None:  # cProfile while the noise runs (bench/relay.py's)
            teapot = [sys.executable, "-c", rb.PROFILED, str(args.profile)]
        argv = [*teapot, "--log-level", "warning", "gateway", "--kubeconfig", str(kubeconfig),
                "--address", str(gc.ADDRESS), "--state-dir", str(work / "state"),
                "--netns", gw.ns, "--metrics-addr", f"127.0.0.1:{free_port()}"]  # fmt: skip
        with process(argv, work / "gateway.log") as gateway:
            until(lambda: gc.get(gw.ns, host) == (200, "a"), 120, f"{host} served")
            writer = gc.Writer(kubeconfig)
            try:
                writes: list[float] = []

                def samples() -> list[float]:
                    out = []
                    for _ in range(args.samples):
                        moved = gc.endpoint_slice(quiet_t, 0, [gc.BACKENDS[1]])
                        started = time.perf_counter()
                        writer.replace(ENDPOINT_SLICES, moved)
                        writes.append(time.perf_counter() - started)
                        until(lambda: gc.get(gw.ns, host) == (200, "b"), 60, "the move")
                        out.append(time.perf_counter() - started)
                        if args.verbose:
                            print(f"  gateway: {out[-1] * 1000:.1f} ms", flush=True)
                        writer.replace(
                            ENDPOINT_SLICES, gc.endpoint_slice(quiet_t, 0, [gc.BACKENDS[0]])
                        )
                        until(lambda: gc.get(gw.ns, host) == (200, "a"), 60, "the move back")
                        time.sleep(0.05)
                    return out

                quiet = samples()
                quiet_writes, writes[:] = list(writes), []

                async def churn(client: KubeClient, k: int) -> None:
                    s = 2 * (k % 25)  # its 25 Services with endpoints, in turn
                    body = gc.endpoint_slice(noisy_t, s, [gc.BACKENDS[(k // 25) % 2]])
                    await client.patch(ENDPOINT_SLICES, body["metadata"]["name"],
                                       {"endpoints": body["endpoints"]},
                                       namespace=f"tenant-{noisy_t}")  # fmt: skip

                with Noise(kubeconfig, args.gateway_rate, churn) as noise:
                    if args.profile is not None:
                        gateway.send_signal(signal.SIGUSR1)
                    noisy = samples()
                    if args.profile is not None:
                        gateway.send_signal(signal.SIGUSR2)
                        until(args.profile.exists, 60, "the gateway's profile")
                        time.sleep(1.0)  # written in one go
            finally:
                writer.close()
    return compare(quiet, noisy, noise_rate_wanted=args.gateway_rate,
                   noise_rate_achieved=noise.achieved,
                   api_write_p50_s=[round(statistics.median(w), 4)
                                    for w in (quiet_writes, writes)])  # fmt: skip


# ------------------------------------------------------------------------------ relay


def junk_route(i: int) -> str:
    """Outside every tenant's allocation (2001:db8:1::/48 holds them): rejected."""
    return f"2001:db8:2:{i // 65536:x}::{i % 65536:x}/128"


def noisy_conf(junk: int) -> str:
    t, n = 0, 0
    own = rb.node(t, n)
    routes = "\n".join(f"  route {junk_route(i)} via {own};" for i in range(junk))
    return (
        f"log stderr all;\nrouter id 192.0.2.1;\nprotocol device {{}}\n"
        f"protocol static junk {{ disabled; ipv6;\n{routes}\n}}\n"
        f"protocol bgp relay {{ local {own} port 20000 as {rb.asn(t)};"
        f" neighbor {rb.RELAY} as {rb.RELAY_AS}; direct; ttl security on;"
        " hold time 90; connect retry time 2;"
        " ipv6 { import none; export all; next hop keep; }; }\n"
    )


def quiet_conf(samples: int) -> str:
    t, n = 1, 0
    own = rb.node(t, n)
    statics = "\n".join(
        f"protocol static q{k} {{ disabled; ipv6; route {rb.host_route(t, k + 1)} via {own}; }}"
        for k in range(samples)
    )
    return (
        f"log stderr all;\nrouter id 192.0.2.2;\nprotocol device {{}}\n{statics}\n"
        f"protocol bgp relay {{ local {own} port 20064 as {rb.asn(t)};"
        f" neighbor {rb.RELAY} as {rb.RELAY_AS}; direct; ttl security on;"
        " hold time 90; connect retry time 2;"
        " ipv6 { import none; export all; next hop keep; }; }\n"
    )


def relay_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    junk = 10_000 if args.quick else args.junk
    with Topology("fairr") as topo:
        switch = topo.add_switch("lan")
        hosts = {name: topo.add_host(name) for name in ("up", "relay", "tenants")}
        topo.connect(hosts["up"], switch, addrs=[f"{rb.UP}/64"])
        topo.connect(hosts["relay"], switch, addrs=[f"{rb.RELAY}/64"])
        topo.connect(hosts["tenants"], switch, addrs=[f"{rb.node(0, 0)}/64"])
        hosts["tenants"].run("ip", "address", "add", f"{rb.node(1, 0)}/64", "dev", "eth0")
        mdir = work / "manifests"
        mdir.mkdir()
        (mdir / "relay.yaml").write_text(yaml.safe_dump_all(rb.manifests(2, 1)))
        up = rb.Bird(hosts["up"], work / "up", rb.upstream_conf())
        birds = [up]
        relay = hosts["relay"].popen(
            [TEAPOT_LB, "--log-level", "debug" if args.verbose else "warning", "relay",
             "--manifests", str(mdir),
             "--asn", str(rb.RELAY_AS), "--router-id", "192.0.2.203", "--listen", ":179",
             "--metrics-addr", "", "--max-prefixes", str(junk + 1000)],
            stdout=subprocess.DEVNULL, stderr=(work / "relay.log").open("wb"),
        )  # fmt: skip
        try:
            until(lambda: up.established() == 1, 60, "the upstream session", every=0.2)
            samples = 2 * args.samples
            noisy = rb.Bird(hosts["tenants"], work / "noisy", noisy_conf(junk))
            quiet = rb.Bird(hosts["tenants"], work / "quiet", quiet_conf(samples))
            birds += [noisy, quiet]
            until(lambda: noisy.established() + quiet.established() == 2, 120,
                  "the tenants' sessions", every=0.2)  # fmt: skip

            def held(k: int) -> bool:
                return rb.host_route(1, k + 1).split("/")[0] in up.c(
                    f"show route {rb.host_route(1, k + 1)}"
                )

            def timed(k: int) -> float:
                quiet.c(f"enable q{k}")
                return until(lambda: held(k), 120, f"quiet route {k} upstream", every=0.005)

            def sample(k: int) -> float:
                at = time.strftime("%H:%M:%S")
                seconds = timed(k)
                if args.verbose:
                    print(f"  relay q{k} at {at}: {seconds * 1000:.1f} ms", flush=True)
                return seconds

            alone = []
            for k in range(args.samples):
                alone.append(sample(k))
                time.sleep(0.05)
            with_noise = []
            bursts = 0
            for k in range(args.samples, samples):
                noisy.c("enable junk")
                bursts += 1
                time.sleep(0.3)  # the junk under way (BIRD sends it in a few hundred ms)
                with_noise.append(sample(k))
                noisy.c("disable junk")
                time.sleep(0.3)
            return compare(alone, with_noise, junk_routes_per_burst=junk, bursts=bursts)
        finally:
            for b in birds:
                b.stop()
            relay.kill()
            relay.wait(timeout=10)


# ------------------------------------------------------------------------------ main

PARTS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "gateway": gateway_part,
    "relay": relay_part,
    "manager": manager_part,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(PARTS), help="parts, comma-separated")
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--gateway-rate", type=float, default=500.0)
    ap.add_argument("--manager-rate", type=float, default=500.0)
    ap.add_argument("--junk", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print every sample")
    ap.add_argument("--profile", type=Path, metavar="FILE",
                    help="run the gateway or manager under cProfile while the noise runs,"
                    " stats to FILE (one part at a time)")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    if args.quick:
        args.samples = min(args.samples, 6)
    parts = [p for p in args.only.split(",") if p]
    reason = netns_available()
    if reason and {"gateway", "relay"} & set(parts):
        sys.exit(f"bench/fairness.py needs root for the gateway and relay parts: {reason}")
    if "relay" in parts and not shutil.which("bird"):
        sys.exit("bench/fairness.py needs BIRD for the relay part")
    if "gateway" in parts and not shutil.which("haproxy"):
        sys.exit("bench/fairness.py needs HAProxy for the gateway part")
    out: dict[str, Any] = {"samples": args.samples, "quick": args.quick}
    work = Path(tempfile.mkdtemp(prefix="fairness-"))
    try:
        for part in parts:
            (work / part).mkdir()
            out[part] = PARTS[part](args, work / part)
            show(part, out[part])
    finally:
        if args.keep:
            print(f"work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
