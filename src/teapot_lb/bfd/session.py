"""One BFD session (RFC 5880 asynchronous mode, no demand, no echo, no auth), sans I/O.

Events go in (:meth:`Session.start`, :meth:`~Session.packet_received` with the packet's
TTL / hop limit, :meth:`~Session.timer_expired`, :meth:`~Session.admin_down`,
:meth:`~Session.admin_up`, :meth:`~Session.change_parameters`); each returns a list of
orders: :class:`Transmit` a packet, the timer orders of every sans-I/O core
(:class:`~teapot_lb.timers.ArmTimer` / :class:`~teapot_lb.timers.CancelTimer`),
:class:`StateChanged` with the diagnostic, and :class:`Discarded` for packets the
reception rules (§6.8.6) or GTSM (RFC 5881 §5) refuse. No clock, no socket; the jitter
of §6.8.7 comes from the ``random`` callable given at construction.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from teapot_lb.timers import ArmTimer, CancelTimer

from .wire import ControlPacket, Diagnostic, State

SLOW_TX = 1_000_000  # µs: §6.8.3, the least desired TX interval while not Up
TTL_SINGLE_HOP = 255  # RFC 5881 §5 (GTSM, RFC 5082)


class BfdTimer(enum.Enum):
    TRANSMIT = "transmit"  # §6.8.7 periodic transmission
    DETECT = "detect"  # §6.8.4 detection time


@dataclass(frozen=True, slots=True)
class Parameters:
    """What we ask for (§6.8.1): intervals in µs and our detect multiplier; our role
    (§6.1: ``passive`` sends nothing until the remote has sent); and, multihop only, the
    lowest TTL / hop limit a packet may arrive with (RFC 5883 §5; None: any)."""

    desired_min_tx: int = 300_000
    required_min_rx: int = 300_000
    detect_mult: int = 3
    passive: bool = False
    min_ttl: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.detect_mult <= 255:
            raise ValueError(f"detect_mult {self.detect_mult} is outside 1..255")
        if not 1 <= self.desired_min_tx <= 0xFFFFFFFF:  # §6.8.1: never zero
            raise ValueError(f"desired_min_tx {self.desired_min_tx} µs is outside 1..2^32-1")
        if not 0 <= self.required_min_rx <= 0xFFFFFFFF:
            raise ValueError(f"required_min_rx {self.required_min_rx} µs is outside 0..2^32-1")
        if self.min_ttl is not None and not 1 <= self.min_ttl <= 255:
            raise ValueError(f"min_ttl {self.min_ttl} is outside 1..255")


@dataclass(frozen=True, slots=True)
class Transmit:
    packet: ControlPacket


@dataclass(frozen=True, slots=True)
class StateChanged:
    old: State
    new: State
    diagnostic: Diagnostic
    peer_admin_down: bool = False

    @property
    def failed(self) -> bool:
        """Up -> Down for a reason a client must act on (RFC 5882 §3.2): not our own
        AdminDown, and not the peer's (which arrives as diag 3 with its state AdminDown)."""
        return self.old is State.UP and self.new is State.DOWN and not self.peer_admin_down


class DiscardReason(enum.Enum):
    TTL = "TTL / hop limit is not 255 on a single-hop session (RFC 5881 §5)"
    TTL_BELOW_MINIMUM = "TTL / hop limit below the configured minimum (RFC 5883 §5)"
    WRONG_DISCRIMINATOR = "your discriminator is not ours (§6.8.6)"
    AUTHENTICATION = "authentication bit set; we use none (§6.8.6)"


@dataclass(frozen=True, slots=True)
class Discarded:
    reason: DiscardReason
    packet: ControlPacket


Order: TypeAlias = Transmit | StateChanged | Discarded | ArmTimer[BfdTimer] | CancelTimer[BfdTimer]


def jittered(interval: float, detect_mult: int, random: Callable[[], float]) -> float:
    """The next transmission delay (§6.8.7): 75-100 % of the interval, 75-90 % if mult 1."""
    top = 0.90 if detect_mult == 1 else 1.0
    return interval * (0.75 + (top - 0.75) * random())


