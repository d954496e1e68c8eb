"""The OVN Northbound database through the Open vSwitch project's OVSDB IDL (``ovs``).

:class:`Northbound` owns one ``ovs.db.idl.Idl``: it monitors only the tables and columns
OVN mode reads, turns them into our :class:`~teapot_lb.ovn.rows.NBState` (our rows only)
and applies :class:`~teapot_lb.ovn.diff.Changes` in one transaction. The IDL is not
thread-safe: one thread uses a :class:`Northbound` (the writer's, :mod:`teapot_lb.ovn.writer`).

The IDL reconnects by itself (with backoff) and resumes its monitor where it stopped
(``monitor_cond_since``), so a lost connection comes back to the same rows: the next diff
is empty and nothing is written again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import ovs.db.idl
import ovs.jsonrpc
import ovs.poller
import ovs.stream

from teapot_lb.ovn.diff import (
    Attach,
    Changes,
    DeleteGroup,
    DeleteLoadBalancer,
    Detach,
    Operation,
    PutGroup,
    PutLoadBalancer,
)
from teapot_lb.ovn.rows import (
    OWNER_KEY,
    HealthCheck,
    LoadBalancer,
    NBState,
    Table,
    Target,
    name_prefix,
    pairs,
)

DATABASE = "OVN_Northbound"
LB, HC, GROUP = "Load_Balancer", "Load_Balancer_Health_Check", "Load_Balancer_Group"
# What OVN mode reads; the IDL monitors nothing else (10k foreign ports cost us nothing).
MONITORED: dict[str, list[str]] = {
    LB: [
        "name",
        "protocol",
        "vips",
        "options",
        "external_ids",
        "health_check",
        "ip_port_mappings",
    ],
    HC: ["vip", "options"],
    GROUP: ["name", "load_balancer"],
    Table.ROUTER.value: ["name", "load_balancer", "load_balancer_group"],
    Table.SWITCH.value: ["name", "load_balancer", "load_balancer_group"],
}


class NorthboundError(Exception):
    """The Northbound database cannot be reached or refused what we asked."""


@dataclass(frozen=True)
class Connection:
    """Where an OVN database (the Northbound, or the Southbound for
    :mod:`~teapot_lb.ovn.sbdb`) is: ``unix:/path``, ``tcp:host:port`` or
    ``ssl:host:port`` (then with the private key, certificate and CA certificate files)."""

    remote: str
    private_key: Path | None = None
    certificate: Path | None = None
    ca_cert: Path | None = None
    probe_interval_ms: int = 5000

    def __post_init__(self) -> None:
        kind = self.remote.partition(":")[0]
        if kind not in ("unix", "tcp", "ssl"):
            raise ValueError(
                f"OVN database remote {self.remote!r}: write unix:PATH, tcp:HOST:PORT or "
                "ssl:HOST:PORT"
            )
        if kind == "ssl" and None in (self.private_key, self.certificate, self.ca_cert):
            raise ValueError(
                f"OVN database remote {self.remote!r}: ssl needs the private key, the "
                "certificate and the CA certificate"
            )

    def configure_ssl(self) -> None:
        if self.private_key is not None:
            ovs.stream.Stream.ssl_set_private_key_file(str(self.private_key))
        if self.certificate is not None:
            ovs.stream.Stream.ssl_set_certificate_file(str(self.certificate))
        if self.ca_cert is not None:
            ovs.stream.Stream.ssl_set_ca_cert_file(str(self.ca_cert))


def fetch_schema(connection: Connection, timeout_s: float = 10.0, database: str = DATABASE) -> Any:
    """The `database` schema (the Northbound's by default) as the server has it (our IDL
    then matches its version)."""
    connection.configure_ssl()
    error, stream = ovs.stream.Stream.open(connection.remote)
    if not error:
        error, stream = ovs.stream.Stream.open_block((error, stream), int(timeout_s * 1000))
    if error:
        raise NorthboundError(f"{connection.remote}: cannot connect ({_strerror(error)})")
    rpc = ovs.jsonrpc.Connection(stream)
    try:
        request = ovs.jsonrpc.Message.create_request("get_schema", [database])
        error, reply = rpc.transact_block(request)
        if error or reply.error:
            why = _strerror(error) if error else reply.error
            raise NorthboundError(f"{connection.remote}: get_schema {database}: {why}")
        return reply.result
    finally:
        rpc.close()


def _strerror(error: object) -> str:
    return os.strerror(error) if isinstance(error, int) else str(error)


class _Idl(ovs.db.idl.Idl):  # type: ignore[misc]
    """The IDL, noting which rows changed since we last looked: reading a row's columns
    through the IDL costs microseconds each, so at 10k rows only changed ones are read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dirty: dict[str, set[UUID]] = {table: set() for table in MONITORED}

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        self.dirty[row._table.name].add(row.uuid)


