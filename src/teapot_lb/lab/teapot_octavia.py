"""The lab's ``octavia`` group: a tenant's Service served by OpenStack Octavia with the real
``ovn-octavia-provider`` on a real OVN, beside a Service of the same tenant in route mode,
driven end to end through the real ``teapot-lb manager --provider octavia=FILE`` and the
real ``teapot-lb tenant-agent`` processes (docs/lab.md, docs/teapot.md "Providers").

    client c1 (192.0.2.51) ── Neutron router ── members' network 198.51.100.0/24
      (its own network)      (203.0.113.0/29       ├─ m1 198.51.100.51 ┐ tenant acme's nodes:
                              via r1)              ├─ m2 198.51.100.52 ┘ HTTP, nodePorts and 80
                                                   ├─ r1 198.51.100.60   BIRD (ECMP into its FIB)
                                                   ├─ s1 198.51.100.61   the management speaker
                                                   └─ the VIPs (acme's allocation .112/28)

Every host is a namespace bound to a Neutron port. The stack
(:mod:`teapot_lb.lab.octavia_ovn`: Keystone, Neutron ML2/OVN, Octavia 19 with the ``ovn``
provider, PostgreSQL) is the group's own, or one already running handed to it
(:class:`OpenStack`: the test suite's session stack, so a test does not start a second one).
The management and tenant clusters are the in-repo fake API server, both served from a
thread of the lab; the manager and the agent are processes in the root namespace, the
management speaker (``teapot-lb speaker --tenancy``) runs in s1 and reaches the management
API through :class:`~teapot_lb.lab.kubeplane.Forwarder`.

Each part is reported by name (:meth:`OctaviaResult.parts`):

- ``octavia``: Service default/web (``lb.teapot.io/provider: octavia``) written → its
  address in the Service's status (agent → TenantLoadBalancer → manager → Octavia → OVN),
  then the client's requests through the VIP answered by m1 and m2;
- ``route``: Service default/api (no annotation: the Tenant's default provider, route) gets
  its address (from acme's route pool) and its request next hops m1 and m2, no Octavia
  load balancer; s1 announces it to r1 (ADD-PATH), r1's FIB holds it via m1 and m2, and
  the client is answered by both;
- ``member_change``: m1's endpoint of web no longer ready → the client served by m2 alone;
- ``restart``: the manager SIGKILLed, m1's endpoint ready again meanwhile, the manager
  started again → both serve again, through the one load balancer tagged with the
  request's uid (no duplicate);
- ``deletion``: web deleted → no Octavia load balancer tagged with its uid, no Northbound
  Load_Balancer row, no VIP port.

Neutron's router speaks no BGP: the operator's BGP router is r1, and Neutron's router
has an extra route for acme's route pool via r1 (what a site with a BGP edge router
beside its OpenStack routers would configure).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from teapot_lb.lab.client import Client
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.groups import run_group
from teapot_lb.lab.kubeplane import FORWARD_PORT, Forwarder
from teapot_lb.lab.neutron_nets import host_port, routed, rows
from teapot_lb.lab.neutron_server import NOAUTH_PROJECT
from teapot_lb.lab.octavia import config, tenant
from teapot_lb.lab.octavia_ovn import OctaviaOVN, running
from teapot_lb.lab.octavia_ovn import missing as openstack_missing
from teapot_lb.lab.octavia_stack import connection
from teapot_lb.lab.ovnstack import OVNStack
from teapot_lb.lab.ovnstack import missing as ovn_missing
from teapot_lb.lab.processes import log_tail, start_workload, tenant_agent_command
from teapot_lb.lab.router import Bird, RouterConfig, Session, fib_next_hops
from teapot_lb.lab.teapot import cluster_docs, endpoints_doc, service_doc
from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.model.service import ANNOTATION_IPS, ANNOTATION_PROVIDER
from teapot_lb.netlab import Host, Topology
from teapot_lb.providers.base import owner_tag
from teapot_lb.tenancy.request import request_name

T = TypeVar("T")
Progress = Callable[[str], None]

CONFIG_NS = "teapot-lb-system"
TENANT, NAMESPACE, CLUSTER = "acme", "tenant-acme", "c1"
AGENT_TOKEN = "agent-acme"
NODES = {"m1": "198.51.100.51", "m2": "198.51.100.52"}
NODE_NETWORK = "198.51.100.48/29"
CLIENT = "192.0.2.51"
VIPS = "198.51.100.112/28"  # acme's allocation: inside the members' subnet (the VIP subnet)
VIP = "198.51.100.112"  # web's (requested: the allocation it comes from is not left to chance)
ROUTE_POOL, ROUTE_IP = "203.0.113.0/29", "203.0.113.5"  # acme's other allocation; api's IP
ROUTER, SPEAKER = "198.51.100.60", "198.51.100.61"  # the BGP router, the management speaker
ROUTER_ASN, MANAGEMENT_ASN = 64500, 64512
NODE_PORTS = {"web": 30080, "api": 30081}
OCTAVIA_SERVICE, ROUTE_SERVICE = "web", "api"
WITHIN = 180.0  # one step on the 2-core machine under load (Octavia and OVN lag there)
BURST = 16  # requests, each from a new source port: both members answer one of them
TEAPOT_LB = str(Path(sys.executable).parent / "teapot-lb")
_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"


@dataclass(frozen=True)
class OpenStack:
    """A stack already running (the test suite's): the OVN and OpenStack on it."""

    ovn: OVNStack
    openstack: OctaviaOVN


# ------------------------------------------------------------------------ the result


@dataclass
class OctaviaServed:
    """Part ``octavia``: the Service through the agent, the manager, Octavia and OVN."""

    ip: str | None = None
    load_balancer: str | None = None  # the Octavia load balancer's id
    create_to_address_s: float | None = None
    create_to_served_s: float | None = None
    answered_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ip is not None and self.answered_by == sorted(NODES)


@dataclass
class RouteBeside:
    """Part ``route``: the tenant's other Service, the default provider's (route)."""

    ip: str | None = None
    next_hops: list[str] = field(default_factory=list)
    octavia_load_balancers: int | None = None  # tagged with its request's uid
    reached_s: float | None = None  # Service written → the client answered through r1
    fib_next_hops: list[str] = field(default_factory=list)  # r1's kernel route to the IP
    answered_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.ip is not None
            and self.next_hops == sorted(NODES.values()) == self.fib_next_hops
            and self.octavia_load_balancers == 0
            and self.answered_by == sorted(NODES)
        )


