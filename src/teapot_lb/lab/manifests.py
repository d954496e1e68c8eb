"""What the lab reads from a manifest directory, and the Services it writes there.

The lab's topology follows the manifests: the Nodes name the node namespaces and give
their addresses on the LAN, the BGPPeers give the router's address and AS number and
the session timers, and the advertisements tell which pools are announced by which
mode. Service IPs are computed with the very same pure assignment every `teapot-lb run`
uses (:func:`teapot_lb.standalone.assign.assign`), so the lab knows a Service's IP the
moment it writes the Service, without waiting for any node to report it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.plan import plan
from teapot_lb.cluster import ClusterView, Kind, Store, object_key
from teapot_lb.controller import ControllerOptions
from teapot_lb.kube.resources import LB_GROUP, LB_VERSION
from teapot_lb.model import Node, Service
from teapot_lb.model.common import matches_any
from teapot_lb.model.kinds import KINDS
from teapot_lb.model.manifest import YAML_SUFFIXES, parse_object
from teapot_lb.model.service import ANNOTATION_POOL
from teapot_lb.netlab.topology import ALLOWED_NETS
from teapot_lb.standalone.assign import assign, assigned_services
from teapot_lb.standalone.directory import Snapshot, read

MODES = ("bgp", "l2", "vip")
# `teapot-lb lab --modes`: the announcement modes, the Teapot group and the OVN group; by
# default all but OVN (it needs OVN installed and is asked for by name), and octavia (it
# starts an OpenStack stack: one to three minutes).
GROUPS = (*MODES, "teapot", "ovn", "gateway", "relay", "octavia")  # relay: by name
DEFAULT_GROUPS = (*MODES, "teapot")
FAMILIES = ("v4", "v6")
LAN = ipaddress.ip_network("192.0.2.0/24")
LAN6 = ipaddress.ip_network("2001:db8::/64")
ROUTER_LAN = "192.0.2.1"
ROUTER_LAN6 = "2001:db8::1"
ROUTER_UP, ROUTER_UP6 = "198.51.100.1", "2001:db8:ffff::1"
CLIENT, CLIENT6 = "198.51.100.2", "2001:db8:ffff::2"
UPLINK_PREFIX, UPLINK_PREFIX6 = 24, 64
SERVICE_PORT = 80
LAB_NAMESPACE = "lab"
HOSTNAME_LABEL = "kubernetes.io/hostname"
API = f"{LB_GROUP}/{LB_VERSION}"


class LabConfigError(ValueError):
    """The manifests cannot drive the lab (a message the user can act on)."""


def family_of(ip: str) -> str:
    """``"v4"`` or ``"v6"``: how the lab names an address family."""
    return f"v{ipaddress.ip_address(ip).version}"


def host_prefix(ip: str) -> str:
    """The host route of ``ip``: /32 or /128."""
    return f"{ip}/{ipaddress.ip_address(ip).max_prefixlen}"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    address: str  # on the LAN
    address6: str  # on the LAN too (2001:db8::/64): the Node's IPv6 InternalIP
    internal6: bool = True  # False: the Node has no IPv6 InternalIP, the lab made address6 up

    def address_of(self, family: str) -> str:
        return self.address6 if family == "v6" else self.address


@dataclass(frozen=True)
class BfdSpec:
    """The BFD timers of the BGPPeer's bfdProfile; the router runs the same on its side."""

    transmit_ms: int
    receive_ms: int
    multiplier: int

    @property
    def detection_s(self) -> float:
        """About how long a dead path takes to notice: the slower interval times the
        multiplier (both sides run the same profile)."""
        return max(self.transmit_ms, self.receive_ms) * self.multiplier / 1000


@dataclass(frozen=True)
class BgpSpec:
    """The router side of the BGP sessions, from the BGPPeers."""

    router_address: str
    router_asn: int
    node_asn: int
    hold_time: int
    keepalive_time: int
    nodes: tuple[str, ...] = ()  # the nodes some BGPPeer selects: the router peers with them
    bfd: BfdSpec | None = None  # the BGPPeer's bfdProfile: BFD beside every session