class Northbound:
    """Our rows in one Northbound database, through an IDL used from one thread."""

    def __init__(self, connection: Connection, owner: str) -> None:
        self.connection = connection
        self.owner = owner
        self.prefix = name_prefix(owner)
        helper = ovs.db.idl.SchemaHelper(schema_json=fetch_schema(connection))
        for table, columns in MONITORED.items():
            helper.register_columns(table, columns)
        self.idl = _Idl(connection.remote, helper, probe_interval=connection.probe_interval_ms)
        self.transactions = 0  # committed, for the metrics and the benchmark
        # Per table, per row: what we read of it (a LoadBalancer or None when not ours; a
        # group's or target's name and references), until the row changes.
        self._read: dict[str, dict[UUID, Any]] = {table: {} for table in MONITORED}
        self._check_owner: dict[UUID, UUID] = {}  # health check → our load balancer
        # From the last observed(): our rows by name, the targets by name, duplicates.
        self._lbs: dict[str, UUID] = {}
        self._groups: dict[str, UUID] = {}
        self._targets: dict[Target, UUID] = {}
        self._extra: list[UUID] = []  # our rows with a name another of ours has

    def close(self) -> None:
        self.idl.close()

    def run(self) -> bool:
        """Process what the server sent; True when the database (as we see it) changed."""
        return bool(self.idl.run())

    def wait(self, poller: ovs.poller.Poller) -> None:
        self.idl.wait(poller)

    @property
    def synced(self) -> bool:
        """Connected and holding the server's current rows (not mid-resync)."""
        session = self.idl._session  # the IDL has no public "connected" before ovs 3.3
        return bool(self.idl.state == self.idl.IDL_S_MONITORING and session.is_connected())

    def _refresh(self) -> None:
        """Read again the rows that changed (a health check's change: its load balancer)."""
        for table in (HC, LB, GROUP, Table.ROUTER.value, Table.SWITCH.value):
            dirty = self.idl.dirty[table]
            cache = self._read[table]
            if table == HC:
                for uuid in dirty:
                    owner = self._check_owner.pop(uuid, None)
                    if owner is not None:
                        self._read[LB].pop(owner, None)
                dirty.clear()
                continue
            for uuid in dirty:
                cache.pop(uuid, None)
            dirty.clear()
            rows = self.idl.tables[table].rows
            for uuid in [u for u in cache if u not in rows]:
                del cache[uuid]
            if len(cache) != len(rows):
                for uuid, row in rows.items():
                    if uuid not in cache:
                        cache[uuid] = self._read_row(table, row)

    def _read_row(self, table: str, row: Any) -> Any:
        if table == LB:
            if row.external_ids.get(OWNER_KEY) != self.owner:
                return None
            for check in row.health_check:
                self._check_owner[check.uuid] = row.uuid
            return _load_balancer(row)
        if table == GROUP:
            return row.name, frozenset(lb.uuid for lb in row.load_balancer)
        return (
            row.name,
            frozenset(lb.uuid for lb in row.load_balancer),
            frozenset(g.uuid for g in row.load_balancer_group),
        )

    def observed(self) -> NBState:
        """Our rows and references as the database holds them."""
        self._refresh()
        read = self._read
        lbs: dict[str, LoadBalancer] = {}
        self._lbs, self._groups, self._targets, self._extra = {}, {}, {}, []
        for uuid in sorted(u for u, lb in read[LB].items() if lb is not None):
            lb = read[LB][uuid]
            if lb.name in lbs:
                self._extra.append(uuid)
                continue
            lbs[lb.name] = lb
            self._lbs[lb.name] = uuid
        name_of = {uuid: name for name, uuid in self._lbs.items()}
        groups: dict[str, frozenset[str]] = {}
        group_of: dict[UUID, str] = {}
        for uuid in sorted(read[GROUP]):
            name, members = read[GROUP][uuid]
            if name.startswith(self.prefix) and name not in groups:
                groups[name] = frozenset(name_of[m] for m in members if m in name_of)
                group_of[uuid] = name
                self._groups[name] = uuid
        attached: dict[Target, frozenset[str]] = {}
        group_attached: dict[Target, frozenset[str]] = {}
        for table in Table:
            for uuid in sorted(read[table.value]):
                name, direct, via = read[table.value][uuid]
                target = Target(table, name)
                self._targets.setdefault(target, uuid)
                ours = frozenset(name_of[u] for u in direct if u in name_of)
                if ours:
                    attached[target] = attached.get(target, frozenset()) | ours
                ours_g = frozenset(group_of[u] for u in via if u in group_of)
                if ours_g:
                    group_attached[target] = group_attached.get(target, frozenset()) | ours_g
        targets = frozenset(self._targets)
        return NBState(lbs, groups, attached, group_attached, targets)

    def apply(self, changes: Changes) -> str:
        """Apply `changes`, computed from the last :meth:`observed` (and drop our duplicate
        rows), in one transaction; its status (``ovs.db.idl.Transaction.SUCCESS``,
        ``TRY_AGAIN`` when the database moved on since)."""
        if not changes.operations and not self._extra:
            return str(ovs.db.idl.Transaction.UNCHANGED)
        txn = ovs.db.idl.Transaction(self.idl)
        txn.add_comment(f"teapot-lb {self.owner}")
        tables = self.idl.tables
        rows = _Rows(
            tables,
            {name: tables[LB].rows[uuid] for name, uuid in self._lbs.items()},
            {name: tables[GROUP].rows[uuid] for name, uuid in self._groups.items()},
            {t: tables[t.table.value].rows[uuid] for t, uuid in self._targets.items()},
        )
        for uuid in self._extra:
            tables[LB].rows[uuid].delete()
        for op in changes.operations:
            _apply(txn, rows, op)
        status: str = txn.commit_block()
        if status == ovs.db.idl.Transaction.SUCCESS:
            self.transactions += 1
        elif status != ovs.db.idl.Transaction.TRY_AGAIN:
            raise NorthboundError(f"{self.connection.remote}: transaction: {txn.get_error()}")
        return status


