"""Where OVN's gateway ports are: the Southbound database through the ``ovs`` IDL.

:class:`SouthboundWatch` is a thread owning one IDL that monitors only what
:class:`~teapot_lb.ovn.gateways.Gateways` is made of: the chassis (name, hostname), the
routers' datapaths (their names) and the Port_Binding rows of type ``chassisredirect``
(``cr-<lrp>``, a distributed gateway port) and ``l3gateway`` (a gateway router's ports), by
a monitor condition, so a Southbound with 10,000 VIF ports sends us none of them. It blocks
on the IDL's socket and reads again when the IDL's change seqno moves (no polling): a
gateway port claimed by another chassis reaches `on_change` as soon as the Southbound
tells us. The IDL reconnects by itself; meanwhile the last state read stands.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import ovs.db.idl
import ovs.poller

from teapot_lb import log
from teapot_lb.ovn.gateways import GatewayPort, Gateways
from teapot_lb.ovn.nbdb import Connection, NorthboundError, fetch_schema

DATABASE = "OVN_Southbound"
GATEWAY_PORT_TYPES = ("chassisredirect", "l3gateway")
RETRY_S = 1.0  # between attempts to reach the Southbound at start
MONITORED: dict[str, list[str]] = {
    "Chassis": ["name", "hostname"],
    "Datapath_Binding": ["external_ids"],
    "Port_Binding": ["logical_port", "type", "datapath", "chassis"],
}


def gateways_of(tables: Any) -> Gateways:
    """The IDL's rows as :class:`Gateways` (sorted: equal databases give equal values)."""
    ports = []
    for row in tables["Port_Binding"].rows.values():
        if row.type not in GATEWAY_PORT_TYPES:
            continue
        router = row.datapath.external_ids.get("name") if row.datapath else None
        if router is None:
            continue
        chassis = row.chassis[0].name if row.chassis else None
        ports.append(GatewayPort(router, row.logical_port, chassis))
    chassis_rows = tables["Chassis"].rows.values()
    return Gateways(tuple(sorted(ports)), tuple(sorted((c.name, c.hostname) for c in chassis_rows)))


class SouthboundWatch:
    """A thread following the Southbound's gateway ports; `on_change(gateways)` is called
    from it whenever they differ from the last call (first when the monitor is synced).
    :attr:`latest` is the last state read (``synced=False`` before)."""

    def __init__(
        self, connection: Connection, on_change: Callable[[Gateways], None], *, quiet: bool = False
    ) -> None:
        """`quiet`: log nothing (``explain`` prints to stdout)."""
        self.connection = connection
        self.on_change = on_change
        self.quiet = quiet
        self.latest = Gateways(synced=False)
        self.changes = 0  # how many times the state changed (tests, metrics)
        self._stop = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread: threading.Thread | None = None
        self._idl: Any = None
        self._timeout_s = 10.0
        self.last_error: str | None = None  # why the Southbound cannot be reached now
        self._log = log.get("ovn").bind(remote=connection.remote, database=DATABASE)

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the thread. It connects (fetching the server's schema) and, while the
        Southbound cannot be reached, tries again every :data:`RETRY_S` (logged once,
        :attr:`last_error`); meanwhile :attr:`latest` stays unsynced, so the gated pools are
        announced nowhere rather than from a node that may not hold the port."""
        self._timeout_s = timeout_s
        self._thread = threading.Thread(target=self._run, name="ovn-sb", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the connection (idempotent)."""
        if self._stop:
            return
        self._stop = True
        if self._thread is not None:
            os.write(self._wake_w, b"!")
            self._thread.join(10)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _block(self, idl: Any = None, timeout_ms: int | None = None) -> None:
        """Sleep until the IDL's socket, our wake pipe or the timeout says something."""
        poller = ovs.poller.Poller()
        if idl is not None:
            idl.wait(poller)
        poller.fd_wait(self._wake_r, ovs.poller.POLLIN)
        if timeout_ms is not None:
            poller.timer_wait(timeout_ms)
        poller.block()

    def _connect(self) -> Any:
        """The IDL, once the schema could be fetched (None: stopped meanwhile)."""
        while not self._stop:
            try:
                schema = fetch_schema(self.connection, self._timeout_s, DATABASE)
            except NorthboundError as err:
                if self.last_error is None and not self.quiet:
                    self._log.warning("ovn southbound unreachable, retrying", error=str(err))
                self.last_error = str(err)
                self._block(timeout_ms=int(RETRY_S * 1000))
                continue
            self.last_error = None
            helper = ovs.db.idl.SchemaHelper(schema_json=schema)
            for table, columns in MONITORED.items():
                helper.register_columns(table, columns)
            idl = ovs.db.idl.Idl(
                self.connection.remote, helper, probe_interval=self.connection.probe_interval_ms
            )
            idl.cond_change("Port_Binding", [["type", "==", t] for t in GATEWAY_PORT_TYPES])
            return idl
        return None

    def _run(self) -> None:
        idl = self._idl = self._connect()
        if idl is None:
            return
        seen = -1
        try:
            while not self._stop:
                idl.run()
                if idl.change_seqno != seen and idl.state == idl.IDL_S_MONITORING:
                    seen = idl.change_seqno
                    self._read(idl)
                self._block(idl)
        except Exception:
            self._log.exception("ovn southbound watch failed")
        finally:
            idl.close()

    def _read(self, idl: Any) -> None:
        gateways = gateways_of(idl.tables)
        if gateways == self.latest:
            return
        self.latest = gateways
        self.changes += 1
        if not self.quiet:
            self._log.info(
                "ovn gateways",
                ports={f"{p.router}/{p.port}": p.chassis for p in gateways.ports},
            )
        try:
            self.on_change(gateways)
        except Exception:
            self._log.exception("ovn gateways: on_change failed")


def read_once(connection: Connection, timeout_s: float = 10.0) -> Gateways:
    """The gateway ports as the Southbound holds them now (``explain``)."""
    fetch_schema(connection, timeout_s, DATABASE)  # unreachable: fail now, not after timeout_s
    got = threading.Event()
    watch = SouthboundWatch(connection, lambda _: got.set(), quiet=True)
    watch.start(timeout_s)
    try:
        if not got.wait(timeout_s):
            why = watch.last_error or f"{connection.remote}: no answer"
            raise NorthboundError(f"{why} (within {timeout_s:g} s)")
        return watch.latest
    finally:
        watch.stop()
