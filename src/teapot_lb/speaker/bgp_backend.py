"""BGP backend: one :class:`teapot_lb.bgp.Speaker`, a peer per BGPPeer selecting this node.

Peers are keyed by BGPPeer name. A BGPPeer whose session parameters change is removed and
added again (that session resets; no other does); a change of its BFD settings alone (its
BFDProfile edited, named, or dropped) goes to the running BFD session, and BGP is left
alone (docs/bfd.md). Routes are set per peer: only peers
whose desired routes changed get :meth:`Speaker.set_routes`, and the speaker's
Adj-RIB-Out sends only the difference, so a Service change never resets a session.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Protocol

from teapot_lb import log
from teapot_lb.announce.announcement import Announcement, BGPRoute, Decision, Mode
from teapot_lb.announce.plan import PlanOptions
from teapot_lb.bfd.session import Parameters as BfdParameters
from teapot_lb.bgp import Peer, PeerConfig, PeerCounters, Speaker, State
from teapot_lb.bgp.attributes import Desired
from teapot_lb.bgp.fsm import Action, StateChanged
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST, AddPathMode
from teapot_lb.cluster import ClusterView, UnknownBFDProfile, object_key
from teapot_lb.model import AddressFamily, BGPPeer, Node, matches_any, parse_duration
from teapot_lb.model.bfd import BFDParameters
from teapot_lb.speaker.backend import Step, Wiring
from teapot_lb.speaker.desired import bgp_routes

_FAMILIES = {AddressFamily.IPV4_UNICAST: IPV4_UNICAST, AddressFamily.IPV6_UNICAST: IPV6_UNICAST}
DEFAULT_CONNECT_RETRY = 2.0  # without connectTime: 2s, doubling on each failure ...
DEFAULT_CONNECT_RETRY_MAX = 60.0  # ... up to 60s


@dataclass(frozen=True)
class PeerSetup:
    """A BGPPeer as this node's speaker runs it, or why it cannot."""

    name: str
    config: PeerConfig | None
    error: str | None = None
    warning: str | None = None  # runs, but not quite as configured (logged when it changes)


# A Node annotation: this node's BGP identifier (a dotted quad, unique among the routers
# of an AS); the node-level setting where the cluster-wide BGPPeer cannot say it per node.
ANNOTATION_ROUTER_ID = "lb.teapot.io/bgp-router-id"
# Derived identifiers fall in 240.0.0.0/4 (reserved, RFC 1112 §4): a number, not an
# address anybody could mistake for one of the node's.
_DERIVED = IPv4Address("240.0.0.0")


@dataclass(frozen=True)
class RouterID:
    """The BGP identifier chosen for a node and where it comes from."""

    address: IPv4Address
    source: str  # "annotation", "routerID", "InternalIP" or "derived"
    problem: str | None = None  # the annotation did not parse


def router_id_for(node: Node | None, node_name: str, peers: list[BGPPeer]) -> RouterID:
    """The node's `lb.teapot.io/bgp-router-id` annotation, else a selecting BGPPeer's
    `routerID`, else the node's IPv4 InternalIP, else a stable hash of the node name in
    240.0.0.0/4 (an IPv6-only node: set the annotation, see docs/bgp.md)."""
    problem = None
    text = node.metadata.annotations.get(ANNOTATION_ROUTER_ID) if node is not None else None
    if text is not None:
        try:
            found = IPv4Address(text.strip())
            if int(found) == 0:
                raise ValueError("0.0.0.0 is not a BGP identifier (RFC 6286)")
            return RouterID(found, "annotation")
        except ValueError as err:
            problem = f"Node {node_name}: annotation {ANNOTATION_ROUTER_ID}={text!r}: {err}"
    for p in peers:
        if p.spec.router_id is not None:
            return RouterID(IPv4Address(str(p.spec.router_id)), "routerID", problem)
    if node is not None:
        for a in node.addresses():
            if a.version == 4:
                return RouterID(IPv4Address(str(a)), "InternalIP", problem)
    digest = hashlib.sha256(node_name.encode()).digest()
    derived = int(_DERIVED) | (int.from_bytes(digest[:4], "big") & 0x0FFFFFFF) | 1
    return RouterID(IPv4Address(derived), "derived", problem)