@dataclass
class MemberChange:
    """Part ``member_change``: m1's endpoint no longer ready → m2 alone serves."""

    moved_s: float | None = None
    answered_by: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.moved_s is not None and self.answered_by == ["m2"]


@dataclass
class ManagerRestart:
    """Part ``restart``: the manager SIGKILLed, a change made, the manager started again."""

    served_s: float | None = None  # started again → both members answer
    answered_by: list[str] = field(default_factory=list)
    load_balancers: int | None = None  # tagged with the request's uid afterwards

    @property
    def ok(self) -> bool:
        return self.answered_by == sorted(NODES) and self.load_balancers == 1


@dataclass
class OctaviaDeletion:
    """Part ``deletion``: the Service deleted → nothing left in Octavia nor OVN."""

    deleted_s: float | None = None
    load_balancers: int | None = None
    northbound_rows: int | None = None  # Load_Balancer rows and the VIP's port

    @property
    def ok(self) -> bool:
        return self.deleted_s is not None and self.load_balancers == 0 == self.northbound_rows


@dataclass
class OctaviaResult:
    stack: str = "own"  # "own": the group started it; "shared": one handed to it
    stack_start_s: float | None = None
    octavia: OctaviaServed = field(default_factory=OctaviaServed)
    route: RouteBeside = field(default_factory=RouteBeside)
    member_change: MemberChange = field(default_factory=MemberChange)
    restart: ManagerRestart = field(default_factory=ManagerRestart)
    deletion: OctaviaDeletion = field(default_factory=OctaviaDeletion)
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None

    def parts(self) -> dict[str, bool]:
        """Each part by name and whether it held."""
        return {
            "octavia": self.octavia.ok,
            "route": self.route.ok,
            "member_change": self.member_change.ok,
            "restart": self.restart.ok,
            "deletion": self.deletion.ok,
        }

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return not self.errors
        return not self.errors and all(self.parts().values())


