"""One configured BGP neighbor (:class:`PeerConfig`), validated where it is built."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address

from teapot_lb.bfd.session import Parameters as BfdParameters

from .fsm import BOTH_FAMILIES
from .policy import ACCEPT_ALL, Filter
from .wire import AddPathMode, Family


@dataclass(frozen=True, slots=True)
class PeerConfig:
    """One neighbor. ``peer_as=None`` accepts any ASN."""

    address: str
    peer_as: int | None
    port: int = 179
    local_address: str | None = None
    local_as: int | None = None  # default: the speaker's
    passive: bool = False
    hold_time: int = 90
    # KEEPALIVE interval; None: a third of the negotiated hold time (also the upper bound).
    keepalive_time: float | None = None
    password: str | None = None  # TCP MD5 (RFC 2385)
    ebgp_multihop: int | None = None  # TTL; eBGP without it uses TTL 1 (single hop)
    # GTSM (RFC 5082), single hop: send with TTL 255, accept only segments with TTL 255.
    ttl_security: bool = False
    families: frozenset[Family] = BOTH_FAMILIES
    graceful_restart: bool = True
    restart_time: int = 120
    # The most the peer's routes are kept as stale after it went down gracefully, whatever
    # restart time it asked for (RFC 4724 §4.2 lets the receiver bound it).
    stale_limit: int | None = None
    next_hop_v4: IPv4Address | None = None  # default: the session's local address
    next_hop_v6: IPv6Address | None = None
    # Every route keeps its own next hop (a route server, RFC 7947 §2.2.2): a family is
    # advertised even over a session with no local address of that family (IPv6 routes
    # over an IPv4 session, MP_REACH_NLRI with the route's IPv6 next hop, RFC 4760 §3).
    next_hop_unchanged: bool = False
    connect_retry: float = 2.0  # first ConnectRetry interval; doubles up to connect_retry_max
    connect_retry_max: float = 60.0  # equal to connect_retry: a fixed interval
    max_prefixes: int | None = None  # Cease/Maximum Number of Prefixes Reached beyond it
    enforce_first_as: bool = True  # treat-as-withdraw eBGP paths not starting with peer_as
    import_filter: Filter = ACCEPT_ALL  # what of the peer's routes enters its Adj-RIB-In
    export_filter: Filter = ACCEPT_ALL  # what of the desired routes the peer gets
    description: str = ""
    # BFD (RFC 5880) on the session's path: a BFD Down tears the session down at once
    # (RFC 5882 §3.2). Multihop BFD (RFC 5883) when ``ebgp_multihop`` is set.
    bfd: BfdParameters | None = None
    # ADD-PATH (RFC 7911) for every family: SEND lets this peer have every path of a prefix
    # (several next hops, for ECMP); OFF: one path per prefix (``Paths.first``).
    add_path: AddPathMode = AddPathMode.OFF

    def __post_init__(self) -> None:
        ip_address(self.address)  # ValueError names the bad address
        if not isinstance(self.add_path, AddPathMode):
            raise ValueError(
                f"peer {self.address}: add_path must be an AddPathMode, not {self.add_path!r}"
            )
        if self.hold_time in (1, 2) or not 0 <= self.hold_time <= 0xFFFF:
            raise ValueError(f"peer {self.address}: hold time must be 0 or 3..65535 seconds")
        if self.peer_as is not None and not 1 <= self.peer_as <= 0xFFFFFFFF:
            raise ValueError(f"peer {self.address}: peer_as {self.peer_as} is not a valid ASN")
        if self.keepalive_time is not None and not 0 <= self.keepalive_time <= 0xFFFF:
            raise ValueError(f"peer {self.address}: keepalive time must be 0..65535 seconds")
        if not 0 < self.connect_retry <= self.connect_retry_max:
            raise ValueError(
                f"peer {self.address}: connect retry must be > 0 and <= connect_retry_max"
            )
        if self.password is not None and len(self.password.encode()) > 80:
            raise ValueError(f"peer {self.address}: TCP MD5 password longer than 80 bytes")

    def ttl(self, local_as: int) -> int | None:
        """The IP TTL of the session's packets (``local_as``: ours towards this peer): 255
        with GTSM, ``ebgp_multihop``, else 1 for eBGP (single hop), else the system's
        default."""
        if self.ttl_security:
            return 255
        ebgp = self.peer_as is None or self.peer_as != local_as
        return self.ebgp_multihop or (1 if ebgp else None)
