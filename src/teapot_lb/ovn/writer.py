"""The OVN writer: keeps the Northbound database holding what the cluster view wants.

Level-triggered on both sides. :class:`OVNWriter` (asyncio) computes the desired state from
the :class:`~teapot_lb.cluster.Store` whenever notified (debounced) and hands the latest to
:class:`NorthboundLoop`, a thread that owns the IDL (which is not thread-safe and blocks).
That thread diffs the latest desired state against what the database holds whenever
either changes (someone edited or deleted one of our rows, the connection came back, a
transaction lost a race) and commits the difference in one transaction. Equal states write
nothing, so a restart or a reconnect that finds the rows as we left them causes no churn.

One writer per cluster: the Northbound database is central, so ``teapot-lb ovn`` runs it
only while it holds a Lease (see docs/ovn.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from enum import Enum

import ovs.db.idl
import ovs.poller

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.controller.options import ControllerOptions
from teapot_lb.ovn.desired import Desired, DesiredCache, desired_state
from teapot_lb.ovn.diff import diff
from teapot_lb.ovn.nbdb import Connection, Northbound, NorthboundError
from teapot_lb.ovn.rows import NBState, Target

RETRY_S = 1.0  # after a failed transaction
# Transactions in a row after which the database still differs (someone fighting over our
# rows, or a value the server stores otherwise than we wrote it): pause RETRY_S, no spin.
MAX_WRITES = 3
DEBOUNCE_S = 0.01


@dataclass
class WriterStats:
    """What the loop did (read from other threads: plain counters and the last values)."""

    reconciles: int = 0  # diffs computed
    operations: int = 0  # operations committed
    transactions: int = 0
    failures: int = 0
    last_error: str | None = None
    missing: tuple[Target, ...] = ()
    applied: int = 0  # generation of the desired state last found in the database


class _Outcome(Enum):
    HELD = "the database holds the desired state"
    WROTE = "a transaction was committed"
    FAILED = "retry later"


class NorthboundLoop:
    """A thread that keeps the Northbound holding the latest desired state."""

    def __init__(self, connection: Connection, owner: str) -> None:
        self.connection = connection
        self.owner = owner
        self.stats = WriterStats()
        self._lock = threading.Lock()
        self._wanted: NBState | None = None
        self._generation = 0
        self._stop = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._log = log.get("ovn").bind(remote=connection.remote, owner=owner)
        self._error: BaseException | None = None

    def want(self, state: NBState) -> int:
        """Make `state` the one to hold (thread-safe); returns its generation."""
        with self._lock:
            self._wanted = state
            self._generation += 1
            generation = self._generation
        os.write(self._wake_w, b"!")
        return generation

    def start(self, timeout_s: float = 10.0) -> None:
        """Connect (fetching the server's schema) and start the thread."""
        self._thread = threading.Thread(target=self._run, name="ovn-nb", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s) or self._error is not None:
            self.stop()
            raise NorthboundError(f"{self.connection.remote}: {self._error or 'no answer'}")

    def stop(self) -> None:
        """Stop the thread and close the connection (idempotent)."""
        if self._stop:
            return
        self._stop = True
        os.write(self._wake_w, b"!")
        if self._thread is not None:
            self._thread.join(10)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        try:
            nb = Northbound(self.connection, self.owner)
        except BaseException as err:  # reported by start()
            self._error = err
            self._started.set()
            return
        self._started.set()
        done: tuple[int, int] | None = None  # (generation, database seqno) last reconciled
        retry_at: float | None = None
        writes = 0  # transactions in a row that did not leave the database as wanted
        try:
            while not self._stop:
                nb.run()
                with self._lock:
                    wanted, generation = self._wanted, self._generation
                now = time.monotonic()
                key = (generation, nb.idl.change_seqno)
                due = retry_at is None or now >= retry_at
                if wanted is not None and nb.synced and key != done and due:
                    retry_at = None
                    try:
                        outcome = self._reconcile(nb, wanted, generation)
                    except Exception as err:  # a bug or a schema surprise: retry, keep going
                        self._log.exception("ovn reconcile failed")
                        self.stats.failures += 1
                        self.stats.last_error = repr(err)
                        outcome = _Outcome.FAILED
                    if outcome is _Outcome.HELD:
                        done, writes = key, 0
                    elif outcome is _Outcome.WROTE and writes < MAX_WRITES:
                        writes += 1
                        continue  # check at once that the database now holds it
                    else:
                        if writes >= MAX_WRITES:
                            self._log.warning("ovn not converging", transactions=writes)
                        writes = 0
                        retry_at = now + RETRY_S
                poller = ovs.poller.Poller()
                nb.wait(poller)
                poller.fd_wait(self._wake_r, ovs.poller.POLLIN)
                if retry_at is not None:
                    poller.timer_wait(int(max(0.0, retry_at - now) * 1000) + 1)
                poller.block()
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
        finally:
            nb.close()

    def _reconcile(self, nb: Northbound, wanted: NBState, generation: int) -> _Outcome:
        """One diff and, if needed, one transaction."""
        self.stats.reconciles += 1
        changes = diff(wanted, nb.observed())
        if changes.missing != self.stats.missing:
            self.stats.missing = changes.missing
            if changes.missing:
                self._log.warning("ovn targets missing", targets=[str(t) for t in changes.missing])
        if changes:
            try:
                status = nb.apply(changes)
            except NorthboundError as err:
                self.stats.failures += 1
                self.stats.last_error = str(err)
                self._log.warning("ovn transaction failed", error=str(err))
                return _Outcome.FAILED
            if status != ovs.db.idl.Transaction.SUCCESS:
                return _Outcome.FAILED  # TRY_AGAIN: the database moved on; diff again later
            self.stats.operations += len(changes.operations)
            self.stats.transactions = nb.transactions
            self._log.info("ovn programmed", operations=len(changes.operations))
            return _Outcome.WROTE
        self.stats.applied = generation
        self.stats.last_error = None
        return _Outcome.HELD


class OVNWriter:
    """Computes the desired rows from the Store on every change and hands them to the loop."""

    def __init__(
        self,
        store: Store,
        loop: NorthboundLoop,
        owner: str,
        options: ControllerOptions | None = None,
        *,
        debounce_s: float = DEBOUNCE_S,
    ) -> None:
        self.store = store
        self.loop = loop
        self.owner = owner
        self.options = options or ControllerOptions()
        self.debounce_s = debounce_s
        self.desired: Desired | None = None
        self.generation = 0  # of the desired rows last handed to the loop
        self.cache = DesiredCache()
        self._wake = asyncio.Event()
        self._log = log.get("ovn").bind(owner=owner)

    def notify(self) -> None:
        """Something in the Store changed (idempotent; many calls, one reconcile)."""
        self._wake.set()

    def reconcile(self) -> int:
        """Compute the desired rows now and hand them over; returns their generation."""
        self.desired = desired_state(self.store.view(), self.owner, self.options, self.cache)
        self.generation = self.loop.want(self.desired.state)
        return self.generation

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.debounce_s)
            self._wake.clear()
            try:
                self.reconcile()
            except Exception:
                self._log.exception("ovn desired state failed")
                await asyncio.sleep(RETRY_S)
                self._wake.set()
