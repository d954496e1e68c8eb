"""Issue 38's Measure: a tenant's load balancer provider by provider, side by side
(`--providers`, all by default), each on the product's path, as root:

- `route`: bench/providers_route.py (the lab's teapot route flow: manager, tenant agent,
  announcer, BIRD; its docstring says what each figure times);
- `proxy`: bench/providers_proxy.py (the manager with the gateway's control plane beside
  it, as `teapot-lb manager --gateway-address` runs it, and the real `teapot-lb gateway`
  process with HAProxy in a namespace; its docstring says what each figure times);
- `octavia-ovn`: the manager (`KubeManager`, in-process, on the in-repo fake API server)
  with the provider built from its config file as `teapot-lb manager --provider
  octavia=FILE` builds it, against the real Octavia with the real ovn-octavia-provider on
  a real OVN (lab/octavia_ovn.py).

The octavia-ovn figures, per run (`--runs`, 5 by default, 20 in the issue):

- create: a TenantLoadBalancer (TCP 80 → m1 and m2 at 8080) created → Programmed True
  (`programmed_s`) and → the first answer through its VIP from a client behind the
  Neutron router (`first_request_s`); each run prints the provider's calls to Octavia
  from the create on, each sent..answered in seconds (where a create's time goes);
- member change: m1 removed from the request → 8 new connections in a row answered by
  m2 only (`moved_s`), and where that time goes, each from the request's replace
  answered: the manager's ensure called (`seen_s`), the provider's call on the pool's
  members sent (`put_sent_s`) and answered (`put_answered_s`), the Northbound Load_Balancer row
  without m1 (`nb_row_s`), `ovn-nbctl --wait=hv sync` returned once it was (every
  chassis caught up, `hv_synced_s`), and the load balancer ACTIVE again (`active_s`;
  the Northbound polled every 20 ms, Octavia every 100 ms, from a thread of their own;
  the provider's calls are timed by a wrapper around its API object, the bench's
  instrument);
- delete: the request deleted → no Octavia load balancer tagged with its uid and no
  Northbound Load_Balancer row (`gone_s`).

Then the manager's RSS (the bench's own process: the manager runs in it, with the fake API
server and the client's thread; `manager_rss_mb`). The client is polled every 50 ms.

    .venv/bin/python bench/providers.py [--runs 5] [--providers route,proxy,octavia-ovn]

Last line, JSON, by provider (a provider this machine cannot run: {"skipped": why}), for
octavia-ovn: programmed_p50_s, programmed_max_s, first_request_p50_s,
first_request_max_s, moved_p50_s, moved_max_s, gone_p50_s, gone_max_s, the member
change's parts (seen, put_sent, put_answered, nb_row, hv_synced, active: p50 and max),
manager_rss_mb, load_before and load_after (1-minute load average); and runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller_scale import percentile
from octavia_ovn_stack import stack_up
from providers_proxy import first_address, is_programmed, proxy_missing, proxy_runs
from providers_route import route_missing, route_runs
from teapot_lb.cli.manager import external_providers
from teapot_lb.controller.kube_runner import running as component
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.client import Client
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.neutron_nets import host_port, routed
from teapot_lb.lab.octavia_ovn import OctaviaOVN, rss_mb
from teapot_lb.lab.octavia_ovn import missing as octavia_missing
from teapot_lb.lab.octavia_stack import connection
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.ovnstack import missing as ovn_missing
from teapot_lb.lab.processes import start_workload
from teapot_lb.lab.teapot_octavia import provider_config
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.netlab import netns_available
from teapot_lb.providers.base import LoadBalancerSpec, ProviderStatus, owner_tag
from teapot_lb.providers.octavia import OctaviaProvider

WITHIN = 120.0
EVERY = 0.05
NS, CONFIG_NS, API = "tenant-acme", "teapot-lb-system", "lb.teapot.io/v1alpha1"
VIPS = "198.51.100.96/28"
MEMBERS = {"m1": "198.51.100.41", "m2": "198.51.100.42"}
PARTS = ("seen", "put_sent", "put_answered", "nb_row", "hv_synced", "active")
WATCH_EVERY = 0.02
OCTAVIA_EVERY = 5  # Octavia's API is looked at every 5th watch (100 ms): it serves one
# request at a time here (wsgiref), and the provider's own calls must not queue behind ours


async def until(check: Callable[[], object], what: str) -> float:
    """Seconds until `check()` is true (run in a thread: the manager's loop goes on)."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        if time.monotonic() - started > WITHIN:
            raise TimeoutError(f"no {what} within {WITHIN:g} s")
        await asyncio.sleep(EVERY)
    return time.monotonic() - started


class Calls:
    """The provider's ensures and its calls to Octavia, timed (the bench's instrument:
    wrappers set on the provider object the manager was given)."""

    def __init__(self, provider: OctaviaProvider) -> None:
        self.ensures: list[float] = []
        self.requests: list[tuple[float, float, str, str]] = []  # started, ended, method, path
        request, ensure = provider.api.request, provider.ensure

        def timed(method: str, path: str, body: Any = None, params: Any = None) -> Any:
            started = time.monotonic()
            try:
                return request(method, path, body, params)
            finally:
                self.requests.append((started, time.monotonic(), method, path))

        async def ensured(spec: LoadBalancerSpec) -> ProviderStatus:
            self.ensures.append(time.monotonic())
            return await ensure(spec)

        provider.api.request = timed  # type: ignore[method-assign]
        provider.ensure = ensured  # type: ignore[method-assign]

    def since(self, started: float) -> str:
        """The calls begun after `started`, each as `METHOD last-path-part sent..answered`
        (seconds from `started`), to see where a create's time goes."""
        return "; ".join(
            f"{method} {path.rstrip('/').rsplit('/', 1)[-1][:14]} "
            f"{a - started:.2f}..{b - started:.2f}"
            for a, b, method, path in list(self.requests)
            if a >= started
        )

    def put(self, since: float) -> tuple[float, float] | None:
        """The first call on a pool's members (a batch PUT or one member's DELETE) begun
        after `since`: (sent, answered)."""
        for started, ended, method, path in list(self.requests):
            if started >= since and method in ("PUT", "DELETE") and "/members" in path:
                return started, ended
        return None


class MemberWatch(threading.Thread):
    """From its start: when the Northbound row of load balancer `lb` lost `address`,
    when `ovn-nbctl --wait=hv sync` returned after that, and when Octavia said ACTIVE
    again once the members' call was answered (monotonic times)."""

    def __init__(self, conn: Any, ovn: OVNStack, calls: Calls, lb: str, address: str) -> None:
        super().__init__(daemon=True)
        self.conn, self.ovn, self.calls, self.lb, self.address = conn, ovn, calls, lb, address
        self.since = time.monotonic()
        self.at: dict[str, float] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        synced: threading.Thread | None = None
        looks = 0
        while not self.stopped.is_set() and not {"nb_row", "active"} <= set(self.at):
            if "nb_row" not in self.at:
                vips = self.ovn.nbctl("--bare", "--columns=vips", "find", "load_balancer",
                                      f"name={self.lb}")  # fmt: skip
                if vips.strip() and self.address not in vips:
                    self.at["nb_row"] = time.monotonic()
                    synced = threading.Thread(target=self._sync, daemon=True)
                    synced.start()
            put = self.calls.put(self.since)
            looks += 1
            if (
                "active" not in self.at
                and put is not None
                and time.monotonic() > put[1]
                and looks % OCTAVIA_EVERY == 0
            ):
                status = self.conn.get_load_balancer(self.lb).provisioning_status
                if status == "ACTIVE":
                    self.at["active"] = time.monotonic()
            self.stopped.wait(WATCH_EVERY)
        if synced is not None:
            synced.join(60)

    def _sync(self) -> None:
        try:
            self.ovn.nbctl("--wait=hv", "--timeout=30", "sync", timeout=40)
        except RuntimeError as err:  # (a chassis that never catches up: no figure)
            print(f"  hv sync: {err}", flush=True)
            return
        self.at["hv_synced"] = time.monotonic()


def objects() -> list[dict[str, Any]]:
    """The AddressPool and the Tenant acme (providers: octavia) the manager reads."""
    pool = {"apiVersion": API, "kind": "AddressPool",
            "metadata": {"name": "octavia-vips", "namespace": CONFIG_NS},
            "spec": {"addresses": [VIPS], "autoAssign": False}}  # fmt: skip
    tenant = {"apiVersion": API, "kind": "Tenant", "metadata": {"name": "acme"},
              "spec": {"namespace": NS, "modes": ["Route"], "asn": 64516,
                       "allocations": [{"addressPool": "octavia-vips", "cidrs": [VIPS]}],
                       "quotas": {"addresses": 4, "loadBalancers": 4, "ports": 4},
                       "nodeNetworks": ["198.51.100.32/28"], "providers": ["octavia"],
                       "defaultProvider": "octavia"}}  # fmt: skip
    return [pool, tenant]


def request(name: str, *nodes: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TenantLoadBalancer",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"source": {"cluster": "c1", "namespace": "default", "name": name,
                                "uid": f"uid-{name}"},
                     "ports": [{"protocol": "TCP", "port": 80, "nodePort": 8080}],
                     "backends": [{"node": n, "addresses": [MEMBERS[n]], "ready": True}
                                  for n in nodes]}}  # fmt: skip