@dataclass
class _Rows:
    """Our rows by name and the routers/switches by name, for one transaction."""

    tables: Any
    lbs: dict[str, Any]
    groups: dict[str, Any]
    targets: dict[Target, Any]


def _apply(txn: ovs.db.idl.Transaction, rows: _Rows, op: Operation) -> None:
    tables = rows.tables
    if isinstance(op, PutLoadBalancer):
        lb = op.load_balancer
        row = txn.insert(tables[LB]) if op.create else rows.lbs[lb.name]
        rows.lbs[lb.name] = row
        if op.create:
            row.name = lb.name
        for column in op.columns:
            if op.create and not getattr(lb, column):
                continue  # a new row's columns start empty
            if column == "health_checks":
                checks = []
                for check in lb.health_checks:
                    hc = txn.insert(tables[HC])
                    hc.vip = check.vip
                    hc.options = dict(check.options)
                    checks.append(hc)
                row.health_check = checks
            elif column == "protocol":
                row.protocol = [lb.protocol] if lb.protocol else []
            else:
                value = getattr(lb, column)
                setattr(row, column, dict(value))
    elif isinstance(op, DeleteLoadBalancer):
        rows.lbs.pop(op.name).delete()
    elif isinstance(op, PutGroup):
        group = txn.insert(tables[GROUP]) if op.create else rows.groups[op.name]
        rows.groups[op.name] = group
        if op.create:
            group.name = op.name
        group.load_balancer = [rows.lbs[n] for n in sorted(op.members)]
    elif isinstance(op, DeleteGroup):
        rows.groups.pop(op.name).delete()
    elif isinstance(op, Attach | Detach):
        target = rows.targets[op.target]
        column = "load_balancer_group" if op.group else "load_balancer"
        ref = (rows.groups if op.group else rows.lbs)[op.name]
        if isinstance(op, Attach):
            target.addvalue(column, ref)
        else:
            target.delvalue(column, ref)


def _load_balancer(row: Any) -> LoadBalancer:
    checks = sorted(
        (HealthCheck(hc.vip, pairs(hc.options)) for hc in row.health_check),
        key=lambda c: (c.vip, c.options),
    )
    return LoadBalancer(
        name=row.name,
        protocol=row.protocol[0] if row.protocol else "",
        vips=pairs(row.vips),
        options=pairs(row.options),
        external_ids=pairs(row.external_ids),
        health_checks=tuple(checks),
        ip_port_mappings=pairs(row.ip_port_mappings),
    )


def read_once(connection: Connection, owner: str, timeout_s: float = 10.0) -> NBState:
    """Our rows as the database holds them now (``explain``): connect, sync, read, close."""
    nb = Northbound(connection, owner)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            nb.run()
            if nb.synced:
                return nb.observed()
            if time.monotonic() >= deadline:
                raise NorthboundError(f"{connection.remote}: no answer within {timeout_s:g} s")
            poller = ovs.poller.Poller()
            nb.wait(poller)
            poller.timer_wait(100)
            poller.block()
    finally:
        nb.close()
