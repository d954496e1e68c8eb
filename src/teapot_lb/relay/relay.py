"""The relay process: tenant speakers on one side, the network's routers on the other.

Two BGP speakers (:class:`teapot_lb.bgp.Speaker`) share the relay's ASN and router ID:

- the *tenant side* listens; a connection is identified by its source address, which must
  be a registered node address of exactly one Tenant (inside its node networks), and is
  then a passive session expecting that Tenant's ASN (Bad Peer AS otherwise, RFC 4271
  §6.2); any other address is refused with Cease/Connection Rejected (RFC 4486), and a
  node deregistered loses its session (Cease/Peer De-configured) and its paths. TCP MD5
  per tenant (a key per node network on the listener), GTSM (TTL 255, RFC 5082) on the
  listener, graceful restart helper with the stale time bounded. Its import filter
  accepts everything: the Adj-RIB-In before policy lives in
  :class:`~teapot_lb.relay.rib.RelayRib`, which judges it;
- the *network side* dials the BGPPeers and advertises every accepted path with its next
  hop unchanged (ADD-PATH where the BGPPeer has ``addPath: send``).

:meth:`Relay.apply` takes a :class:`~teapot_lb.cluster.ClusterView` (the manifest
directory, or the management cluster) and is level-triggered: Tenants become policies,
BGPPeers sessions; a Tenant change re-judges that tenant's routes and sends only the
difference, without resetting any session (unless its ASN, node networks, password or the
session's node's registration changed, which the session itself depends on).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from typing import Any

from teapot_lb import log
from teapot_lb.addresses import IPAddress
from teapot_lb.bgp import Peer, PeerConfig, Speaker
from teapot_lb.bgp.fsm import (
    Action,
    NotificationSent,
    RoutesLearned,
    RoutesWithdrawn,
    State,
    StateChanged,
    UpdateProblems,
)
from teapot_lb.bgp.rib import CompiledRoutes
from teapot_lb.bgp.wire import IPV6_UNICAST, AddPathMode, CeaseSubcode, Family, Notification
from teapot_lb.bgp.wire.community import format_community
from teapot_lb.bgp.wire.errors import ErrorCode, OpenSubcode
from teapot_lb.bgp.wire.family import Address
from teapot_lb.cluster import ClusterView
from teapot_lb.kube.resources import object_key
from teapot_lb.model.tenancy import Tenant
from teapot_lb.speaker.bgp_backend import peer_setup
from teapot_lb.tenancy.nodes import registered_nodes

from .metrics import RelayMetrics
from .policy import DESCRIPTIONS, Reason, RelayOptions, TenantPolicy, tenant_policy
from .rib import Outcome, RelayRib


def _log() -> Any:
    return log.get("teapot_lb.relay")


@dataclass(frozen=True)
class RelayConfig:
    local_as: int
    router_id: str
    listen_address: str | None = None
    listen_port: int = 179
    options: RelayOptions = field(default_factory=RelayOptions)
    peers: tuple[str, ...] = ()  # BGPPeer names towards the network; empty: every BGPPeer
    # TCP MD5, key "password" of the Secret `<password_secret>-<tenant>` in the relay's
    # configuration namespace (written by the operator; the only Secrets a relay on a
    # cluster reads), else of `<password_secret>` in the tenant's namespace (standalone).
    password_secret: str = "relay-bgp"
    # Route changes are coalesced: a flush once none came for flush_delay seconds, or
    # once the oldest waited flush_max_delay (a steady trickle, or a burst read slowly),
    # or once a burst changed `flush_first` prefixes, then twice as many for each next
    # flush of the burst, up to `flush_batch`: the routers start installing at once, and
    # the flushes grow as the burst goes on, because a prefix whose nodes' paths fall
    # into two flushes is published and diffed twice (one flush every 50 ms published
    # 179,000 prefixes for 100,000; 2,000 a flush cost the relay a third more CPU than
    # 20,000). The longest delay keeps a burst's flushes coming while the batches grow:
    # at 0.5 s the router, done with a flush, sat idle until the next, twice as large,
    # had filled (bench/relay.py --timeline).
    flush_delay: float = 0.05
    flush_max_delay: float = 0.2
    flush_first: int = 2000
    flush_batch: int = 20000
    # A flush is handed to the routers `flush_chunk` prefixes at a time, one chunk per
    # turn of the event loop: its first UPDATEs leave after one chunk's diff and
    # encoding, not after the whole batch's (20,000 prefixes took 0.4 - 0.6 s under
    # load), and the tenant side reads and judges between chunks. A flush asked for
    # meanwhile follows it with all that changed since (more than flush_batch, when the
    # tenants send faster than the flushes go).
    flush_chunk: int = 1000
    # The tenant side handles what its sessions sent at most this long per turn of the
    # event loop: UPDATEs the routers' sockets did not take at once leave only between
    # turns, and one turn could hold every session's burst (seconds).
    received_per_turn: float = 0.02


@dataclass(frozen=True)
class RelayEvent:
    """Something the operator should see: an Event on the Tenant, or a log line."""

    tenant: str  # "" for a connection of no tenant
    reason: str  # CamelCase, as Kubernetes Event reasons
    message: str
    warning: bool = True
    address: str = ""  # the tenant node whose session it is about, when one is


@dataclass
class _Flush:
    """A flush being handed to the routers a chunk at a time, and what it cost so far
    (its debug line)."""

    trigger: str
    routes: CompiledRoutes
    queue: deque[tuple[Family, list[bytes]]]  # prefixes not yet handed over, in order
    prefixes: int
    learned: int
    chunks: int = 0
    bytes: int = 0
    seconds: float = 0.0  # in its chunks (the event loop's other work between them not)
    started: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class _TenantSide:
    """A tenant as its sessions need it."""

    name: str
    asn: int | None
    networks: tuple[IPv4Network | IPv6Network, ...]
    password: str | None
    nodes: Mapping[IPAddress, str] = field(default_factory=dict)  # address → node name


class Relay:
    """The BGP filtering relay; ``on_event`` gets :class:`RelayEvent` s."""

    def __init__(
        self,
        config: RelayConfig,
        *,
        metrics: RelayMetrics | None = None,
        on_event: Callable[[RelayEvent], None] | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or RelayMetrics()
        self.on_event = on_event
        self.options = config.options
        self.rib = RelayRib(config.options, {})
        self.tenants: dict[str, _TenantSide] = {}
        self.tenant_side = Speaker(
            local_as=config.local_as,
            router_id=config.router_id,
            listen_address=config.listen_address,
            listen_port=config.listen_port,
            on_event=self._tenant_event,
            resolve_peer=self._resolve,
            listen_min_ttl=255 if config.options.gtsm else None,
            # The routers get each flush while the tenants' burst is still being read.
            received_per_turn=config.received_per_turn,
        )
        self.network_side = Speaker(
            local_as=config.local_as,
            router_id=config.router_id,
            listen_port=None,
            on_event=self._network_event,
        )
        self._upstream: dict[str, PeerConfig] = {}  # by address
        self._by_address: dict[str, _TenantSide | None] = {}  # tenant of a session
        self._passwords: dict[IPv4Network | IPv6Network, str] = {}
        self._flush_pending: asyncio.TimerHandle | None = None
        self._sending: _Flush | None = None  # the flush being handed over
        self._next_chunk: asyncio.Handle | None = None
        self._flush_next: str | None = None  # a flush asked for meanwhile: its trigger
        self._learned = 0  # paths learned since the last flush (its debug line)
        self._batch = config.flush_first  # prefixes changed that call the next flush
        self._changed_at = 0.0  # loop time of the last change (for the coalescing delay)
        self._restarts: dict[str, asyncio.TimerHandle] = {}
        self.problems: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        await self.tenant_side.start()
        await self.network_side.start()

    async def stop(self) -> None:
        for handle in self._restarts.values():
            handle.cancel()
        if self._flush_pending is not None:
            self._flush_pending.cancel()
        if self._next_chunk is not None:
            self._next_chunk.cancel()
        await self.tenant_side.shutdown("relay stopping")
        await self.network_side.shutdown("relay stopping")

    @property
    def listen_port(self) -> int | None:
        return self.tenant_side.listen_port

    # -- the configuration ----------------------------------------------------------------

    async def apply(self, view: ClusterView) -> None:
        """Bring the relay to ``view``'s Tenants and BGPPeers (idempotent)."""
        self.problems = []
        upstream: dict[str, PeerConfig] = {}
        for key in sorted(view.bgp_peers):
            peer = view.bgp_peers[key]
            if self.config.peers and peer.name not in self.config.peers:
                continue
            setup = peer_setup(peer, view.secrets)
            if setup.config is None:
                self.problems.append(f"BGPPeer {key}: {setup.error}")
                continue
            # The relay never rewrites a next hop: IPv6 routes go over an IPv4 session
            # (and IPv4 over IPv6) with the tenant node's own next hop.
            upstream[setup.config.address] = replace(setup.config, next_hop_unchanged=True)
        mine = [a for cfg in upstream.values() for a in (cfg.address, cfg.local_address) if a]
        if self.config.listen_address:
            mine.append(self.config.listen_address)
        nets = (*self.config.options.protected, *(ip_network(a) for a in mine))
        self.options = replace(self.config.options, protected=nets)
        pools = {p.name: p for p in view.pools.values()}
        tenants: dict[str, _TenantSide] = {}
        policies: dict[str, TenantPolicy] = {}
        # Secrets by name (the first key in order wins, as a scan would find it): one pass
        # per apply, not one per Tenant.
        by_name: dict[str, Mapping[str, bytes]] = {}
        for key in sorted(view.secrets):
            by_name.setdefault(key.split("/")[-1], view.secrets[key])
        for tenant in sorted(view.tenants.values(), key=lambda t: t.name):
            side = tenants[tenant.name] = self._side_of(tenant, view, by_name)
            policies[tenant.name] = tenant_policy(tenant, pools, self.options, side.nodes)
            if not side.nodes:
                self.problems.append(
                    f"Tenant {tenant.name} has no registered nodes: no session of its"
                    " speakers is accepted (list them in the Tenant's spec.nodes, or run"
                    " its clusters' tenant agents, which publish them as TenantNodes)"
                )
        old_tenants, self.tenants = self.tenants, tenants
        self._by_address.clear()
        self._set_passwords(tenants)
        # Sessions whose tenant changed what the session itself depends on go.
        for address in list(self.tenant_side.peers):
            want = self._config_for(ip_address(address))
            have = self.tenant_side.peers[address].config
            if want != have:
                self._handle(self.rib.drop_session(address))
                await self.tenant_side.remove_peer(address, self._gone(address, want))
        self._handle(self.rib.set_policies(policies, self.options))
        for name in set(old_tenants) - set(tenants):
            for gauge in (self.metrics.accepted, self.metrics.sessions):
                with contextlib.suppress(KeyError):
                    gauge.remove(name)
        await self._set_upstream(upstream)
        self._schedule_flush()

    def _side_of(
        self, tenant: Tenant, view: ClusterView, secrets_by_name: Mapping[str, Mapping[str, bytes]]
    ) -> _TenantSide:
        operators = f"{self.config.password_secret}-{tenant.name}"
        secret = secrets_by_name.get(operators) or view.secrets.get(
            object_key(tenant.spec.namespace, self.config.password_secret)
        )
        password = None
        if secret is not None and "password" in secret:
            password = secret["password"].decode()
        return _TenantSide(
            tenant.name,
            tenant.spec.asn,
            tuple(tenant.node_networks()),
            password,
            registered_nodes(tenant, view.tenant_nodes.values()),
        )

    def _gone(self, address: str, want: PeerConfig | None) -> str:
        """Why a session goes (its Cease's communication, RFC 8203), and an event when its
        node was deregistered."""
        if want is not None:
            return "tenant configuration changed"
        tenant = self._tenant_of(ip_address(address))
        if tenant is None:
            return "the address is in no Tenant's node networks any more"
        self._event(
            RelayEvent(
                tenant.name,
                "SessionClosedNodeDeregistered",
                f"BGP session from {address} closed: no registered node of Tenant"
                f" {tenant.name} has that address any more; its paths are withdrawn",
                address=str(address),
            )
        )
        return "node deregistered"

    def _set_passwords(self, tenants: dict[str, _TenantSide]) -> None:
        want = {n: t.password for t in tenants.values() for n in t.networks if t.password}
        for net in set(self._passwords) - set(want):
            self.tenant_side.set_listen_password(net, None)
        for net, password in want.items():
            self.tenant_side.set_listen_password(net, password)
        self._passwords = want

    async def _set_upstream(self, upstream: dict[str, PeerConfig]) -> None:
        for address, cfg in self._upstream.items():
            if upstream.get(address) != cfg:
                await self.network_side.remove_peer(address, "BGPPeer changed or removed")
        for address, cfg in upstream.items():
            if self._upstream.get(address) != cfg:
                self.network_side.add_peer(cfg)
                if cfg.add_path is AddPathMode.OFF:
                    _log().warning(
                        "relay network peer without ADD-PATH: it gets one path per prefix,"
                        " not ECMP over the tenant's nodes (set addPath: send)",
                        peer=address,
                    )
        self._upstream = upstream

    # -- the tenant side --------------------------------------------------------------------

    def _tenant_of(self, address: Address) -> _TenantSide | None:
        for tenant in self.tenants.values():
            if any(address in n for n in tenant.networks):
                return tenant
        return None

    def _config_for(self, address: Address) -> PeerConfig | None:
        tenant = self._tenant_of(address)
        if tenant is None or tenant.asn is None or address not in tenant.nodes:
            return None
        opts = self.options
        return PeerConfig(
            address=str(address),
            peer_as=tenant.asn,
            passive=True,
            password=tenant.password,
            ttl_security=opts.gtsm,
            graceful_restart=True,
            stale_limit=opts.stale_time,
            add_path=AddPathMode.RECEIVE,
            description=f"tenant {tenant.name}",
        )

    def _resolve(self, address: Address) -> PeerConfig | None:
        config = self._config_for(address)
        if config is None:
            tenant = self._tenant_of(address)
            name = tenant.name if tenant else ""
            if tenant is None:
                why, reason = "UnknownAddress", "unknown-address"
                text = "the address is in no Tenant's node networks"
            elif tenant.asn is None:
                why, reason, text = "NoASN", "no-asn", f"Tenant {name} has no spec.asn"
            else:
                why, reason = "Unregistered", "unregistered-address"
                text = (
                    f"the address is in Tenant {name}'s node networks but no registered node"
                    f" of the Tenant has it ({len(tenant.nodes)} registered addresses)"
                )
            self.metrics.refused.labels(name, reason).inc()
            self._event(
                RelayEvent(
                    name,
                    f"SessionRefused{why}",
                    f"BGP connection from {address} refused: {text}",
                    address=str(address),
                )
            )
        return config

    def _tenant_event(self, peer: Peer, action: Action) -> None:
        address = peer.address
        tenant = self._by_address.get(address)
        if tenant is None:
            tenant = self._by_address[address] = self._tenant_of(ip_address(address))
            if tenant is None or ip_address(address) not in tenant.nodes:
                return
        if isinstance(action, RoutesLearned):
            self._learned += len(action.encodings)
            self._handle(
                self.rib.learn(
                    address, action.family, action.encodings, action.path, action.add_path
                )
            )
        elif isinstance(action, RoutesWithdrawn):
            self._handle(self.rib.withdraw(address, action.family, action.encodings))
        elif isinstance(action, StateChanged):
            if action.new == State.ESTABLISHED:
                self.rib.open_session(address, tenant.name)
                _log().info("relay tenant session established", tenant=tenant.name, peer=address)
            self._count_sessions()
        elif isinstance(action, UpdateProblems) and action.treat_as_withdraw:
            self.metrics.rejected.labels(tenant.name, Reason.TREAT_AS_WITHDRAW.value).inc()
            _log().warning(
                "relay tenant sent a malformed UPDATE: treated as withdraw",
                tenant=tenant.name,
                peer=address,
                problems="; ".join(action.problems),
            )
        elif isinstance(action, NotificationSent):
            note = action.notification
            if note.code == ErrorCode.OPEN_MESSAGE and note.subcode == OpenSubcode.BAD_PEER_AS:
                self.metrics.refused.labels(tenant.name, "bad-peer-as").inc()
                self._event(
                    RelayEvent(
                        tenant.name,
                        "SessionRefusedBadPeerAS",
                        f"BGP session from {address} refused: {action.reason}",
                        address=str(address),
                    )
                )

    def _count_sessions(self) -> None:
        counts = dict.fromkeys(self.tenants, 0)
        for address, peer in self.tenant_side.peers.items():
            tenant = self._tenant_of(ip_address(address))
            if tenant is not None and peer.established:
                counts[tenant.name] = counts.get(tenant.name, 0) + 1
        for name, n in counts.items():
            self.metrics.sessions.labels(name).set(n)

    def _handle(self, out: Outcome) -> None:
        for (tenant, reason), n in out.rejected.items():
            self.metrics.rejected.labels(tenant, reason).inc(n)
        for tenant, n in out.scrubbed.items():
            self.metrics.scrubbed.labels(tenant).inc(n)
        for over in out.over_limit:
            self._event(
                RelayEvent(
                    over.tenant,
                    "MaxPrefixReached",
                    f"session {over.address} has more than {over.limit} routes"
                    f" {self.options.max_prefix_count} (action {self.options.max_prefix_action})",
                    address=str(over.address),
                )
            )
        for down in out.teardown:
            asyncio.get_running_loop().call_soon(self._teardown, down.address, down.limit)
        if out.changed:
            if self.rib.pending_changes() >= self._batch:
                self._flush("batch")
            else:
                self._changed_at = asyncio.get_running_loop().time()
                self._schedule_flush()

    def _teardown(self, address: str, limit: int) -> None:
        peer = self.tenant_side.peers.get(address)
        tenant = self._tenant_of(ip_address(address))
        if peer is None or tenant is None:
            return
        restart = self.options.max_prefix_restart
        counted = self.options.max_prefix_count
        peer.stop(
            Notification.cease(CeaseSubcode.MAXIMUM_PREFIXES_REACHED),
            f"more than {limit} routes {counted}",
        )
        self._handle(self.rib.drop_session(address))
        self.metrics.refused.labels(tenant.name, Reason.MAX_PREFIX.value).inc()
        self._event(
            RelayEvent(
                tenant.name,
                "MaxPrefixReached",
                f"session {address} torn down: more than {limit} routes {counted}"
                f" (Cease/Maximum Number of Prefixes Reached); it may come back in {restart:g}s",
                address=address,
            )
        )
        old = self._restarts.pop(address, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._restarts[address] = loop.call_later(restart, self._restart, address)

    def _restart(self, address: str) -> None:
        self._restarts.pop(address, None)
        peer = self.tenant_side.peers.get(address)
        if peer is not None:
            peer.start()

    # -- the network side -------------------------------------------------------------------

    def _network_event(self, peer: Peer, action: Action) -> None:
        """A router's session established without a family its BGPPeer asks for: that
        family's routes never reach it, which the operator must hear of."""
        if not isinstance(action, StateChanged) or action.new != State.ESTABLISHED:
            return
        neg = peer.negotiated
        if neg is None:
            return
        for fam in sorted(peer.config.families - neg.families):
            version = "IPv6" if fam == IPV6_UNICAST else "IPv4"
            self._event(
                RelayEvent(
                    "",
                    "FamilyNotNegotiated",
                    f"router {peer.address} did not negotiate {fam}: the tenants' {version}"
                    f" routes are not sent to it. Enable {fam} on the router's session"
                    f" (BIRD: an {version.lower()} channel in its protocol bgp; FRR:"
                    f" address-family {version.lower()} unicast, neighbor <relay> activate),"
                    f" or leave {fam} out of the BGPPeer's families",
                )
            )

    def _schedule_flush(self) -> None:
        if self._flush_pending is None:
            loop = asyncio.get_running_loop()
            first = loop.time()
            self._flush_pending = loop.call_later(self.config.flush_delay, self._due, first)

    def _due(self, first: float) -> None:
        """The coalescing delay passed since ``first`` change: flush, unless changes
        still come (then at the next pause, the burst's next batch, or the longest
        delay)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        quiet = now - self._changed_at
        if quiet >= self.config.flush_delay:
            self._flush()
            return
        if now - first >= self.config.flush_max_delay:
            self._flush("longest")  # a burst the relay reads slowly: it goes on
            return
        wait = min(self.config.flush_delay - quiet, first + self.config.flush_max_delay - now)
        self._flush_pending = loop.call_later(wait, self._due, first)

    def _flush(self, trigger: str = "delay") -> None:
        """Hand the routers what changed; ``trigger``: the coalescing delay (a pause),
        a burst's batch filled, or the longest delay passed while changes still came.
        While a flush is still being handed over, this one follows it as soon as it is
        done (one at a time: each prefix diffed once per flush)."""
        if self._flush_pending is not None:
            self._flush_pending.cancel()
            self._flush_pending = None
        if self._sending is not None:
            self._flush_next = self._flush_next or trigger
            return
        changes = self.rib.take_changes(publish=False)  # each chunk publishes its own
        queue = deque((family, sorted(encs)) for family, encs in changes.items() if encs)
        self._sending = _Flush(
            trigger,
            self.rib.compiled(),
            queue,
            prefixes=sum(len(encs) for _, encs in queue),
            learned=self._learned,
        )
        self._learned = 0
        # A burst's flushes grow; after a pause the next burst starts small again.
        if trigger == "batch":
            self._batch = min(self._batch * 2, self.config.flush_batch)
        elif trigger == "delay":
            self._batch = self.config.flush_first
        self._send_chunk()

    def _send_chunk(self) -> None:
        """Hand the routers the flush's next ``flush_chunk`` prefixes (in address order),
        and the rest on the next turn of the event loop. Each chunk's prefixes are
        published and diffed as they are then (level-triggered: one withdrawn since the
        flush began is not sent; what changes after its chunk is in the next flush)."""
        self._next_chunk = None
        flush = self._sending
        if flush is None:
            return
        started = time.perf_counter()
        chunk: dict[Family, list[bytes]] = {}
        room = self.config.flush_chunk
        while flush.queue and room > 0:
            family, encs = flush.queue[0]
            part = encs[:room]
            chunk.setdefault(family, []).extend(part)
            self.rib.publish(family, part)
            room -= len(part)
            if len(part) == len(encs):
                flush.queue.popleft()
            else:
                flush.queue[0] = (family, encs[len(part) :])
        sent = self._bytes_sent()
        self.network_side.set_compiled(flush.routes, chunk)
        for peer in self.network_side.peers.values():
            peer.flush_now()
        flush.bytes += self._bytes_sent() - sent
        flush.chunks += 1
        flush.seconds += time.perf_counter() - started
        if flush.queue:
            self._next_chunk = asyncio.get_running_loop().call_soon(self._send_chunk)
            return
        self._sending = None
        self._flushed(flush)
        if self._flush_next is not None:
            trigger, self._flush_next = self._flush_next, None
            self._flush(trigger)

    def _bytes_sent(self) -> int:
        return sum(p.counters.bytes_sent for p in self.network_side.peers.values())

    def _flushed(self, flush: _Flush) -> None:
        """A flush handed over: its debug line and the gauges."""
        # The timeline of a burst (bench/relay.py --timeline): when each flush ended, what
        # called it, what it carried and what it cost.
        _log().debug(
            "relay flush",
            trigger=flush.trigger,
            prefixes=flush.prefixes,
            learned=flush.learned,
            bytes=flush.bytes,
            chunks=flush.chunks,
            seconds=round(flush.seconds, 4),
            wall=round(time.perf_counter() - flush.started, 4),
        )
        self.metrics.prefixes.set(self.rib.prefix_count())
        self.metrics.paths.set(self.rib.path_count())
        accepted = self.rib.accepted_counts()
        for name in self.tenants:
            self.metrics.accepted.labels(name).set(accepted.get(name, 0))

    def _event(self, event: RelayEvent) -> None:
        say = _log().warning if event.warning else _log().info
        say("relay event", tenant=event.tenant, reason=event.reason, message=event.message)
        if self.on_event is not None:
            with contextlib.suppress(Exception):
                self.on_event(event)

    # -- explain ----------------------------------------------------------------------------

    def explain(self, tenant: str) -> dict[str, Any]:
        """A tenant's sessions, its filter, and every route it sent with the deciding rule
        (BIRD's ``show route filtered``, plus the accepted ones)."""
        policy = self.rib.policies.get(tenant)
        if policy is None:
            return {"tenant": tenant, "error": f"no Tenant {tenant!r}"}
        sessions = []
        for address, peer in sorted(self.tenant_side.peers.items()):
            side = self._tenant_of(ip_address(address))
            if side is not None and side.name == tenant:
                sessions.append({"address": address, "state": peer.state.value})
        opts = self.options
        routes = []
        for v in self.rib.verdicts(tenant):
            entry: dict[str, Any] = {
                "prefix": str(v.prefix),
                "from": v.session,
                "next_hop": v.next_hop,
                "as_path": list(v.as_path),
                "verdict": "accepted" if v.reason is None else "filtered",
            }
            if v.reason is not None:
                entry["reason"] = v.reason
                entry["rule"] = None if v.rule is None else v.rule + 1
                entry["why"] = DESCRIPTIONS.get(Reason(v.reason), v.reason)
            routes.append(entry)
        return {
            "tenant": tenant,
            "asn": policy.asn,
            "allocation": [str(n) for n in policy.allocation],
            "node_networks": [str(n) for n in policy.node_networks],
            "nodes": [str(a) for a in policy.nodes],
            "sessions": sessions,
            "max_prefix": {
                "limit": opts.max_prefixes,
                "counts": str(opts.max_prefix_count),
                "action": str(opts.max_prefix_action),
            },
            "max_as_path_length": opts.max_as_path_length,
            "communities": {
                "allowed": sorted(map(format_community, policy.communities)),
                "large_allowed": sorted(map(str, policy.large_communities)),
                "well_known": str(opts.well_known),
                "rtbh": policy.rtbh,
            },
            "filter": str(policy.filter),
            "routes": routes,
        }


__all__ = ["Relay", "RelayConfig", "RelayEvent"]