def router_id_of(node: Node | None, node_name: str, peers: list[BGPPeer]) -> IPv4Address:
    """The BGP identifier (:func:`router_id_for`)."""
    return router_id_for(node, node_name, peers).address


def peer_setups(view: ClusterView, node_name: str) -> dict[str, PeerSetup]:
    """Every BGPPeer selecting this node, as a speaker peer configuration (pure)."""
    node = view.nodes.get(node_name)
    labels = node.labels if node is not None else {}
    out: dict[str, PeerSetup] = {}
    for key in sorted(view.bgp_peers):
        peer = view.bgp_peers[key]
        if node is None or not matches_any(peer.spec.node_selectors, labels):
            continue
        try:
            bfd = view.bfd_parameters(peer)
        except UnknownBFDProfile as err:
            # Validation refuses this; the profile was deleted since. Keep the session (and
            # the routes) and say so, rather than withdraw everything for a missing profile.
            setup = peer_setup(peer, view.secrets, node)
            out[peer.name] = replace(setup, warning=f"running without BFD: {err}")
            continue
        out[peer.name] = peer_setup(peer, view.secrets, node, bfd)
    return out


def bfd_session(params: BFDParameters) -> BfdParameters:
    """A BFDProfile's settings as the BFD session runs them: intervals and multiplier
    (RFC 5880 §6.8.1), the passive role (§6.1), and on a multihop session the lowest TTL
    a packet may arrive with (RFC 5883 §5; a single hop always wants 255)."""
    return BfdParameters(
        desired_min_tx=params.desired_min_tx_us,
        required_min_rx=params.required_min_rx_us,
        detect_mult=params.detect_multiplier,
        passive=params.passive,
        min_ttl=params.minimum_ttl if params.multihop else None,
    )


def peer_setup(
    peer: BGPPeer,
    secrets: Mapping[str, Mapping[str, bytes]],
    node: Node | None = None,
    bfd: BFDParameters | None = None,
) -> PeerSetup:
    """The speaker's peer configuration. Next hop: the session's local address for its own
    family; for the other family the node's InternalIP of that family (IPv6 routes over an
    IPv4 session need an IPv6 next hop)."""
    spec = peer.spec
    if spec.peer_address is None:
        return PeerSetup(peer.name, None, "unnumbered BGP (interface) is not implemented yet")
    password = spec.password
    if spec.password_secret is not None:
        ref = spec.password_secret
        key = object_key(ref.namespace or peer.metadata.namespace, ref.name)
        data = secrets.get(key)
        if data is None or "password" not in data:
            return PeerSetup(peer.name, None, f"Secret {key} with key 'password' not found")
        password = data["password"].decode()
    addresses = node.addresses() if node is not None else []
    v4 = next((IPv4Address(str(a)) for a in addresses if a.version == 4), None)
    v6 = next((IPv6Address(str(a)) for a in addresses if a.version == 6), None)
    session_v6 = ip_address(str(spec.peer_address)).version == 6
    # Empty: offer each family this node can give a next hop for (the session's own, and
    # the other one if the node has an InternalIP of it); the router keeps what it
    # supports too (RFC 4760 negotiation). An IPv6-only node offers no IPv4 unicast.
    offered = {IPV6_UNICAST if session_v6 else IPV4_UNICAST}
    if v4 is not None or node is None:  # (no Node known: offer both, as before)
        offered.add(IPV4_UNICAST)
    if v6 is not None or node is None:
        offered.add(IPV6_UNICAST)
    families = frozenset(_FAMILIES[f] for f in spec.families) or frozenset(offered)
    # connectTime set: a fixed ConnectRetry interval; unset: 2s doubling up to 60s.
    if spec.connect_time is not None:
        connect_retry = connect_retry_max = max(parse_duration(spec.connect_time), 1.0)
    else:
        connect_retry, connect_retry_max = DEFAULT_CONNECT_RETRY, DEFAULT_CONNECT_RETRY_MAX
    keepalive = (
        min(peer.keepalive_time_seconds(), 65535.0) if spec.keepalive_time is not None else None
    )
    config = PeerConfig(
        address=str(ip_address(str(spec.peer_address))),
        peer_as=spec.peer_asn if spec.dynamic_asn is None else None,
        port=spec.peer_port,
        local_address=str(spec.source_address) if spec.source_address is not None else None,
        local_as=spec.my_asn,
        hold_time=int(peer.hold_time_seconds()),
        keepalive_time=keepalive,
        password=password,
        ebgp_multihop=255 if spec.ebgp_multi_hop else None,
        families=families,
        graceful_restart=spec.enable_graceful_restart,
        connect_retry=connect_retry,
        connect_retry_max=connect_retry_max,
        next_hop_v4=v4 if session_v6 else None,
        next_hop_v6=v6 if not session_v6 else None,
        description=peer.name,
        bfd=bfd_session(bfd) if bfd is not None else None,
        add_path=AddPathMode[spec.add_path.name],
    )
    return PeerSetup(peer.name, config)


