"""Leader election on a ``coordination.k8s.io/v1`` Lease.

The protocol (the one client-go uses, so our replicas interoperate with its tools):

- The Lease holds ``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``,
  ``renewTime`` and ``leaseTransitions``. Every write is a PUT carrying the
  resourceVersion it was computed from, so two candidates can never both win.
- Candidates do not trust other machines' clocks: a lease counts as expired when its
  record has not *changed*, as observed on our monotonic clock, for its duration.
- The leader renews every ``retry_period``. It considers itself leader only until
  ``renew_deadline`` after the start of its last successful renewal, which is shorter
  than ``lease_duration``: it stops acting (``is_leader`` turns False and the leading
  task is cancelled) before any other candidate can take over.
- On graceful exit the leader releases the lease (empty holder) so a successor takes
  over at once instead of waiting for expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from .. import log
from .client import KubeClient
from .errors import AlreadyExists, Conflict, KubeError, NotFound
from .resources import LEASES, KubeObject


class LeadershipLost(Exception):
    """The lease could not be renewed within the renew deadline, or another holder took it."""


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    # False simulates a crash in tests: a cancelled leader leaves its lease to expire.
    release_on_exit: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration "
                f"(got {self.retry_period_s}, {self.renew_deadline_s}, {self.lease_duration_s})"
            )


def default_identity() -> str:
    """A unique candidate name: the host (the pod name, in a cluster) plus a random suffix,
    so a restarted process never mistakes its predecessor's lease for its own."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _LeaseRecord(NamedTuple):
    """What a Lease says (its spec as JSON values): a change of any of it is a renewal."""

    holder: str
    renew_time: object
    acquire_time: object
    duration_s: object
    transitions: object


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        *,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self._on_change = on_change
        self._leading = False
        self._renewed_at = -math.inf  # monotonic time the last successful renewal began
        self._observed: _LeaseRecord | None = None
        self._observed_at = -math.inf
        self._log = log.get("kube.leader").bind(lease=config.name, identity=config.identity)

    # ---------------------------------------------------------------- state

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        """True only while our last renewal is younger than the renew deadline.

        Check it right before every write that only the leader may do: it turns False on
        time, even while a renewal request is still hanging.
        """
        return self._leading and self._now() - self._renewed_at < self.config.renew_deadline_s

    def ensure_leader(self) -> None:
        """Raise :class:`LeadershipLost` unless :attr:`is_leader`; call before a write."""
        if not self.is_leader:
            raise LeadershipLost(f"{self.config.identity} is not the leader")

    @property
    def observed_holder(self) -> str:
        return self._observed.holder if self._observed else ""

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            self._log.info("leadership acquired" if leading else "leadership lost")
            if self._on_change is not None:
                self._on_change(leading)

    # ------------------------------------------------------------- protocol

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        started = self._now()
        wall = datetime.now(UTC)
        desired_spec: KubeObject = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": math.ceil(cfg.lease_duration_s),
            "acquireTime": _micro_time(wall),
            "renewTime": _micro_time(wall),
            "leaseTransitions": 0,
        }
        try:
            lease = await self.client.get(LEASES, cfg.name, cfg.namespace)
        except NotFound:
            try:
                await self.client.create(
                    LEASES,
                    {
                        "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                        "spec": desired_spec,
                    },
                )
            except (AlreadyExists, Conflict):
                return False
            self._observe(desired_spec, started)
            self._renewed_at = started
            return True

        spec = lease.get("spec") or {}
        self._observe(spec, started)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration_s)
        if holder and holder != cfg.identity and started < self._observed_at + duration:
            return False  # someone else holds a lease that has not expired
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == cfg.identity:
            desired_spec["acquireTime"] = spec.get("acquireTime") or desired_spec["acquireTime"]
            desired_spec["leaseTransitions"] = transitions
        else:
            desired_spec["leaseTransitions"] = transitions + 1
        try:
            await self.client.replace(LEASES, {**lease, "spec": desired_spec})
        except Conflict:
            return False
        self._observe(desired_spec, started)
        self._renewed_at = started
        return True

    def _observe(self, spec: KubeObject, at: float) -> None:
        record = _LeaseRecord(
            str(spec.get("holderIdentity") or ""),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = at

    def _jittered(self, seconds: float) -> float:
        return seconds * (1.0 + 0.2 * random.random())

    async def _acquire(self) -> None:
        while True:
            try:
                if await self._try_acquire_or_renew():
                    return
            except KubeError as err:
                self._log.warning("lease acquire failed", error=str(err))
            await asyncio.sleep(self._jittered(self.config.retry_period_s))

    async def _renew_until_lost(self) -> str:
        """Renew every retry period; return the reason when leadership is lost."""
        cfg = self.config
        while True:
            await asyncio.sleep(cfg.retry_period_s)
            while True:
                remaining = self._renewed_at + cfg.renew_deadline_s - self._now()
                if remaining <= 0:
                    return "renew deadline passed"
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    return "renew deadline passed during a renewal request"
                except KubeError as err:
                    self._log.warning("lease renewal failed", error=str(err))
                    await self._pause_before_retry()
                    continue
                if renewed:
                    break
                if self.observed_holder != cfg.identity:
                    return f"lease taken by {self.observed_holder or 'nobody'}"
                # A conflict on our own lease (someone wrote it meanwhile): try again soon.
                await self._pause_before_retry()

    async def _pause_before_retry(self) -> None:
        cfg = self.config
        delay = min(cfg.retry_period_s / 2, self._renewed_at + cfg.renew_deadline_s - self._now())
        if delay > 0:
            await asyncio.sleep(delay)

    async def release(self) -> None:
        """Give the lease up if we hold it (best effort)."""
        cfg = self.config
        try:
            lease = await self.client.get(LEASES, cfg.name, cfg.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != cfg.identity:
                return
            now = _micro_time(datetime.now(UTC))
            released = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            await self.client.replace(LEASES, {**lease, "spec": released})
            self._log.info("lease released")
        except KubeError as err:
            self._log.warning("lease release failed", error=str(err))

    # ------------------------------------------------------------------ run

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Campaign, then run ``lead()`` while we hold the lease.

        - ``lead`` returns: the lease is released and ``run`` returns.
        - leadership is lost: ``lead`` is cancelled at once and ``run`` raises
          :class:`LeadershipLost` (a component should then exit, or campaign again).
        - ``run`` is cancelled (shutdown): ``lead`` is cancelled and the lease released
          (unless ``release_on_exit`` is False).
        """
        await self._acquire()
        self._set_leading(True)
        lead_task = asyncio.ensure_future(lead())
        renew_task = asyncio.ensure_future(self._renew_until_lost())
        lost_reason: str | None = None
        try:
            await asyncio.wait({lead_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
            if renew_task.done():
                lost_reason = renew_task.result()
                self._set_leading(False)
                lead_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lead_task
                raise LeadershipLost(lost_reason)
            lead_task.result()  # re-raise what lead raised
        finally:
            for task in (lead_task, renew_task):
                task.cancel()
            await asyncio.gather(lead_task, renew_task, return_exceptions=True)
            was_leading = self._leading
            self._set_leading(False)
            if was_leading and lost_reason is None and self.config.release_on_exit:
                await asyncio.shield(self.release())


async def lead_when_elected(
    elector: LeaderElector | None, lead: Callable[[], Awaitable[None]]
) -> None:
    """Run ``lead`` while holding the lease, campaigning again each time leadership is
    lost; without an elector (a single replica), just run it."""
    if elector is None:
        await lead()
        return
    while True:
        try:
            await elector.run(lead)
            return
        except LeadershipLost as lost:
            log.get("kube.leader").warning(
                "leadership lost; campaigning again", lease=elector.config.name, reason=str(lost)
            )


__all__ = [
    "LeaderElector",
    "LeadershipLost",
    "LeaseConfig",
    "default_identity",
    "lead_when_elected",
]
