"""teapot-lb's native BGP-4 speaker: sans-I/O cores plus a thin asyncio adapter.

Layers, one idea per module (only ``peer`` and ``speaker`` do I/O):

- :mod:`teapot_lb.bgp.wire` — typed messages with ``pack``/``unpack``; every decode
  failure is a :class:`~teapot_lb.bgp.wire.CodecError` carrying its NOTIFICATION.
  ``decode_update_routes`` is the receive path's UPDATE decoder: prefixes stay NLRI
  encodings (bytes) until someone asks for ``ipaddress`` objects.
- :mod:`teapot_lb.bgp.attributes` — :class:`RouteAttributes`, the one route-attribute type
  (what to advertise with a prefix), and :class:`ReceivedPath` (a path as received).
- :mod:`teapot_lb.bgp.policy` — import/export policy as data: a :class:`Filter` is a list
  of :class:`Rule` s (conditions on prefix, next hop, AS path, communities, origin; actions
  accept, reject with a reason, set/strip attributes), run by one interpreter (a package:
  ``prefixes``, ``conditions``, ``actions``, ``filter``).
- :mod:`teapot_lb.bgp.rib` — :class:`AdjRibOut` (desired vs. sent → minimal packed
  UPDATEs, after the export filter), :class:`AdjRibIn` (received routes after the import
  filter, per family by NLRI encoding; stale marking for graceful restart; why each
  rejected prefix was rejected); a package: ``compiled``, ``adj_out``, ``adj_in``.
- :mod:`teapot_lb.bgp.fsm` — :class:`Session`, the RFC 4271 §8 state machine: events in
  (``start()``, ``stop()``, ``connection_made()``, ``connection_failed()``,
  ``connection_lost()``, ``data_received(bytes)``, ``timer_expired(Timer)``), a list of
  actions out (``Send``, ``Connect``, ``CloseConnection``, ``ArmTimer``, ``CancelTimer``,
  ``StateChanged``, ``OpenReceived``, ``RoutesLearned``, ``RoutesWithdrawn``,
  ``EndOfRib``, ``RouteRefreshRequested``, ``NotificationSent``,
  ``NotificationReceived``, ``UpdateProblems``, ``SessionDown``).
  ``keep_locally_initiated(local_id, remote_id)`` decides collisions (§6.8).
- :mod:`teapot_lb.bgp.neighbor` — :class:`~.neighbor.Neighbor`, everything for one
  configured neighbor, sans I/O: one session per connection, collisions, a reconnect as
  the peer's graceful restart, the RIBs and their filters, stale-route and flush timers,
  the export context; events in, orders out (:mod:`teapot_lb.bgp.neighbor_orders`:
  ``Dial``, ``Adopt``, ``Refuse``, ``Transmit``, ``Close``, ``Release``, timer orders,
  ``Report``).
- :mod:`teapot_lb.bgp.config` — :class:`PeerConfig`.
- :mod:`teapot_lb.bgp.peer` — asyncio: a :class:`Peer` carries out its neighbor's orders
  (sockets, connection attempts, timers). :mod:`teapot_lb.bgp.transport`: MD5 and TTL.
- :mod:`teapot_lb.bgp.speaker` — asyncio, the entry point:

  .. code-block:: python

      speaker = Speaker(local_as=65001, router_id="192.0.2.10", listen_port=179)
      await speaker.start()                       # listens (listen_port=None: no listener)
      peer = speaker.add_peer(PeerConfig(address="192.0.2.1", peer_as=65000,
                                          password="secret", passive=False))
      speaker.set_routes({ip_network("198.51.100.7/32"): RouteAttributes(
          communities=(community(65000, 1),), local_pref=200)})   # all peers (or peer=...)
      await peer.wait_established(timeout=10)
      peer.state; peer.negotiated; peer.counters; peer.last_error
      speaker.routes_in("192.0.2.1")             # {prefix: ReceivedPath}
      await speaker.shutdown(communication="maintenance")   # Cease/Admin Shutdown
      # or shutdown(withdraw=True) / shutdown(graceful_restart=True) (no NOTIFICATION)

  ``Speaker(local_as, router_id, listen_address=None, listen_port=179, restarting=False,
  on_event=None)``: ``listen_port=0`` binds an ephemeral port (``speaker.listen_port``);
  ``restarting=True`` sets the graceful-restart R bit after our own restart;
  ``on_event(peer, action)`` receives the fsm actions above for the peer's live session
  (state changes, routes learned/withdrawn — including routes dropped when a session
  ends or a graceful restart times out —, routes the import filter rejected
  (``RoutesFiltered``, with the reason), NOTIFICATIONs) for relays and metrics. Route
  events carry the family and NLRI encodings; ``.prefixes`` decodes them.

  ``RouteAttributes(next_hop=None, communities=(), large_communities=(), local_pref=None,
  med=None, origin=IGP, as_path=())``: ``next_hop=None`` is next-hop self; ``local_pref``
  goes to iBGP peers only (100 when unset); eBGP peers get our ASN prepended.
  ``Paths.of({"node-a": RouteAttributes(next_hop=...), ...})`` in place of one
  ``RouteAttributes``: several paths for the prefix, sent one by one to peers with
  ADD-PATH (RFC 7911), the first by key to the others (docs/bgp.md, "Several paths per
  prefix").
  ``ReceivedPath`` has ``next_hop``, ``as_path``, ``communities``, ``large_communities``,
  ``origin``, ``local_pref``, ``med``, the raw ``attributes`` and ``to_attributes()``.

  ``PeerConfig`` fields: ``address``, ``peer_as``, ``port`` (179), ``local_address``,
  ``local_as`` (speaker's), ``passive``, ``hold_time`` (90), ``password`` (TCP MD5),
  ``ebgp_multihop`` (TTL; eBGP single hop sends TTL 1), ``families``,
  ``graceful_restart`` / ``restart_time``, ``next_hop_v4`` / ``next_hop_v6`` (default:
  the session's local address, i.e. next-hop self), ``connect_retry`` /
  ``connect_retry_max`` (reconnect backoff), ``max_prefixes``, ``enforce_first_as``,
  ``import_filter`` / ``export_filter`` (:class:`Filter`, default: accept all),
  ``bfd``, ``add_path`` (:class:`~.wire.AddPathMode`: ``OFF``, ``RECEIVE``, ``SEND``,
  ``BOTH``).
"""

from .attributes import Paths, ReceivedPath, RouteAttributes
from .config import PeerConfig
from .fsm import Negotiated, Session, SessionConfig, State, Timer
from .neighbor import PeerCounters
from .peer import Peer
from .policy import Filter, PrefixSet, Rule, accept, reject
from .rib import AdjRibIn, AdjRibOut, ExportContext, compile_routes
from .speaker import Speaker
from .wire import AddPathMode, LargeCommunity, community

__all__ = [
    "AddPathMode",
    "AdjRibIn",
    "AdjRibOut",
    "ExportContext",
    "Filter",
    "LargeCommunity",
    "Negotiated",
    "Paths",
    "Peer",
    "PeerConfig",
    "PeerCounters",
    "PrefixSet",
    "ReceivedPath",
    "RouteAttributes",
    "Rule",
    "Session",
    "SessionConfig",
    "Speaker",
    "State",
    "Timer",
    "accept",
    "community",
    "compile_routes",
    "reject",
]