async def runs(stack: OctaviaOVN, ovn: OVNStack, work: Path, count: int) -> dict[str, Any]:
    neutron = stack.neutron
    members, clients = routed(neutron, "bench")
    workloads = [start_workload(host_port(neutron, ovn, n, members, a), n, 8080)
                 for n, a in MEMBERS.items()]  # fmt: skip
    client = Client(host_port(neutron, ovn, "bc1", clients, "192.0.2.41").ns)
    conn = connection(stack.stack).load_balancer
    config = work / "octavia.yaml"
    config.write_text(yaml.safe_dump(provider_config(stack.octavia_url, members["id"])))
    api = FakeApiServer(bookmark_interval=0.5, seed_namespaces=("default", CONFIG_NS, NS))
    await api.start()
    names = ("programmed", "first", "moved", "gone", *PARTS)
    figures: dict[str, list[float]] = {k: [] for k in names}
    try:
        api.add_token("fake-token")  # (the token write_kubeconfig writes)
        api.write_kubeconfig(work / "management")
        for body in objects():
            api.seed(body)
        assert api.kubeconfig_path is not None
        providers = external_providers((f"octavia={config}",))
        octavia = providers["octavia"]
        assert isinstance(octavia, OctaviaProvider)
        calls = Calls(octavia)
        async with await connect(api.kubeconfig_path, request_timeout_s=5.0) as admin:
            settings = ManagerConfig(
                config_namespace=CONFIG_NS,
                providers=providers,
                provider_retry_base_s=0.2,
                provider_retry_cap_s=2.0,
            )
            async with component(KubeManager(admin, settings, watch_timeout_s=30)):
                failed = None
                for i in range(count):
                    try:
                        await one_run(api, admin, client, conn, ovn, calls, f"web{i}", figures)
                    except TimeoutError as err:  # the runs made so far are still figures
                        failed = f"web{i}: {err}"
                        break
                rss = rss_mb(os.getpid())
    finally:
        await api.stop()
        client.close()
        for workload in workloads:
            workload.terminate()
            workload.wait(10)
    out: dict[str, Any] = {}
    for name, values in figures.items():
        if not values:
            continue
        label = "first_request" if name == "first" else name
        out[f"{label}_p50_s"] = round(percentile(values, 0.5), 3)
        out[f"{label}_max_s"] = round(max(values), 3)
    out["manager_rss_mb"] = rss
    out["completed"] = len(figures["gone"])
    if failed is not None:
        out["failed"] = failed
    return out