def only_bfd_differs(a: PeerConfig, b: PeerConfig) -> bool:
    """Whether two peer configurations are the same BGP session (BFD aside)."""
    return replace(a, bfd=None) == replace(b, bfd=None)


class PeerLike(Protocol):
    """What the speaker reads of a :class:`teapot_lb.bgp.Peer` (state, metrics, status)."""

    @property
    def state(self) -> State: ...

    @property
    def established(self) -> bool: ...

    @property
    def last_error(self) -> str | None: ...

    @property
    def prefixes_sent(self) -> int: ...

    @property
    def counters(self) -> PeerCounters: ...


class SpeakerLike(Protocol):
    """What the backend uses of :class:`teapot_lb.bgp.Speaker` (a fake in unit tests)."""

    @property
    def peers(self) -> Mapping[str, PeerLike]: ...

    async def start(self) -> None: ...

    def add_peer(self, config: PeerConfig) -> PeerLike: ...

    async def remove_peer(self, address: str, communication: str = "") -> None: ...

    def set_bfd(self, address: str, parameters: BfdParameters | None) -> None: ...

    async def replace_routes(self, routes: Mapping[str, Desired | None], *, peer: str) -> None: ...

    def change_routes(
        self, routes: Mapping[str, Desired | None], withdrawn: Iterable[str], *, peer: str
    ) -> None: ...

    async def shutdown(
        self, communication: str = "", *, withdraw: bool = False, graceful_restart: bool = False
    ) -> None: ...


SpeakerFactory = Callable[[int, IPv4Address], SpeakerLike]
SessionEvents = Callable[[Peer, Action], None]


def on_session_change(notify: Callable[[], None]) -> SessionEvents:
    """A :class:`teapot_lb.bgp.Speaker` event callback that calls `notify` when a session
    comes up or goes down: that changes the explanations (and the status); routes the
    router sends us do not concern the plan."""

    def on_event(_peer: Peer, action: Action) -> None:
        if isinstance(action, StateChanged) and State.ESTABLISHED in (action.old, action.new):
            notify()

    return on_event


def real_speaker(
    listen_port: int | None,
    on_event: SessionEvents | None = None,
    *,
    restarting: bool = False,
) -> SpeakerFactory:
    """``restarting``: the previous run did not stop gracefully (see
    :class:`teapot_lb.speaker.run_marker.RunMarker`); the OPENs carry the graceful-restart
    R bit."""

    def make(local_as: int, router_id: IPv4Address) -> SpeakerLike:
        return Speaker(
            local_as=local_as,
            router_id=router_id,
            listen_port=listen_port,
            on_event=on_event,
            restarting=restarting,
        )

    return make