@dataclass
class LabLayout:
    nodes: list[NodeSpec]
    router_address: str
    bgp: BgpSpec | None
    pools: dict[str, list[str]] = field(default_factory=dict)  # mode -> pool names
    generated_nodes: bool = False
    pool_families: dict[str, frozenset[str]] = field(default_factory=dict)  # pool -> v4/v6

    def missing_ipv6_next_hop(self) -> str | None:
        """Why BGP cannot carry IPv6 here (None: it can): a node the router peers with has
        no IPv6 InternalIP, so its speaker has no IPv6 next hop (docs/bgp.md)."""
        peered = self.bgp.nodes if self.bgp else ()
        missing = [n.name for n in self.nodes if n.name in peered and not n.internal6]
        if not missing:
            return None
        return (
            f"Node(s) {', '.join(missing)} have no IPv6 InternalIP (in {LAN6}): their"
            " speakers have no IPv6 next hop, so BGP cannot announce IPv6 Service IPs"
        )

    def pools_of(self, mode: str, family: str) -> list[str]:
        """The mode's pools that have addresses of ``family``."""
        return [p for p in self.pools.get(mode, []) if family in self.pool_families.get(p, ())]


def node_names(count: int) -> list[str]:
    return [f"node-{i}" for i in range(1, count + 1)]


def generated_node_address(index: int) -> str:
    """The LAN address of the ``index``-th (1-based) generated node."""
    return str(LAN.network_address + 10 + index)


def mirrored_address6(address: str) -> str:
    """A node's IPv6 LAN address written like its IPv4 one: 192.0.2.11 → 2001:db8::11."""
    return str(ipaddress.IPv6Address(f"2001:db8::{address.rsplit('.', 1)[1]}"))


def node_doc(spec: NodeSpec) -> dict[str, Any]:
    addresses = [{"type": "InternalIP", "address": a} for a in (spec.address, spec.address6)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": {HOSTNAME_LABEL: spec.name}},
        "status": {"addresses": addresses},
    }


def service_doc(
    name: str, pool: str, family: str = "v4", port: int = SERVICE_PORT
) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "LoadBalancer", "ports": [{"port": port, "protocol": "TCP"}]}
    if family == "v6":
        spec |= {"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv6"]}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": LAB_NAMESPACE,
            "annotations": {ANNOTATION_POOL: pool},
        },
        "spec": spec,
    }