class Session:
    """The state variables of §6.8.1 and the procedures of §6.8.2-§6.8.7 and §6.8.16.

    The active role unless ``parameters.passive`` (§6.1). ``single_hop`` sessions discard
    packets whose TTL is not 255; multihop ones those below ``parameters.min_ttl``, if set.
    Every parameter can change while the session runs (:meth:`change_parameters`).
    """

    def __init__(
        self,
        local_discriminator: int,
        parameters: Parameters,
        *,
        random: Callable[[], float],
        single_hop: bool = True,
    ) -> None:
        if not 1 <= local_discriminator <= 0xFFFFFFFF:
            raise ValueError("the local discriminator must be nonzero and fit 32 bits (§6.8.1)")
        self.local_discriminator = local_discriminator
        self.parameters = parameters
        self.single_hop = single_hop
        self._random = random
        self._sending = False  # the transmit timer runs (a passive session may wait)
        self.state = State.DOWN
        self.diagnostic = Diagnostic.NONE
        self.remote_discriminator = 0
        self.remote_state = State.DOWN
        self.remote_min_rx = 1  # µs, §6.8.1
        self.remote_desired_min_tx = 0  # µs, from the last packet
        self.remote_detect_mult = 0
        self.remote_demand = False
        self._started = False
        # The values in force while a poll sequence runs (§6.8.3): what we advertise
        # changes at once; the transmit interval (on an increase) and the RX interval of
        # the detection time (on a decrease) wait for the Final.
        self._poll = False
        self._tx_in_use = self._desired_tx()
        self._rx_in_use = parameters.required_min_rx

    # -- derived values

    def _desired_tx(self) -> int:
        """bfd.DesiredMinTxInterval: at least one second while not Up (§6.8.3)."""
        wanted = self.parameters.desired_min_tx
        return wanted if self.state is State.UP else max(wanted, SLOW_TX)

    @property
    def transmit_interval(self) -> int:
        """µs between our packets: max(our desired TX, remote's required RX) (§6.8.2)."""
        return max(self._tx_in_use, self.remote_min_rx)

    @property
    def detection_time(self) -> int:
        """µs without a packet before the session goes down (§6.8.4, asynchronous)."""
        return self.remote_detect_mult * max(self._rx_in_use, self.remote_desired_min_tx)

    @property
    def polling(self) -> bool:
        return self._poll

    @property
    def min_ttl(self) -> int | None:
        """The lowest TTL accepted on a multihop session (None on a single hop: 255 only)."""
        return None if self.single_hop else self.parameters.min_ttl

    @property
    def sending(self) -> bool:
        """Whether we transmit periodically: always once started, unless passive and the
        remote has not been heard (§6.8.7: no packets while bfd.RemoteDiscr is zero)."""
        return self._sending

    # -- events

    def start(self) -> list[Order]:
        """Begin sending (active role), or wait for the remote's first packet (passive)."""
        if self._started:
            return []
        self._started = True
        return self._transmit()

    def stop(self) -> list[Order]:
        """Forget the timers: the adapter is closing the session."""
        self._started = False
        self._sending = False
        return [CancelTimer(BfdTimer.TRANSMIT), CancelTimer(BfdTimer.DETECT)]

    def packet_received(self, packet: ControlPacket, ttl: int | None) -> list[Order]:
        """A decoded packet for this session, with its TTL / hop limit (§6.8.6)."""
        if self.single_hop and ttl != TTL_SINGLE_HOP:
            return [Discarded(DiscardReason.TTL, packet)]
        if self.min_ttl is not None and (ttl is None or ttl < self.min_ttl):
            return [Discarded(DiscardReason.TTL_BELOW_MINIMUM, packet)]
        if packet.your_discriminator not in (0, self.local_discriminator):
            return [Discarded(DiscardReason.WRONG_DISCRIMINATOR, packet)]
        if packet.auth is not None:
            return [Discarded(DiscardReason.AUTHENTICATION, packet)]
        orders: list[Order] = []
        old_tx = self.transmit_interval
        self.remote_discriminator = packet.my_discriminator
        self.remote_state = packet.state
        self.remote_demand = packet.demand
        self.remote_min_rx = packet.required_min_rx
        self.remote_desired_min_tx = packet.desired_min_tx
        self.remote_detect_mult = packet.detect_mult
        if packet.final and self._poll:
            self._end_poll()
        if self.state is State.ADMIN_DOWN:
            return orders
        orders.append(ArmTimer(BfdTimer.DETECT, self.detection_time / 1e6))
        if packet.state is State.ADMIN_DOWN:
            if self.state is not State.DOWN:
                orders += self._go(State.DOWN, Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN,
                                   peer_admin_down=True)  # fmt: skip
        elif self.state is State.DOWN:
            if packet.state is State.DOWN:
                orders += self._go(State.INIT, Diagnostic.NONE)
            elif packet.state is State.INIT:
                orders += self._go(State.UP, Diagnostic.NONE)
        elif self.state is State.INIT:
            if packet.state in (State.INIT, State.UP):
                orders += self._go(State.UP, Diagnostic.NONE)
        elif packet.state is State.DOWN:  # we are Up
            orders += self._go(State.DOWN, Diagnostic.NEIGHBOR_SIGNALED_SESSION_DOWN)
        if packet.poll:
            # §6.8.6: answer a Poll at once, outside the transmit timer; never P and F.
            orders.append(Transmit(self._packet(final=True)))
        sent = any(isinstance(o, ArmTimer) and o.timer is BfdTimer.TRANSMIT for o in orders)
        if self._started and not sent and (not self._sending or self.transmit_interval < old_tx):
            # A passive session heard the remote (§6.1), or the remote wants packets sooner
            # than the armed timer would send the next one.
            orders += self._transmit()
        return orders

    def timer_expired(self, timer: BfdTimer) -> list[Order]:
        if timer is BfdTimer.TRANSMIT:
            return self._transmit() if self._started else []
        # §6.8.4 detection time passed; §6.8.1 forget the remote.
        orders: list[Order] = []
        if self.state in (State.INIT, State.UP):
            orders += self._go(State.DOWN, Diagnostic.CONTROL_DETECTION_TIME_EXPIRED)
        self.remote_discriminator = 0
        self.remote_state = State.DOWN
        self.remote_min_rx = 1
        self.remote_desired_min_tx = 0
        self.remote_detect_mult = 0
        return orders

    def admin_down(self) -> list[Order]:
        """§6.8.16: AdminDown with diag 7; keep sending so the peer learns it."""
        if self.state is State.ADMIN_DOWN:
            return []
        orders = self._go(State.ADMIN_DOWN, Diagnostic.ADMINISTRATIVELY_DOWN)
        orders.append(CancelTimer(BfdTimer.DETECT))
        if self._started:
            orders += self._transmit()
        return orders

    def admin_up(self) -> list[Order]:
        """§6.8.16: back to Down; the handshake starts again."""
        if self.state is not State.ADMIN_DOWN:
            return []
        return self._go(State.DOWN, self.diagnostic)

    def change_parameters(self, parameters: Parameters) -> list[Order]:
        """New intervals or multiplier, while Up through a poll sequence (§6.8.3), so the
        session stays Up; a new role or minimum TTL applies to the next packet."""
        old = self.parameters
        if parameters == old:
            return []
        old_desired = self._desired_tx()
        self.parameters = parameters
        new_desired = self._desired_tx()
        intervals_changed = (
            new_desired != old_desired or parameters.required_min_rx != old.required_min_rx
        )
        if self.state is State.UP and intervals_changed:
            self._start_poll()
        else:
            self._tx_in_use = new_desired
            self._rx_in_use = parameters.required_min_rx
        return self._transmit() if self._started else []

    # -- procedures

    def _go(
        self, new: State, diagnostic: Diagnostic, *, peer_admin_down: bool = False
    ) -> list[Order]:
        old = self.state
        old_desired = self._desired_tx()
        self.state = new
        self.diagnostic = diagnostic
        orders: list[Order] = [StateChanged(old, new, diagnostic, peer_admin_down)]
        new_desired = self._desired_tx()
        if new is State.UP and new_desired != old_desired:
            # Leaving the one-second pace of §6.8.3 is a parameter change: poll.
            self._start_poll()
            if self._started:
                orders += self._transmit()
        elif new is not State.UP:
            self._poll = False
            self._tx_in_use = new_desired
            self._rx_in_use = self.parameters.required_min_rx
        return orders

    def _start_poll(self) -> None:
        self._poll = True
        # An increase of our TX waits for the Final; a decrease is safe at once.
        self._tx_in_use = min(self._tx_in_use, self._desired_tx())
        # A decrease of our RX shortens the remote's allowance only after the Final.
        self._rx_in_use = max(self._rx_in_use, self.parameters.required_min_rx)

    def _end_poll(self) -> None:
        self._poll = False
        self._tx_in_use = self._desired_tx()
        self._rx_in_use = self.parameters.required_min_rx

    def _packet(self, *, final: bool = False) -> ControlPacket:
        return ControlPacket(
            state=self.state,
            my_discriminator=self.local_discriminator,
            your_discriminator=self.remote_discriminator,
            desired_min_tx=self._desired_tx(),
            required_min_rx=self.parameters.required_min_rx,
            detect_mult=self.parameters.detect_mult,
            diagnostic=self.diagnostic,
            poll=self._poll and not final,
            final=final,
        )

    def _transmit(self) -> list[Order]:
        """Send one periodic packet and arm the next (§6.8.7); a passive session does
        neither while the remote is unknown (it resumes on the remote's next packet)."""
        if self.parameters.passive and self.remote_discriminator == 0:
            self._sending = False
            return [CancelTimer(BfdTimer.TRANSMIT)]
        self._sending = True
        orders: list[Order] = []
        if self.remote_min_rx != 0:  # zero: the remote wants no periodic packets
            orders.append(Transmit(self._packet()))
        delay = jittered(self.transmit_interval, self.parameters.detect_mult, self._random)
        orders.append(ArmTimer(BfdTimer.TRANSMIT, delay / 1e6))
        return orders
