"""teapot-lb's native BGP-4 speaker: a sans-I/O core plus one asyncio adapter.

Layers (only ``speaker`` does I/O):

- :mod:`teapot_lb.bgp.wire` — typed messages with ``pack``/``unpack``; every decode
  failure is a :class:`~teapot_lb.bgp.wire.CodecError` carrying its NOTIFICATION.
- :mod:`teapot_lb.bgp.rib` — :class:`RouteAttributes` (what to advertise with a prefix),
  :class:`AdjRibOut` (desired vs. sent → minimal packed UPDATEs), :class:`AdjRibIn`
  (received routes, stale marking for graceful restart), :class:`ReceivedPath`.
- :mod:`teapot_lb.bgp.fsm` — :class:`Session`, the RFC 4271 §8 state machine: events in
  (``start()``, ``stop()``, ``connection_made()``, ``connection_failed()``,
  ``connection_lost()``, ``data_received(bytes)``, ``timer_expired(Timer)``), a list of
  actions out (``Send``, ``Connect``, ``CloseConnection``, ``ArmTimer``, ``CancelTimer``,
  ``StateChanged``, ``OpenReceived``, ``RoutesLearned``, ``RoutesWithdrawn``,
  ``EndOfRib``, ``RouteRefreshRequested``, ``NotificationSent``,
  ``NotificationReceived``, ``UpdateProblems``, ``SessionDown``).
  ``keep_locally_initiated(local_id, remote_id)`` decides collisions (§6.8).
- :mod:`teapot_lb.bgp.speaker` — asyncio:

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
  ends or a graceful restart times out —, NOTIFICATIONs) for relays and metrics.

  ``RouteAttributes(next_hop=None, communities=(), large_communities=(), local_pref=None,
  med=None, origin=IGP, as_path=())``: ``next_hop=None`` is next-hop self; ``local_pref``
  goes to iBGP peers only (100 when unset); eBGP peers get our ASN prepended.
  ``ReceivedPath`` has ``next_hop``, ``as_path``, ``communities``, ``large_communities``,
  ``local_pref``, ``med`` and the raw ``attributes``.

  ``PeerConfig`` fields: ``address``, ``peer_as``, ``port`` (179), ``local_address``,
  ``local_as`` (speaker's), ``passive``, ``hold_time`` (90), ``password`` (TCP MD5),
  ``ebgp_multihop`` (TTL; eBGP single hop sends TTL 1), ``families``,
  ``graceful_restart`` / ``restart_time``, ``next_hop_v4`` / ``next_hop_v6`` (default:
  the session's local address, i.e. next-hop self), ``connect_retry`` /
  ``connect_retry_max`` (reconnect backoff), ``max_prefixes``, ``enforce_first_as``.
"""

from .attributes import ReceivedPath, RouteAttributes
from .fsm import Negotiated, Session, SessionConfig, State, Timer
from .policy import Filter, PrefixSet, Rule, accept, reject
from .rib import AdjRibIn, AdjRibOut, ExportContext, compile_routes
from .speaker import Peer, PeerConfig, PeerCounters, Speaker
from .wire import LargeCommunity, community

__all__ = [
    "AdjRibIn",
    "AdjRibOut",
    "ExportContext",
    "Filter",
    "LargeCommunity",
    "Negotiated",
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
