"""What the Northbound database should hold for the cluster's Services (pure).

:func:`desired_state` reads a :class:`~teapot_lb.cluster.ClusterView` and returns the
:class:`~teapot_lb.ovn.rows.NBState` teapot-lb wants, plus a note per Service saying what
was programmed and why something was not (``teapot-lb explain`` prints them).

- One ``Load_Balancer`` per Service IP and protocol: a VIP ``ip:port`` per Service port,
  its backends the ready endpoints of the IP's family at the port's target port (the
  EndpointSlice port of the same name). No ready endpoint: the VIP stays with no backend and
  ``reject=true``, so clients get a reset instead of a black hole (kube-proxy's behaviour).
- ``externalTrafficPolicy: Cluster``: the row joins the OVNAdvertisement's
  ``Load_Balancer_Group``, which the advertisement's gateway routers and logical switches
  reference (one reference per router, however many Services: northd handles a group once).
- ``externalTrafficPolicy: Local``: the row (all endpoints) is attached to the logical
  switches only (east-west traffic is not external); every gateway router with a node gets
  its own row with that node's ready endpoints and ``skip_snat=true`` (the client's address
  is kept), attached to that router alone.
- Health checks (IPv4): a ``Load_Balancer_Health_Check`` per VIP and the
  ``ip_port_mappings`` OVN's service monitor needs (backend → logical port and source).
- ``sessionAffinity: ClientIP``: ``options:affinity_timeout`` (its timeoutSeconds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from teapot_lb.addresses import IPAddress, IPFamily, parse_ip
from teapot_lb.cluster import ClusterView, Kind
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.model import ExternalTrafficPolicy, OVNAdvertisement, Service
from teapot_lb.model.ovn import OVNHealthCheck
from teapot_lb.model.service import Endpoint, ServicePort
from teapot_lb.ovn.rows import (
    IP_KEY,
    OWNER_KEY,
    ROUTER_KEY,
    SERVICE_KEY,
    HealthCheck,
    LoadBalancer,
    NBState,
    Table,
    Target,
    name_prefix,
    pairs,
    vip_text,
)


@dataclass(frozen=True)
class Backend:
    """One ready endpoint address at a target port."""

    ip: IPAddress
    port: int
    node: str | None
    pod: tuple[str, str] | None  # (namespace, name) of its Pod, for health checks

    @property
    def text(self) -> str:
        return vip_text(self.ip, self.port)


@dataclass(frozen=True)
class Desired:
    """The wanted state and, per Service key, what was decided for it."""

    state: NBState
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# What the desired rows are computed from: the OVN writer watches these kinds only (no
# Secrets, no Nodes: least privilege).
READ_KINDS = (Kind.SERVICE, Kind.ENDPOINT_SLICE, Kind.ADDRESS_POOL, Kind.OVN_ADVERTISEMENT)


def group_name(owner: str, adv: OVNAdvertisement) -> str:
    return f"{name_prefix(owner)}{adv.metadata.namespace or ''}/{adv.name}"


@dataclass
class _Part:
    """What one Service contributes to the state."""

    lbs: dict[str, LoadBalancer] = field(default_factory=dict)
    group_members: list[tuple[str, str]] = field(default_factory=list)  # (group, row name)
    attached: list[tuple[Target, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class DesiredCache:
    """Each Service's rows, kept while the Service, its EndpointSlices and the configuration
    are the very same objects (the Store replaces an object when it changes): one changed
    Service then costs one Service's work, not every Service's (10k Services: ~1 s)."""

    def __init__(self) -> None:
        self._config: tuple[object, ...] = ()
        self._parts: dict[str, tuple[tuple[object, ...], _Part]] = {}

    def config(self, token: tuple[object, ...]) -> None:
        """Forget everything unless the configuration is the same objects as last time."""
        if not _same(token, self._config):
            self._parts.clear()
            self._config = token

    def get(self, key: str, token: tuple[object, ...]) -> _Part | None:
        entry = self._parts.get(key)
        return entry[1] if entry is not None and _same(entry[0], token) else None

    def put(self, key: str, token: tuple[object, ...], part: _Part) -> None:
        self._parts[key] = (token, part)

    def keep(self, keys: set[str]) -> None:
        for gone in set(self._parts) - keys:
            del self._parts[gone]


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def desired_state(
    view: ClusterView,
    owner: str,
    options: ControllerOptions | None = None,
    cache: DesiredCache | None = None,
) -> Desired:
    """The rows `owner` (this cluster's name) wants in the Northbound database; with a
    `cache`, unchanged Services reuse their rows from the previous call."""
    return _Builder(view, owner, options or ControllerOptions(), cache).build()


class _Builder:
    def __init__(
        self,
        view: ClusterView,
        owner: str,
        options: ControllerOptions,
        cache: DesiredCache | None,
    ) -> None:
        self.view = view
        self.owner = owner
        self.options = options
        self.cache = cache
        self.advs = [view.ovn_advertisements[k] for k in sorted(view.ovn_advertisements)]
        self.lbs: dict[str, LoadBalancer] = {}
        self.groups: dict[str, set[str]] = {}
        self.attached: dict[Target, set[str]] = defaultdict(set)
        self.group_attached: dict[Target, set[str]] = defaultdict(set)
        self.notes: dict[str, list[str]] = {}

    def build(self) -> Desired:
        for adv in self.advs:
            group = group_name(self.owner, adv)
            self.groups[group] = set()
            for target in _targets(adv):
                self.group_attached[target].add(group)
        cache = self.cache
        if cache is not None:
            pools = tuple(self.view.pools[k] for k in sorted(self.view.pools))
            cache.config((self.owner, self.options, *self.advs, None, *pools))
        handled = set()
        for key in sorted(self.view.services):
            svc = self.view.services[key]
            if not self.options.handles(svc):
                continue
            handled.add(key)
            if cache is None:
                self._merge(key, self._service(key, svc))
                continue
            token = (svc, self.view.assigned.get(key), *self.view.slices_of(key))
            part = cache.get(key, token)
            if part is None:
                part = self._service(key, svc)
                cache.put(key, token, part)
            self._merge(key, part)
        if cache is not None:
            cache.keep(handled)
        state = NBState(
            load_balancers=self.lbs,
            groups={g: frozenset(m) for g, m in self.groups.items()},
            attached={t: frozenset(n) for t, n in self.attached.items() if n},
            group_attached={t: frozenset(g) for t, g in self.group_attached.items() if g},
        )
        return Desired(state, {k: tuple(v) for k, v in self.notes.items() if v})

    def _merge(self, key: str, part: _Part) -> None:
        self.lbs.update(part.lbs)
        for group, name in part.group_members:
            self.groups[group].add(name)
        for target, name in part.attached:
            self.attached[target].add(name)
        self.notes[key] = part.notes

    def _service(self, key: str, svc: Service) -> _Part:
        part = _Part()
        if svc.spec.load_balancer_source_ranges:
            # OVN's Load_Balancer has no source filter, and the DNAT happens before any
            # kube-proxy could filter: not programmed rather than open to every client.
            part.notes.append(
                "not programmed: spec.loadBalancerSourceRanges is set, and an OVN load "
                "balancer cannot limit its clients; remove it or announce the Service by "
                "BGP, L2 or VIP (kube-proxy filters there)"
            )
            return part
        for ip in self.view.ingress_ips(key, svc):
            pool = self.view.pool_of(ip)
            advs = [a for a in self.advs if pool is not None and a.spec.selects_pool(pool)]
            if not advs:
                continue
            by_protocol: dict[str, list[ServicePort]] = defaultdict(list)
            for port in svc.spec.ports:
                by_protocol[port.protocol.value.lower()].append(port)
            for protocol in sorted(by_protocol):
                self._rows(key, svc, ip, protocol, by_protocol[protocol], advs, part)
        return part

    def _rows(
        self,
        key: str,
        svc: Service,
        ip: IPAddress,
        protocol: str,
        ports: list[ServicePort],
        advs: list[OVNAdvertisement],
        part: _Part,
    ) -> None:
        note = part.notes.append
        backends = {p.port: self._backends(key, ip, p) for p in ports}
        check = next((a.spec.health_check for a in advs if a.spec.health_check), None)
        if check is not None and ip.version != 4:
            note(f"{ip}: no health check (OVN service monitors probe IPv4 backends only)")
            check = None
        name = f"{name_prefix(self.owner)}{key}/{ip}/{protocol}"
        ids = {OWNER_KEY: self.owner, SERVICE_KEY: key, IP_KEY: str(ip)}
        options = {"reject": "true"}
        affinity = svc.spec.affinity_timeout()
        if affinity is not None:
            options["affinity_timeout"] = str(affinity)
        row = _row(name, protocol, ip, backends, options, ids, check)
        part.lbs[name] = row
        count = sum(len(b) for b in backends.values())
        if svc.spec.external_traffic_policy is not ExternalTrafficPolicy.LOCAL:
            for adv in advs:
                part.group_members.append((group_name(self.owner, adv), name))
            where = ", ".join(str(t) for adv in advs for t in _targets(adv)) or "nothing"
            note(f"{ip}/{protocol}: {name} ({count} backend(s)) on {where}")
            return
        switches = sorted({t for adv in advs for t in _targets(adv) if t.table is Table.SWITCH})
        for target in switches:
            part.attached.append((target, name))
        note(
            f"{ip}/{protocol}: {name} ({count} backend(s), all nodes) on "
            + (", ".join(str(t) for t in switches) or "no switch")
        )
        routers = {r.name: r for adv in advs for r in adv.spec.gateway_routers}
        for router_name in sorted(routers):
            node = routers[router_name].node
            if node is None:
                note(
                    f"{ip}/{protocol}: router {router_name} not used: externalTrafficPolicy "
                    "is Local and the router names no node (spec.gatewayRouters[].node)"
                )
                continue
            local = {port: [b for b in bs if b.node == node] for port, bs in backends.items()}
            local_name = f"{name}/{router_name}"
            ids_local = {**ids, ROUTER_KEY: router_name}
            opts = {**options, "skip_snat": "true"}
            part.lbs[local_name] = _row(local_name, protocol, ip, local, opts, ids_local, check)
            part.attached.append((Target(Table.ROUTER, router_name), local_name))
            count = sum(len(b) for b in local.values())
            note(f"{ip}/{protocol}: {local_name} ({count} backend(s) on {node}) on router")

    def _backends(self, key: str, ip: IPAddress, port: ServicePort) -> list[Backend]:
        """The ready endpoints of `ip`'s family at `port`'s target port, sorted, no repeats."""
        family = IPFamily.of(ip).value
        found: dict[str, Backend] = {}
        for eps in self.view.slices_of(key):
            if eps.address_type != family:
                continue
            target = next(
                (
                    p.port
                    for p in eps.ports
                    if (p.name or "") == (port.name or "") and p.protocol is port.protocol
                ),
                None,
            )
            if target is None:
                continue
            for endpoint in eps.endpoints:
                if endpoint.is_ready:
                    for backend in _endpoint_backends(endpoint, target):
                        found.setdefault(backend.text, backend)
        return [found[t] for t in sorted(found)]


def _targets(adv: OVNAdvertisement) -> Iterable[Target]:
    for router in adv.spec.gateway_routers:
        yield Target(Table.ROUTER, router.name)
    for switch in adv.spec.logical_switches:
        yield Target(Table.SWITCH, switch)


def _endpoint_backends(endpoint: Endpoint, port: int) -> Iterable[Backend]:
    ref = endpoint.target_ref
    pod = (
        (ref.namespace or "", ref.name)
        if ref is not None and ref.kind == "Pod" and ref.name
        else None
    )
    for address in endpoint.addresses:
        try:
            ip = parse_ip(address)
        except ValueError:
            continue  # not an address: nothing OVN could forward to
        yield Backend(ip, port, endpoint.node_name, pod)


def _row(
    name: str,
    protocol: str,
    ip: IPAddress,
    backends: Mapping[int, list[Backend]],
    options: Mapping[str, str],
    external_ids: Mapping[str, str],
    check: OVNHealthCheck | None,
) -> LoadBalancer:
    vips = {vip_text(ip, port): ",".join(b.text for b in bs) for port, bs in backends.items()}
    health: tuple[HealthCheck, ...] = ()
    mappings: dict[str, str] = {}
    if check is not None:
        probe = {
            "interval": str(check.interval),
            "timeout": str(check.timeout),
            "success_count": str(check.success_count),
            "failure_count": str(check.failure_count),
        }
        health = tuple(HealthCheck(vip, pairs(probe)) for vip in sorted(vips))
        for bs in backends.values():
            for b in bs:
                if b.pod is not None:
                    port_name = check.logical_port_format.format(namespace=b.pod[0], name=b.pod[1])
                    mappings[str(b.ip)] = f"{port_name}:{check.source_ip}"
    return LoadBalancer(
        name=name,
        protocol=protocol,
        vips=pairs(vips),
        options=pairs(options),
        external_ids=pairs(external_ids),
        health_checks=health,
        ip_port_mappings=pairs(mappings),
    )