# ------------------------------------------------------------------------ the clusters


def endpoints(name: str, ready: Iterable[str]) -> dict[str, Any]:
    """Service `name`'s EndpointSlice: a pod on m1 and m2, ready on `ready`."""
    return endpoints_doc(name, NODES, ready=set(ready))


def management_docs() -> list[dict[str, Any]]:
    """The operator's pools ``octavia`` (the VIPs) and ``tenants`` (route mode's,
    advertised by BGP to the router), Tenant acme holding a part of each (providers octavia
    and route, route the default), the management speaker's Node s1 and its BGPPeer."""
    acme = tenant(TENANT, NAMESPACE, NOAUTH_PROJECT, VIPS, modes=["Route"],
                  nodeNetworks=[NODE_NETWORK], providers=["octavia", "route"],
                  defaultProvider="route")  # fmt: skip
    acme["spec"]["allocations"].append({"addressPool": "tenants", "cidrs": [ROUTE_POOL]})
    peer = {"myASN": MANAGEMENT_ASN, "peerASN": ROUTER_ASN, "peerAddress": ROUTER,
            "holdTime": "9s", "addPath": "send"}  # fmt: skip
    return [
        config("AddressPool", "octavia", {"addresses": [VIPS], "autoAssign": False}),
        config("AddressPool", "tenants", {"addresses": [ROUTE_POOL], "autoAssign": False}),
        config("BGPPeer", "router", peer),
        config("BGPAdvertisement", "tenants", {"addressPools": ["tenants"]}),
        *cluster_docs({"s1": SPEAKER}, with_service=False),
        acme,
    ]


def provider_config(octavia_url: str, subnet: str) -> dict[str, Any]:
    """The octavia provider's config file (docs/octavia.md): noauth Octavia, VIPs on the
    members' subnet, no health monitor (the lab's ports have no port security, so OVN
    has no address to find a monitored member by: it would be ERROR)."""
    return {
        "auth": {"type": "noauth", "endpoint": octavia_url},
        "provider": "ovn",
        "vipSubnet": subnet,
        "tenants": {TENANT: {"project": NOAUTH_PROJECT}},
        "healthMonitor": {"enabled": False},
    }