def config_doc(
    kind: str, name: str, spec: dict[str, Any], namespace: str = LAB_NAMESPACE
) -> dict[str, Any]:
    """One of our kinds (AddressPool, L2Advertisement, VIPAdvertisement, ...)."""
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def endpoints_doc(
    service: str, *ready_nodes: str, namespace: str = LAB_NAMESPACE
) -> dict[str, Any]:
    """The Service's EndpointSlice: one ready endpoint on each of ``ready_nodes``."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-eps",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "endpoints": [
            {"addresses": ["10.0.0.1"], "nodeName": n, "conditions": {"ready": True}}
            for n in ready_nodes
        ],
    }


def write_docs(path: Path, docs: Iterable[dict[str, Any]]) -> None:
    """Write a manifest file atomically (a temporary file renamed in: the nodes never read
    half of it)."""
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    tmp.replace(path)


def copy_manifests(src: Path, dst: Path, *, drop_nodes: bool) -> None:
    """Copy the YAML files of ``src`` into ``dst`` (flat), without Nodes if asked."""
    dst.mkdir(parents=True, exist_ok=True)
    files = [src] if src.is_file() else sorted(src.rglob("*"))
    for i, path in enumerate(files):
        rel = path.relative_to(src) if src.is_dir() else Path(path.name)
        if any(part.startswith(".") for part in rel.parts) or path.suffix not in YAML_SUFFIXES:
            continue
        if not path.is_file():
            continue
        target = dst / f"{i:03d}-{'-'.join(rel.parts)}"
        if not drop_nodes:
            shutil.copyfile(path, target)
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        kept = [d for d in docs if not (isinstance(d, dict) and d.get("kind") == "Node")]
        write_docs(target, kept)


def layout(snapshot: Snapshot, *, nodes: int | None) -> LabLayout:
    """The lab's shape from the manifests; ``nodes`` overrides the manifests' Nodes."""
    problems = [str(p) for p in snapshot.problems]
    if problems:
        raise LabConfigError("the manifests have problems:\n  " + "\n  ".join(problems))
    view = snapshot.view()
    specs: list[NodeSpec] = []
    generated = nodes is not None or not view.nodes
    if generated:
        count = 3 if nodes is None else nodes
        for i, name in enumerate(node_names(count), 1):
            v4 = generated_node_address(i)
            specs.append(NodeSpec(name, v4, mirrored_address6(v4)))
    else:
        for name, node in sorted(view.nodes.items()):
            addrs = [a for a in node.addresses() if a.version == 4 and a in LAN]
            if not addrs:
                raise LabConfigError(
                    f"Node {name}: the lab needs an InternalIP in its LAN {LAN}"
                    f" (or pass --nodes N to let the lab make its Nodes)"
                )
            # Without an IPv6 InternalIP the node still gets a LAN address, but its
            # speaker has no IPv6 next hop for BGP (docs/bgp.md): BGP IPv6 then fails.
            addrs6 = [a for a in node.addresses() if a.version == 6 and a in LAN6]
            v6 = str(addrs6[0]) if addrs6 else mirrored_address6(str(addrs[0]))
            specs.append(NodeSpec(name, str(addrs[0]), v6, internal6=bool(addrs6)))
    if not 2 <= len(specs) <= 60:
        raise LabConfigError(f"{len(specs)} node(s): the lab runs 2 to 60 (failover needs two)")
    if generated:
        view = _with_nodes(view, specs)
    _check_documentation_ranges(view)
    bgp = _bgp_spec(view)
    router = bgp.router_address if bgp else ROUTER_LAN
    taken = {s.address for s in specs}
    if router in taken:
        raise LabConfigError(f"the router's address {router} is also a Node's InternalIP")
    taken6 = {s.address6 for s in specs}
    if ROUTER_LAN6 in taken6:
        raise LabConfigError(f"the router's address {ROUTER_LAN6} is also a Node's InternalIP")
    if len(taken) != len(specs) or len(taken6) != len(specs):
        raise LabConfigError("two Nodes have the same InternalIP")
    families = {p.name: frozenset(f"v{v}" for v in p.families()) for p in view.pools.values()}
    return LabLayout(specs, router, bgp, pools_by_mode(view), generated, families)


def _check_documentation_ranges(view: ClusterView) -> None:
    """The lab puts Service IPs on interfaces and routes: documentation ranges only."""
    for pool in sorted(view.pools.values(), key=lambda p: p.name):
        for rng in pool.address_ranges():
            inside = any(rng.first in net and rng.last in net for net in ALLOWED_NETS)
            if not inside:
                allowed = ", ".join(str(n) for n in ALLOWED_NETS)
                raise LabConfigError(
                    f"AddressPool {pool.name}: {rng.first}-{rng.last} is outside the"
                    f" documentation ranges the lab may use ({allowed})"
                )


def _with_nodes(view: ClusterView, specs: Sequence[NodeSpec]) -> ClusterView:
    nodes = {}
    for spec in specs:
        obj, _ = parse_object(node_doc(spec))
        assert isinstance(obj, Node)
        nodes[spec.name] = obj
    return dataclasses.replace(view, nodes=nodes)


def _bgp_spec(view: ClusterView) -> BgpSpec | None:
    peers = sorted(view.bgp_peers.values(), key=lambda p: p.name)
    if not peers:
        return None
    peer = peers[0]
    spec = peer.spec
    for other in peers[1:]:
        if other.spec.peer_address != spec.peer_address:
            raise LabConfigError(
                f"BGPPeers {peer.name} and {other.name} name different routers; the lab has one"
            )
    if spec.peer_address is None or spec.peer_address.version != 4 or spec.peer_address not in LAN:
        raise LabConfigError(
            f"BGPPeer {peer.name}: the lab's router needs a peerAddress in its LAN {LAN}"
        )
    if spec.peer_asn is None:
        raise LabConfigError(f"BGPPeer {peer.name}: the lab's router needs peerASN")
    hold = int(peer.hold_time_seconds())
    bfd = None
    if spec.bfd_profile is not None:
        profile = view.bfd_profiles.get(object_key(peer.metadata.namespace, spec.bfd_profile))
        if profile is None:
            raise LabConfigError(
                f"BGPPeer {peer.name}: bfdProfile {spec.bfd_profile} is not in the manifests"
            )
        p = profile.spec
        bfd = BfdSpec(p.transmit_interval, p.receive_interval, p.detect_multiplier)
    peered = tuple(
        name
        for name, node in sorted(view.nodes.items())
        if any(matches_any(p.spec.node_selectors, node.labels) for p in peers)
    )
    return BgpSpec(
        router_address=str(spec.peer_address),
        router_asn=spec.peer_asn,
        node_asn=spec.my_asn,
        hold_time=hold,
        keepalive_time=max(1, int(peer.keepalive_time_seconds())),
        nodes=peered,
        bfd=bfd,
    )


def pools_by_mode(view: ClusterView) -> dict[str, list[str]]:
    """Pool names per announcement mode (a pool may be announced by several)."""
    out: dict[str, list[str]] = {m: [] for m in MODES}
    advs: dict[str, Sequence[Any]] = {
        "bgp": list(view.bgp_advertisements.values()),
        "l2": list(view.l2_advertisements.values()),
        "vip": list(view.vip_advertisements.values()),
    }
    for key, pool in sorted(view.pools.items()):
        if not pool.spec.addresses:
            continue
        for mode, found in advs.items():
            if any(
                a.metadata.namespace == pool.metadata.namespace and a.spec.selects_pool(pool)
                for a in found
            ):
                out[mode].append(pool.name)
        del key
    return out


def mode_of_ip(view: ClusterView, ip: str, pools: dict[str, list[str]]) -> str | None:
    pool = view.pool_of(ipaddress.ip_address(ip))
    if pool is None:
        return None
    for mode in MODES:
        if pool.name in pools.get(mode, []):
            return mode
    return None


def with_services(snapshot: Snapshot, docs: Iterable[dict[str, Any]]) -> ClusterView:
    """The view the nodes will see once ``docs`` (Services) are written."""
    services = dict(snapshot.objects.get(Kind.SERVICE, {}))
    for doc in docs:
        obj, problems = parse_object(doc)
        if obj is None or problems or not isinstance(obj, Service):
            raise LabConfigError(f"generated Service is invalid: {problems}")
        services[object_key(obj.metadata.namespace, obj.metadata.name)] = obj
    objects = dict(snapshot.objects)
    objects[Kind.SERVICE] = services
    return Snapshot(objects, [], dict(snapshot.unparsed_pools), list(snapshot.files)).view()


def assigned_ips(view: ClusterView, snapshot: Snapshot) -> dict[str, list[str]]:
    """Every Service's IPs as every node computes them (key -> IPs; [] when refused)."""
    result = assign(view, ControllerOptions(), snapshot.unparsed_pools)
    return {key: [str(ip) for ip in a.ips] for key, a in result.items()}


def announced_view(snapshot: Snapshot, docs: Iterable[dict[str, Any]]) -> ClusterView:
    """What every node's speaker plans from: the objects, Services with their IPs in status."""
    view = with_services(snapshot, docs)
    services = assigned_services(view, assign(view, ControllerOptions(), snapshot.unparsed_pools))
    store = Store()
    for info in KINDS:
        store.replace(info.kind, services if info.kind is Kind.SERVICE else view.of_kind(info.kind))
    return store.view()


def bgp_announcers(view: ClusterView, ip: str) -> tuple[str | None, set[str]]:
    """The prefix carrying ``ip`` and the nodes announcing it over BGP, as they plan it."""
    addr = ipaddress.ip_address(ip)
    prefix: str | None = None
    nodes: set[str] = set()
    for name in sorted(view.nodes):
        for route in plan(view, name).of_mode(Mode.BGP):
            assert isinstance(route, BGPRoute)
            if addr in ipaddress.ip_network(route.prefix):
                prefix = route.prefix
                nodes.add(name)
    return prefix, nodes


def read_dir(path: Path) -> Snapshot:
    return read(path)