class BGPBackend:
    """Holds the speaker's peers and per-peer routes; :meth:`apply` is idempotent.

    A :class:`~teapot_lb.speaker.backend.Backend` of the node speaker."""

    def __init__(self, factory: SpeakerFactory) -> None:
        self._factory = factory
        self.speaker: SpeakerLike | None = None
        self.setups: dict[str, PeerSetup] = {}  # by BGPPeer name
        self.active: dict[str, PeerConfig] = {}  # BGPPeer name -> peer in the speaker
        self.routes: dict[str, dict[str, Desired]] = {}  # by BGPPeer name, prefix text
        self._duplicates: dict[str, str] = {}
        self.router_id: IPv4Address | None = None
        self.session_resets = 0  # peers re-created because their configuration changed
        self.bfd_changes = 0  # BFD settings changed on a running peer, BGP left alone
        self._failing: dict[str, str] = {}  # errors() after the last apply_plan
        self._router_id_said: RouterID | None = None  # the last router ID choice logged
        self.table = RouteTable()  # the plan's BGP routes, shaped, kept between steps
        self._log = log.get("speaker.bgp")

    # --- the node speaker's backend protocol ------------------------------------------------

    @property
    def mode(self) -> Mode:
        return Mode.BGP

    def plan_options(self, options: PlanOptions) -> PlanOptions:
        """The BGPPeers whose session is Established: a route is announced to those only
        (the others cannot have it yet). Before the first session comes up, none; the
        speaker plans again whenever a session enters or leaves Established
        (:func:`on_session_change`)."""
        up: list[str] = []
        if self.speaker is not None:
            for name in self.setups:
                address = self.address_of(name)
                peer = self.speaker.peers.get(address) if address else None
                if peer is not None and peer.state is State.ESTABLISHED:
                    up.append(name)
        return replace(options, established_peers=tuple(up))

    async def apply_plan(self, step: Step) -> None:
        view = step.view
        setups = peer_setups(view, step.node)
        peers = [view.bgp_peers[k] for k in sorted(view.bgp_peers)]
        selected = [p for p in peers if p.name in setups]
        if step.delta is None:  # every route compared: in a worker thread (10,000 or more)
            routes = await asyncio.to_thread(self.table.update, step.plan.of_mode(Mode.BGP))
        else:
            routes = self.table.change(*step.delta.of_mode(Mode.BGP))
        chosen = router_id_for(view.nodes.get(step.node), step.node, selected)
        if setups and chosen != self._router_id_said:
            self._router_id_said = chosen
            if chosen.problem is not None:
                self._log.warning("bgp router ID annotation ignored", problem=chosen.problem)
            if chosen.source == "derived":
                self._log.warning(
                    "bgp router ID derived from the node name: the node has no IPv4 address;"
                    f" set the Node annotation {ANNOTATION_ROUTER_ID} (unique per AS)",
                    router_id=str(chosen.address),
                    node=step.node,
                )
        changed = None if step.delta is None else self.table.changed  # None: the resync
        await self.apply(setups, routes, chosen.address, changed)
        self.table.clear_changed()  # every changed table was handed to the speaker
        self._failing = self.errors()  # once per step, not once per decision

    def failure_inputs(self) -> object:
        return dict(self._failing)

    def failure(self, decision: Decision) -> str | None:
        """Why the BGPPeers of a decision are not in use (as of the last step)."""
        errors = self._failing
        peers = (*decision.peers, *decision.waiting)
        bad = [f"BGPPeer {p}: {errors[p]}" for p in peers if p in errors]
        return "; ".join(bad) or None

    async def withdraw(self) -> None:
        await self.shutdown()

    # --- peers and routes -------------------------------------------------------------------

    def errors(self) -> dict[str, str]:
        """BGPPeer name → why it is not in use on this node."""
        out = {n: s.error for n, s in self.setups.items() if s.error is not None}
        out.update(self._duplicates)
        return out

    def address_of(self, peer_name: str) -> str | None:
        config = self.active.get(peer_name)
        return config.address if config is not None else None

    async def apply(
        self,
        setups: Mapping[str, PeerSetup],
        routes: Mapping[str, Mapping[str, Desired]],
        router_id: IPv4Address,
        changed: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        """Peers per BGPPeer name as `setups` says, each with its `routes` (idempotent).
        `changed`: per BGPPeer, the only prefixes whose routes may differ from the last
        call's (None: compare every peer's whole table); a peer the speaker already holds
        a table for gets those prefixes alone (:meth:`Speaker.change_routes`), and no table
        is copied or compared whole."""
        for name, setup in setups.items():
            old = self.setups.get(name)
            if setup.error is not None and (old is None or old.error != setup.error):
                self._log.warning("bgp peer unusable", peer=name, error=setup.error)
            if setup.warning is not None and (old is None or old.warning != setup.warning):
                self._log.warning("bgp peer degraded", peer=name, warning=setup.warning)
        self.setups = dict(setups)
        desired = {n: s.config for n, s in setups.items() if s.config is not None}
        if self.speaker is None:
            if not desired:
                return
            first = next(iter(desired.values()))
            self.speaker = self._factory(first.local_as or 0, router_id)
            self.router_id = router_id
            await self.speaker.start()
        elif router_id != self.router_id and desired:
            self._log.warning(
                "bgp router ID changed; applies when the speaker restarts",
                running=str(self.router_id),
                wanted=str(router_id),
            )
        speaker = self.speaker
        for name, config in list(self.active.items()):
            wanted = desired.get(name)
            if wanted is not None and wanted.bfd != config.bfd and only_bfd_differs(wanted, config):
                speaker.set_bfd(config.address, wanted.bfd)
                self.active[name] = wanted
                self.bfd_changes += 1
                self._log.info("bgp peer bfd changed", peer=name, address=config.address,
                               bfd=str(wanted.bfd))  # fmt: skip
                continue
            if wanted != config:
                await speaker.remove_peer(config.address, "peer configuration changed")
                del self.active[name]
                self.routes.pop(name, None)
                if name in desired:
                    self.session_resets += 1
        self._duplicates = {}
        in_use = {c.address: n for n, c in self.active.items()}
        for name, config in sorted(desired.items()):
            if name in self.active:
                continue
            if config.address in in_use:
                self._duplicates[name] = f"BGPPeer {in_use[config.address]} has the same address"
                continue
            speaker.add_peer(config)
            self.active[name] = config
            in_use[config.address] = name
            self._log.info("bgp peer added", peer=name, address=config.address)
        for name, config in self.active.items():
            held = self.routes.get(name)
            if changed is not None and held is not None:
                self._change_routes(name, config.address, held, routes.get(name, {}),
                                    changed.get(name, ()))  # fmt: skip
                continue
            want = dict(routes.get(name, {}))
            if held is not None and held == want:
                continue
            # Prefixes as text (the speaker parses what it encodes): a network object per
            # route handed over would weigh ~340 bytes more than the text the table holds.
            await speaker.replace_routes(want, peer=config.address)
            self.routes[name] = want

    def _change_routes(
        self,
        name: str,
        address: str,
        held: dict[str, Desired],
        want: Mapping[str, Desired],
        prefixes: Collection[str],
    ) -> None:
        """Hand the speaker the changed prefixes of one peer's table only."""
        assert self.speaker is not None
        put: dict[str, Desired] = {}
        gone: list[str] = []
        for p in prefixes:
            new, old = want.get(p), held.get(p)
            if new is None:
                if old is not None:
                    gone.append(p)
                    del held[p]
            elif new != old:
                put[p] = new
                held[p] = new
        if put or gone:
            self.speaker.change_routes(put, gone, peer=address)

    async def shutdown(self) -> None:
        """Withdraw every route, then close every session (Cease/Administrative Shutdown)."""
        if self.speaker is not None:
            await self.speaker.shutdown("teapot-lb speaker stopping", withdraw=True)
            self.speaker = None


class RouteTable:
    """:func:`~teapot_lb.speaker.desired.bgp_routes` of the plan's BGP routes, kept between
    steps: a change reshapes only the (peer, prefix) pairs whose routes changed (each pair
    is shaped from its own routes alone), so one changed Service costs its routes, not
    every route. `desired` is the result (changed in place); `changed`, the prefixes per
    peer whose shape may have changed since :meth:`clear_changed` (None: any peer's, any
    prefix)."""

    def __init__(self) -> None:
        # The routes held, per peer and prefix: the route itself, or a tuple of the pair's
        # routes (each once) when it has several. Almost every pair has one route: no
        # (peer, prefix) key tuple, one-route container or set of every route per route
        # (~150 bytes a route at 100k Services); a change reshapes its pair's routes
        # anyway, so replacing its tuple costs no more.
        self._held: dict[str, dict[str, BGPRoute | tuple[BGPRoute, ...]]] = {}
        self.desired: dict[str, dict[str, Desired]] = {}
        self.changed: dict[str, set[str]] | None = None

    def clear_changed(self) -> None:
        self.changed = {}

    def _routes(self) -> set[BGPRoute]:
        return {r for per_peer in self._held.values() for held in per_peer.values()
                for r in _each(held)}  # fmt: skip

    def update(self, announcements: set[Announcement]) -> dict[str, dict[str, Desired]]:
        """The shaped routes of the BGP announcements (the plan's `of_mode(Mode.BGP)`),
        compared with the routes held (the whole plan: the resync path)."""
        new = announcements
        held = self._routes()
        added, removed = new - held, held - new
        if len(added) + len(removed) > max(16, len(new) // 8):
            self._rebuild(new)
            return self.desired
        return self.change(added, removed)

    def change(
        self, added: Iterable[Announcement], removed: Iterable[Announcement]
    ) -> dict[str, dict[str, Desired]]:
        """The shaped routes after some BGP announcements appeared and others went (a
        plan's delta: :class:`~teapot_lb.announce.totals.PlanDelta`)."""
        touched: set[tuple[str, str]] = set()
        for r in removed:
            if not isinstance(r, BGPRoute):
                continue
            per_peer = self._held.get(r.peer)
            was = None if per_peer is None else per_peer.get(r.prefix)
            if per_peer is None or was is None or r not in _each(was):
                continue
            rest = tuple(x for x in _each(was) if x != r)
            if rest:
                per_peer[r.prefix] = rest[0] if len(rest) == 1 else rest
            else:
                del per_peer[r.prefix]
                if not per_peer:
                    del self._held[r.peer]
            touched.add((r.peer, r.prefix))
        for r in added:
            if not isinstance(r, BGPRoute):
                continue
            per_peer = self._held.setdefault(r.peer, {})
            was = per_peer.get(r.prefix)
            if was is None:
                per_peer[r.prefix] = r
            elif r not in _each(was):
                per_peer[r.prefix] = (*_each(was), r)
            else:
                continue
            touched.add((r.peer, r.prefix))
        changed = self.changed
        for peer, prefix in touched:
            if changed is not None:
                changed.setdefault(peer, set()).add(prefix)
            group = self._held.get(peer, {}).get(prefix)
            per_peer_desired = self.desired.setdefault(peer, {})
            if group is not None:
                per_peer_desired[prefix] = bgp_routes(_each(group))[peer][prefix]
            else:
                per_peer_desired.pop(prefix, None)
                if not per_peer_desired:
                    del self.desired[peer]
        return self.desired

    def _rebuild(self, announcements: set[Announcement]) -> None:
        self.changed = None
        routes = [a for a in announcements if isinstance(a, BGPRoute)]
        held: dict[str, dict[str, BGPRoute | tuple[BGPRoute, ...]]] = {}
        for r in routes:  # each once: they come from a set
            per_peer = held.setdefault(r.peer, {})
            was = per_peer.get(r.prefix)
            per_peer[r.prefix] = r if was is None else (*_each(was), r)
        self._held = held
        self.desired = bgp_routes(routes)


def _each(held: BGPRoute | tuple[BGPRoute, ...]) -> tuple[BGPRoute, ...]:
    """The routes of one (peer, prefix) pair as :class:`RouteTable` holds them."""
    return held if isinstance(held, tuple) else (held,)


def build(wiring: Wiring) -> BGPBackend:
    """The backend of `--modes bgp`: our BGP speaker, listening on `bgp_port`."""
    events = on_session_change(wiring.notify)
    return BGPBackend(real_speaker(wiring.bgp_port, events, restarting=wiring.restarting))