async def one_run(
    api: FakeApiServer, admin: Any, client: Client, conn: Any, ovn: OVNStack, calls: Calls,
    name: str, figures: dict[str, list[float]],
) -> None:  # fmt: skip
    def obj() -> dict[str, Any]:
        return api.get("tenantloadbalancers", name, NS) or {}

    started = time.monotonic()
    created = await admin.create(TENANT_LOAD_BALANCERS, request(name, "m1", "m2"))
    uid = created["metadata"]["uid"]
    vip = ""

    def answered() -> bool:
        nonlocal vip
        vip = first_address(obj())
        return bool(vip) and client.get(vip, 80).node is not None

    await until(lambda: is_programmed(obj()), "Programmed")
    figures["programmed"].append(time.monotonic() - started)
    await until(answered, "answer on the VIP")
    figures["first"].append(time.monotonic() - started)
    print(f"  {name}: created, the provider's calls until Programmed "
          f"({figures['programmed'][-1]:.3f} s), first answer {figures['first'][-1]:.3f} s: "
          + calls.since(started), flush=True)  # fmt: skip
    lb_ids = [lb.id for lb in conn.load_balancers(tags=owner_tag(uid))]
    body = await admin.get(TENANT_LOAD_BALANCERS, name, NS)
    body["spec"]["backends"] = request(name, "m2")["spec"]["backends"]
    watch = MemberWatch(conn, ovn, calls, lb_ids[0], f"{MEMBERS['m1']}:8080")
    watch.start()
    await admin.replace(TENANT_LOAD_BALANCERS, body)
    replaced = time.monotonic()
    figures["moved"].append(
        await until(lambda: {a.node for a in client.burst(vip, 80, 8)} == {"m2"}, "m2 only")
    )
    await asyncio.to_thread(watch.join, WITHIN)
    watch.stopped.set()
    seen = [t for t in calls.ensures if t >= watch.since]
    put = calls.put(watch.since)
    at = watch.at | ({"seen": seen[0]} if seen else {})
    at |= {"put_sent": put[0], "put_answered": put[1]} if put else {}
    for part in PARTS:
        if part in at:
            figures[part].append(at[part] - replaced)
    print(
        f"  {name}: moved {figures['moved'][-1]:.3f} s; "
        + ", ".join(f"{p} {at[p] - replaced:.3f}" for p in PARTS if p in at),
        flush=True,
    )
    await admin.delete(TENANT_LOAD_BALANCERS, name, NS)

    def gone() -> bool:
        if list(conn.load_balancers(tags=owner_tag(uid))):
            return False
        return not any(
            ovn.nbctl("--bare", "--columns=_uuid", "find", "load_balancer", f"name={i}").strip()
            for i in lb_ids
        )

    figures["gone"].append(await until(gone, "load balancer and row gone"))