class Clusters:
    """The management and the tenant cluster (fake API servers) on an event loop in a
    thread; every call on them runs on that loop (the servers are not thread-safe)."""

    def __init__(self, work: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.started: list[FakeApiServer] = []
        self.management = self._server(("default", CONFIG_NS, NAMESPACE))
        self.management.add_token("fake-token")
        self.management.add_token(AGENT_TOKEN, [NAMESPACE])
        self.manager_config = self.management.write_kubeconfig(work / "management.kubeconfig")
        self.agent_config = self.management.write_kubeconfig(
            work / "agent-management.kubeconfig", namespace=NAMESPACE, token=AGENT_TOKEN
        )
        self.tenant = self._server(("default",))
        self.tenant_config = self.tenant.write_kubeconfig(work / "tenant.kubeconfig")

    def _server(self, namespaces: tuple[str, ...]) -> FakeApiServer:
        api = self.call(lambda: FakeApiServer(bookmark_interval=0.5, seed_namespaces=namespaces))
        self.run(api.start())
        self.started.append(api)
        return api

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def call(self, fn: Callable[[], T]) -> T:
        async def inside() -> T:
            return fn()

        return self.run(inside())

    def seed(self, api: FakeApiServer, *objs: dict[str, Any]) -> None:
        for obj in objs:
            self.call(functools.partial(api.seed, obj))

    def put(self, api: FakeApiServer, obj: dict[str, Any]) -> None:
        self.call(lambda: api.put(obj))

    def delete(self, api: FakeApiServer, resource: str, name: str, namespace: str) -> None:
        self.call(lambda: api.delete(resource, name, namespace))

    def request(self, name: str) -> dict[str, Any]:
        """Service `name`'s TenantLoadBalancer in the management cluster ({}: none)."""
        found = self.call(lambda: self.management.get(
            "tenantloadbalancers", request_name(CLUSTER, "default", name), NAMESPACE))  # fmt: skip
        return found or {}

    def service_ip(self, name: str) -> str | None:
        """The address the agent wrote into tenant Service `name`'s status."""
        svc = self.call(lambda: self.tenant.get("services", name, "default")) or {}
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        return str(ingress[0]["ip"]) if ingress and ingress[0].get("ip") else None

    def close(self) -> None:
        for api in self.started:
            with contextlib.suppress(Exception):  # (stopping: nothing left to report)
                self.run(api.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


# ------------------------------------------------------------------------ the group


class OctaviaGroup:
    def __init__(
        self, work: Path, topology: Topology, progress: Progress, shared: OpenStack | None
    ) -> None:
        self.work = work
        self.topology = topology
        self.progress = progress
        self.shared = shared
        self.stack = contextlib.ExitStack()
        self.ovn: OVNStack | None = None
        self.openstack: OctaviaOVN | None = None
        self.clusters: Clusters | None = None
        self.client: Client | None = None
        self.conn: Any = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.workloads: list[subprocess.Popen[bytes]] = []
        self.uids: set[str] = set()  # of requests that may own an Octavia load balancer
        self.hosts: dict[str, Host] = {}
        self.router: Bird | None = None
        self.forwarder: Forwarder | None = None

    def say(self, text: str) -> None:
        self.progress(f"lab: octavia: {text}")

    # --- building

    def start_stack(self, result: OctaviaResult) -> tuple[OVNStack, OctaviaOVN]:
        if self.shared is not None:
            result.stack = "shared"
            return self.shared.ovn, self.shared.openstack
        started = time.monotonic()
        ovn = OVNStack(self.work / "ovn", self.topology)
        self.stack.callback(ovn.close)
        ovn.start()
        openstack = self.stack.enter_context(running(self.work / "openstack", ovn))
        result.stack_start_s = time.monotonic() - started
        self.say(f"OVN, Keystone, Neutron and Octavia (ovn provider) up after"
                 f" {result.stack_start_s:.0f} s")  # fmt: skip
        return ovn, openstack

    def build(self, ovn: OVNStack, openstack: OctaviaOVN) -> dict[str, Any]:
        """The Neutron networks and the hosts on them; the members' subnet."""
        neutron = openstack.neutron
        members, clients = routed(neutron, "octlab")
        for name, address in NODES.items():
            host = self.hosts[name] = host_port(neutron, ovn, f"octlab-{name}", members, address)
            for conf in ("all", "default"):  # kube-proxy's IP on lo, never answered by ARP
                host.sysctl(f"net.ipv4.conf.{conf}.arp_ignore", "1")
                host.sysctl(f"net.ipv4.conf.{conf}.arp_announce", "2")
            ports = (*NODE_PORTS.values(), 80)  # (80: kube-proxy's part for route mode)
            self.workloads += [start_workload(host, name, port) for port in ports]
        client = host_port(neutron, ovn, "octlab-c1", clients, CLIENT)
        self.client = Client(client.ns)
        # Route mode: a BGP router on the members' network, the way to acme's route pool
        # from Neutron's router, and the management speaker beside it.
        router = self.hosts["r1"] = host_port(neutron, ovn, "octlab-r1", members, ROUTER)
        router.sysctl("net.ipv4.ip_forward", "1")
        router.sysctl("net.ipv4.fib_multipath_hash_policy", "1")  # spread by ports too
        self.hosts["s1"] = host_port(neutron, ovn, "octlab-s1", members, SPEAKER)
        [found] = neutron.call("GET", "/v2.0/routers?name=octlab")["routers"]
        routes = [{"destination": ROUTE_POOL, "nexthop": ROUTER}]
        neutron.call("PUT", f"/v2.0/routers/{found['id']}", {"router": {"routes": routes}})
        self.say(f"m1, m2 ({', '.join(NODES.values())}), the client {CLIENT}, BIRD r1 and"
                 f" the speaker s1 on Neutron's networks; {ROUTE_POOL} via r1")  # fmt: skip
        return members

    def start_processes(self, openstack: OctaviaOVN, subnet: str) -> None:
        self.clusters = clusters = Clusters(self.work)
        clusters.seed(clusters.management, *management_docs())
        clusters.seed(clusters.tenant, *cluster_docs(NODES, with_service=False))
        provider = self.work / "octavia-provider.yaml"
        provider.write_text(yaml.safe_dump(provider_config(openstack.octavia_url, subnet)))
        self.start("manager")
        argv = tenant_agent_command(clusters.tenant_config, clusters.agent_config, CLUSTER)
        self._popen("agent", argv)
        self.say("teapot-lb manager --provider octavia=FILE and acme's tenant-agent up")
        session = Session(SPEAKER, MANAGEMENT_ASN, 9, 3, add_path=True)
        self.router = Bird(self.hosts["r1"], self.work / "r1",
                           RouterConfig(ROUTER_ASN, ROUTER, (session,)))  # fmt: skip
        self.router.start()
        speaker = self.hosts["s1"]
        port = int(clusters.management.url.rpartition(":")[2])
        self.forwarder = Forwarder(speaker.ns, port, self.work)
        self.forwarder.start()
        ready = self.forwarder.control.with_suffix(".ready")
        wait_for(ready.exists, timeout=20, what=f"the API forwarder into {speaker.ns}")
        inside = self.work / "speaker.kubeconfig"
        inside.write_text(clusters.manager_config.read_text().replace(
            clusters.management.url, f"http://127.0.0.1:{FORWARD_PORT}"))  # fmt: skip
        with (self.work / "speaker.log").open("ab") as log:
            self.procs["speaker"] = speaker.popen(
                [sys.executable, "-m", "teapot_lb.cli.speaker", "--node", "s1",
                 "--kubeconfig", str(inside), "--modes", "bgp", "--tenancy",
                 "--state-dir", str(self.work / "state-s1"), "--metrics-address", ""],
                stdout=log, stderr=log)  # fmt: skip
        self.say("BIRD on r1 and the management speaker s1 (teapot-lb speaker --tenancy) up")

    def start(self, name: str) -> None:
        assert self.clusters is not None
        provider = f"octavia={self.work / 'octavia-provider.yaml'}"
        self._popen(name, [TEAPOT_LB, "manager", "--kubeconfig", str(self.clusters.manager_config),
                           "--config-namespace", CONFIG_NS, "--no-leader-elect",
                           "--metrics-addr", "", "--webhook-addr", "",
                           "--provider", provider])  # fmt: skip

    def _popen(self, name: str, argv: list[str]) -> None:
        with (self.work / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=log)

    # --- watching

    def logs(self) -> str:
        return "\n".join(f"--- {n}.log\n{log_tail(self.work / f'{n}.log')}" for n in self.procs)

    def wait(self, check: Callable[[], T | None], what: str) -> float:
        """Seconds until `check` holds (the processes must stay up meanwhile)."""
        started = time.monotonic()

        def alive_check() -> T | None:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise LabTimeout(f"teapot-lb {name} exited ({proc.returncode})")
            return check()

        wait_for(alive_check, timeout=WITHIN, what=what, every=0.2, detail=self.logs)
        return time.monotonic() - started

    def answered_by(self, ip: str, count: int = BURST) -> list[str]:
        assert self.client is not None
        return sorted({a.node or "(failed)" for a in self.client.burst(ip, 80, count)})

    def uid(self, name: str) -> str:
        uid = str(self.request(name).get("metadata", {}).get("uid") or "")
        if not uid:
            raise LabTimeout(f"no TenantLoadBalancer for Service default/{name}")
        self.uids.add(uid)
        return uid

    def request(self, name: str) -> dict[str, Any]:
        assert self.clusters is not None
        return self.clusters.request(name)

    def tagged(self, uid: str) -> list[Any]:
        return list(self.conn.load_balancer.load_balancers(tags=owner_tag(uid)))

    def load_balancer(self, uid: str) -> Any:
        """The one Octavia load balancer of request `uid`."""
        found = self.tagged(uid)
        if len(found) != 1:
            raise LabTimeout(f"{len(found)} Octavia load balancers tagged {owner_tag(uid)}")
        return found[0]

    def programmed(self, name: str) -> str | None:
        """The message of Service `name`'s request's Programmed condition once True."""
        for c in self.request(name).get("status", {}).get("conditions") or []:
            if c.get("type") == "Programmed" and c.get("status") == "True":
                return str(c.get("message", ""))
        return None

    # --- the parts

    def run(self, result: OctaviaResult) -> None:
        ovn, openstack = self.start_stack(result)
        self.conn = connection(openstack.stack)
        members = self.build(ovn, openstack)
        self.start_processes(openstack, members["id"])
        try:
            self.serve_octavia(result.octavia)
            self.serve_route(result.route)
            self.change_member(result.member_change)
            self.restart_manager(result.restart)
            self.delete(ovn, result.deletion)
        except Exception:
            result.errors.append(f"the processes' logs:\n{self.logs()}")
            raise

    def serve_octavia(self, part: OctaviaServed) -> None:
        clusters = self.clusters
        assert clusters is not None
        started = time.monotonic()
        annotations = {ANNOTATION_PROVIDER: "octavia", ANNOTATION_IPS: VIP}
        web = service_doc(OCTAVIA_SERVICE, NODE_PORTS[OCTAVIA_SERVICE], annotations)
        clusters.seed(clusters.tenant, web, endpoints(OCTAVIA_SERVICE, NODES))
        # The address is the allocation's, the moment the request is vetted; Octavia has
        # built the load balancer (ACTIVE, that address its VIP) once it is Programmed.
        what = "Service default/web's address in its status, its request Programmed"
        self.wait(lambda: clusters.service_ip(OCTAVIA_SERVICE) and self.programmed(OCTAVIA_SERVICE),
                  what)  # fmt: skip
        part.create_to_address_s = time.monotonic() - started
        part.ip = ip = clusters.service_ip(OCTAVIA_SERVICE)
        assert ip is not None
        lb = self.load_balancer(self.uid(OCTAVIA_SERVICE))
        if lb.vip_address != ip:
            raise LabTimeout(f"load balancer {lb.id}'s VIP is {lb.vip_address}, not {ip}")
        part.load_balancer = str(lb.id)
        self.wait(lambda: self.answered_by(ip) == sorted(NODES), f"m1 and m2 answering on {ip}:80")
        part.create_to_served_s = time.monotonic() - started
        part.answered_by = self.answered_by(ip)
        self.say(f"default/web (provider octavia): {ip} in its status after"
                 f" {part.create_to_address_s:.1f} s, load balancer {lb.id}; m1 and m2 answer"
                 f" through the VIP after {part.create_to_served_s:.1f} s")  # fmt: skip

    def serve_route(self, part: RouteBeside) -> None:
        clusters = self.clusters
        assert clusters is not None
        started = time.monotonic()
        # No provider annotation: the Tenant's default, route.
        api = service_doc(ROUTE_SERVICE, NODE_PORTS[ROUTE_SERVICE], {ANNOTATION_IPS: ROUTE_IP})
        clusters.seed(clusters.tenant, api, endpoints(ROUTE_SERVICE, NODES))
        want = sorted(NODES.values())

        def next_hops() -> list[str]:
            return sorted(self.request(ROUTE_SERVICE).get("status", {}).get("nextHops") or [])

        self.wait(lambda: clusters.service_ip(ROUTE_SERVICE) and next_hops() == want,
                  "Service default/api's address and its next hops m1, m2 (route)")  # fmt: skip
        part.ip = ip = clusters.service_ip(ROUTE_SERVICE)
        part.next_hops = next_hops()
        part.octavia_load_balancers = len(self.tagged(self.uid(ROUTE_SERVICE)))
        assert ip is not None
        for name in NODES:  # kube-proxy's part, once the Service's status has the IP
            self.hosts[name].ip("addr", "replace", f"{ip}/32", "dev", "lo")

        def fib() -> list[str]:
            return sorted(fib_next_hops(self.hosts["r1"], f"{ip}/32"))

        self.wait(lambda: fib() == want, f"r1's FIB holding {ip} via m1 and m2 (ECMP)")
        self.wait(lambda: self.client is not None and self.client.get(ip, 80).ok,
                  f"the client reaching {ip}:80 through r1")  # fmt: skip
        part.reached_s = time.monotonic() - started
        part.fib_next_hops = fib()
        part.answered_by = self.answered_by(ip)
        self.say(f"default/api (the default provider, route): {part.ip} next hops"
                 f" {', '.join(part.next_hops)}, {part.octavia_load_balancers} Octavia load"
                 f" balancers; reached through r1 after {part.reached_s:.1f} s, answered by"
                 f" {', '.join(part.answered_by)}")  # fmt: skip

    def change_member(self, part: MemberChange) -> None:
        clusters, ip = self.clusters, self._octavia_ip()
        assert clusters is not None
        clusters.put(clusters.tenant, endpoints(OCTAVIA_SERVICE, ["m2"]))
        part.moved_s = self.wait(lambda: self.answered_by(ip) == ["m2"],
                                 f"m2 alone answering on {ip}:80")  # fmt: skip
        part.answered_by = self.answered_by(ip, 24)
        self.say(f"m1's endpoint not ready: m2 alone serves after {part.moved_s:.1f} s")

    def restart_manager(self, part: ManagerRestart) -> None:
        clusters, ip = self.clusters, self._octavia_ip()
        assert clusters is not None
        manager = self.procs["manager"]
        manager.kill()
        manager.wait(10)
        clusters.put(clusters.tenant, endpoints(OCTAVIA_SERVICE, NODES))  # while it is down
        self.start("manager")
        part.served_s = self.wait(lambda: self.answered_by(ip) == sorted(NODES),
                                  f"m1 and m2 answering on {ip}:80 again")  # fmt: skip
        part.answered_by = self.answered_by(ip)
        part.load_balancers = len(self.tagged(self.uid(OCTAVIA_SERVICE)))
        self.say(f"manager SIGKILLed, m1 ready again, manager started: both serve after"
                 f" {part.served_s:.1f} s, {part.load_balancers} load balancer(s)"
                 " tagged")  # fmt: skip

    def delete(self, ovn: OVNStack, part: OctaviaDeletion) -> None:
        clusters = self.clusters
        assert clusters is not None
        uid = self.uid(OCTAVIA_SERVICE)
        lb = self.load_balancer(uid)

        def northbound() -> int:
            return len(rows(ovn, "load_balancer", f"name={lb.id}")) + len(
                rows(ovn, "logical_switch_port", f"name={lb.vip_port_id}")
            )

        clusters.delete(clusters.tenant, "services", OCTAVIA_SERVICE, "default")
        clusters.delete(clusters.tenant, "endpointslices", f"{OCTAVIA_SERVICE}-x", "default")
        what = f"no load balancer tagged {uid}, no Northbound row of {lb.id}"
        part.deleted_s = self.wait(lambda: not self.tagged(uid) and northbound() == 0, what)
        part.load_balancers = len(self.tagged(uid))
        part.northbound_rows = northbound()
        self.say(f"default/web deleted: no Octavia load balancer, Load_Balancer row nor VIP"
                 f" port after {part.deleted_s:.1f} s")  # fmt: skip

    def _octavia_ip(self) -> str:
        ip = self.clusters.service_ip(OCTAVIA_SERVICE) if self.clusters else None
        if ip is None:
            raise LabTimeout("Service default/web lost its address")
        return ip

    # --- cleaning up

    def close(self) -> None:
        for proc in (*self.procs.values(), *self.workloads):
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        if self.conn is not None:  # (a failed run's leftovers, in a shared stack too)
            try:
                for uid in self.uids:
                    for lb in self.tagged(uid):
                        self.conn.load_balancer.delete_load_balancer(lb.id, cascade=True)
            except Exception as exc:  # (Octavia down: say what may be left)
                self.say(f"could not delete the load balancers tagged {sorted(self.uids)}: {exc}")
        if self.forwarder is not None:
            self.forwarder.kill()
        if self.router is not None:
            self.router.stop()
        if self.client is not None:
            self.client.close()
        if self.clusters is not None:
            self.clusters.close()
        self.stack.close()


def missing(shared: OpenStack | None) -> str | None:
    """Why the group cannot run here (None: it can)."""
    absent = [p for p in ("bird", "birdc") if shutil.which(p, path=_PATH) is None]
    if absent:
        return f"not installed: {', '.join(absent)} (scripts/setup.sh installs BIRD 2)"
    if importlib.util.find_spec("openstack") is None:
        return (
            "openstacksdk is not installed: pip install 'teapot-lb[openstack]'"
            " (scripts/setup.sh installs it with the dev extra)"
        )
    if shared is not None:
        return None
    return ovn_missing() or openstack_missing()


def run_octavia(
    progress: Progress, workdir: Path | None = None, shared: OpenStack | None = None
) -> OctaviaResult:
    """Run the group (root, OVN, the OpenStack virtualenv, PostgreSQL; or a running stack
    in `shared`); failures are in ``result.errors``."""
    result = OctaviaResult()

    def make(work: Path, topology: Topology) -> OctaviaGroup:
        return OctaviaGroup(work, topology, progress, shared)

    run_group("octavia", result, make, progress, workdir, missing(shared))
    return result


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def octavia_lines(r: OctaviaResult) -> list[str]:
    """The group in the lab's text report: one line per part."""
    if r.skipped is not None:
        return [f"octavia: skipped: {r.skipped}"]
    parts = r.parts()

    def verdict(name: str) -> str:
        return "ok" if parts[name] else "FAILED"

    o, rt, m, rs, d = r.octavia, r.route, r.member_change, r.restart, r.deletion
    stack = (
        "the running stack" if r.stack == "shared" else f"own stack, up in {_s(r.stack_start_s)}"
    )
    return [
        f"octavia: {'ok' if r.ok else 'FAILED'}; tenant acme's Services through tenant-agent →"
        f" manager → Octavia (ovn-octavia-provider) → OVN, beside route mode ({stack})",
        f"  octavia {verdict('octavia')}: default/web {o.ip or '-'} in its status after"
        f" {_s(o.create_to_address_s)}, answered by {', '.join(o.answered_by) or '-'} after"
        f" {_s(o.create_to_served_s)} (load balancer {o.load_balancer or '-'})",
        f"  route {verdict('route')}: default/api {rt.ip or '-'} next hops"
        f" {', '.join(rt.next_hops) or '-'}, Octavia load balancers {rt.octavia_load_balancers};"
        f" r1's FIB via {', '.join(rt.fib_next_hops) or '-'}, answered by"
        f" {', '.join(rt.answered_by) or '-'} after {_s(rt.reached_s)}",
        f"  member_change {verdict('member_change')}: m1 not ready → answered by"
        f" {', '.join(m.answered_by) or '-'} after {_s(m.moved_s)}",
        f"  restart {verdict('restart')}: manager SIGKILLed and started → answered by"
        f" {', '.join(rs.answered_by) or '-'} after {_s(rs.served_s)}, load balancers tagged"
        f" {rs.load_balancers}",
        f"  deletion {verdict('deletion')}: after {_s(d.deleted_s)} load balancers"
        f" {d.load_balancers}, Northbound rows {d.northbound_rows}",
        *(f"octavia: {err}" for err in r.errors),
    ]


def octavia_result(doc: Mapping[str, Any]) -> OctaviaResult:
    """The group's result back from its JSON (the HTML report renders from the JSON)."""
    kinds = {"octavia": OctaviaServed, "route": RouteBeside, "member_change": MemberChange,
             "restart": ManagerRestart, "deletion": OctaviaDeletion}  # fmt: skip
    fields: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("ok", "parts")}
    for name, kind in kinds.items():
        fields[name] = kind(**{k: v for k, v in doc.get(name, {}).items() if k != "ok"})
    return OctaviaResult(**fields)


def octavia_json(r: OctaviaResult) -> dict[str, Any]:
    """The group in the lab's JSON: its fields, each part's ``ok`` and ``parts``."""
    doc = asdict(r)
    for name, ok in r.parts().items():
        doc[name]["ok"] = ok
    return {**doc, "parts": r.parts(), "ok": r.ok}


__all__ = [
    "OctaviaResult",
    "OpenStack",
    "octavia_json",
    "octavia_lines",
    "octavia_result",
    "run_octavia",
]