def octavia_ovn(count: int, workdir: Path) -> dict[str, Any]:
    with stack_up(workdir, "provb") as (ovn, stack, _, work):
        return asyncio.run(runs(stack, ovn, work, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--providers", default=",".join(PROVIDERS),
                        help=f"comma-separated, of {', '.join(PROVIDERS)}")  # fmt: skip
    parser.add_argument("--workdir", type=Path, help="keep the logs there (default: a temp dir)")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for name in args.providers.split(","):
        if name not in PROVIDERS:
            parser.error(f"--providers: {name!r} is not one of {', '.join(PROVIDERS)}")
        reason = PROVIDERS[name][0]()
        if reason:
            out[name] = {"skipped": reason}
            continue
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix=f"tlb-{name}-bench-") as tmp:
            work = args.workdir / name if args.workdir else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            figures = PROVIDERS[name][1](args.runs, work)
        out[name] = figures | {"load_before": round(load, 2),
                               "load_after": round(os.getloadavg()[0], 2)}  # fmt: skip
        print(f"{name}, {args.runs} runs (p50 / max, s):")
        for part in ("programmed", "first_request", "moved", *PARTS, "gone"):
            if f"{part}_p50_s" in figures:
                print(f"  {part:<14} {figures[f'{part}_p50_s']:7.3f} "
                      f"{figures[f'{part}_max_s']:7.3f}")  # fmt: skip
        print(f"  manager RSS    {figures['manager_rss_mb']:.1f} MB", flush=True)
    print(json.dumps(out | {"runs": args.runs}))


PROVIDERS: dict[str, tuple[Callable[[], str | None], Callable[[int, Path], dict[str, Any]]]] = {
    "route": (route_missing, route_runs),
    "proxy": (proxy_missing, proxy_runs),
    "octavia-ovn": (
        lambda: netns_available() or ovn_missing() or octavia_missing(),
        octavia_ovn,
    ),
}


if __name__ == "__main__":
    main()
