"""The relay's routing tables, pure: what each tenant session sent (before policy), what the
policy made of it, and the paths re-advertised to the network.

Per tenant session, the Adj-RIB-In keeps every route as received, so a change of the
Tenant (its allocation shrinks, a node network moves) re-runs the policy over what the
session holds and the network gets only the difference; no session is reset (RFC 7947
§2.2's route-server view: each client's routes judged on their own).

Towards the network every accepted route is one path of its prefix, keyed by the session
that sent it (and the Path Identifier, if the tenant used ADD-PATH): a prefix announced by
three tenant nodes is one prefix with three paths, each with its node as next hop, which
an ADD-PATH router installs as one ECMP route (RFC 7911). The table is kept in the
speaker's wire form (:class:`~teapot_lb.bgp.rib.CompiledRoutes`, keyed by NLRI encoding),
so handing it to the speaker costs no re-encoding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address

from teapot_lb.bgp.attributes import Paths, ReceivedPath, RouteAttributes
from teapot_lb.bgp.policy import Rejected
from teapot_lb.bgp.rib import CompiledRoutes, decode_encodings, encode_prefix
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST, Family, Prefix
from teapot_lb.bgp.wire.nlri import PATH_ID_LENGTH

from .policy import MaxPrefixAction, MaxPrefixCount, Reason, RelayOptions, TenantPolicy

_FAMILIES = (IPV4_UNICAST, IPV6_UNICAST)
_INTERNED_MAX = 1 << 16  # distinct attributes kept for interning (then it starts over)


@dataclass(frozen=True)
class Teardown:
    """A session went over its max-prefix limit with the teardown action."""

    address: str
    tenant: str
    limit: int


@dataclass
class Outcome:
    """What one event changed: routes rejected (by tenant and reason), communities
    scrubbed (by tenant), sessions to tear down or warn about, and whether the network's
    table changed."""

    rejected: Counter[tuple[str, str]] = field(default_factory=Counter)
    scrubbed: Counter[str] = field(default_factory=Counter)
    teardown: list[Teardown] = field(default_factory=list)
    over_limit: list[Teardown] = field(default_factory=list)  # warn / drop: once per crossing
    changed: bool = False

    def add(self, other: Outcome) -> None:
        self.rejected.update(other.rejected)
        self.scrubbed.update(other.scrubbed)
        self.teardown += other.teardown
        self.over_limit += other.over_limit
        self.changed |= other.changed


@dataclass
class _Session:
    """One tenant speaker's session: its routes as received and as judged (keys are the
    NLRI encodings as received: with the Path Identifier under ADD-PATH)."""

    address: str
    tenant: str
    received: dict[Family, dict[bytes, ReceivedPath]] = field(
        default_factory=lambda: {f: {} for f in _FAMILIES}
    )
    add_path: dict[Family, bool] = field(default_factory=dict)
    accepted: dict[Family, set[bytes]] = field(
        default_factory=lambda: {f: set() for f in _FAMILIES}
    )
    rejected: dict[Family, dict[bytes, Rejected]] = field(
        default_factory=lambda: {f: {} for f in _FAMILIES}
    )
    over_limit: bool = False

    def accepted_count(self) -> int:
        return sum(len(s) for s in self.accepted.values())

    def received_count(self) -> int:
        return sum(len(t) for t in self.received.values())


@dataclass(frozen=True)
class RouteVerdict:
    """One received route and what the policy decided (for ``explain relay``)."""

    prefix: Prefix
    session: str
    next_hop: str
    as_path: tuple[int, ...]
    reason: str | None  # None: accepted
    rule: int | None = None


class RelayRib:
    """Every tenant session's routes, the policies judging them, the network's paths."""

    def __init__(self, options: RelayOptions, policies: Mapping[str, TenantPolicy]) -> None:
        self.options = options
        self.policies: dict[str, TenantPolicy] = dict(policies)
        self.sessions: dict[str, _Session] = {}
        # The network's table: per family, prefix encoding → {path key: attributes}.
        self._paths: dict[Family, dict[bytes, dict[str, RouteAttributes]]] = {
            f: {} for f in _FAMILIES
        }
        self._first: dict[Family, dict[bytes, RouteAttributes]] = {f: {} for f in _FAMILIES}
        self._multi: dict[Family, dict[bytes, Paths]] = {f: {} for f in _FAMILIES}
        # Prefixes changed since the network last got the table (:meth:`take_changes`).
        self._dirty: dict[Family, set[bytes]] = {f: set() for f in _FAMILIES}
        self._path_total = 0
        self._interned: dict[RouteAttributes, RouteAttributes] = {}

    # -- what it holds --------------------------------------------------------------------

    def compiled(self) -> CompiledRoutes:
        """The paths for the network, in the speaker's wire form (a new view of the live
        tables: hand it over at once, it is not a snapshot)."""
        self._publish()
        return CompiledRoutes(self._first, self._multi)

    def take_changes(self, *, publish: bool = True) -> dict[Family, set[bytes]]:
        """The prefixes (encodings) whose paths changed since the last call: what the
        network's Adj-RIB-Out has to diff (:meth:`AdjRibOut.set_desired`). Without
        ``publish``, :meth:`compiled` shows their changes only once :meth:`publish` is
        given them (a flush handed over a chunk at a time publishes each chunk as it
        goes: 30,000 prefixes took 0.7 s to publish at once)."""
        if publish:
            self._publish()
        out, self._dirty = self._dirty, {f: set() for f in _FAMILIES}
        return out

    def publish(self, family: Family, encs: Iterable[bytes]) -> None:
        """Bring the network's table (:meth:`compiled`) up to date for these prefixes."""
        table, first, multi = self._paths[family], self._first[family], self._multi[family]
        for penc in encs:
            paths = table.get(penc)
            if not paths:
                first.pop(penc, None)
                multi.pop(penc, None)
                continue
            # Always as Paths, even one: each path keeps its Path Identifier when
            # others join.
            one = multi[penc] = Paths.of(paths)
            first[penc] = one.first()

    def pending_changes(self) -> int:
        """How many prefixes changed since :meth:`take_changes`."""
        return sum(len(d) for d in self._dirty.values())

    def prefix_count(self) -> int:
        return sum(len(t) for t in self._paths.values())

    def path_count(self) -> int:
        return self._path_total

    def accepted_counts(self) -> Counter[str]:
        """Routes accepted, by tenant (one pass over the sessions)."""
        out: Counter[str] = Counter()
        for session in self.sessions.values():
            out[session.tenant] += session.accepted_count()
        return out

    def paths_of(self, prefix: Prefix) -> dict[str, RouteAttributes]:
        fam = IPV4_UNICAST if prefix.version == 4 else IPV6_UNICAST
        return dict(self._paths[fam].get(encode_prefix(prefix), {}))

    # -- sessions ---------------------------------------------------------------------------

    def open_session(self, address: str, tenant: str) -> None:
        have = self.sessions.get(address)
        if have is None or have.tenant != tenant:
            self.sessions[address] = _Session(address, tenant)

    def drop_session(self, address: str) -> Outcome:
        """The session is gone (down without graceful restart, removed): all its paths go."""
        out = Outcome()
        session = self.sessions.pop(address, None)
        if session is None:
            return out
        for fam in _FAMILIES:
            for enc in list(session.accepted[fam]):
                out.changed |= self._unset(fam, session, enc)
        return out

    # -- routes -----------------------------------------------------------------------------

    def learn(
        self,
        address: str,
        family: Family,
        encodings: Iterable[bytes],
        path: ReceivedPath,
        add_path: bool = False,
    ) -> Outcome:
        """Routes announced by a session: kept as received, then judged. The session's
        max-prefix limit counts what ``options.max_prefix_count`` says: routes received
        (BIRD's ``receive limit``: checked here, before policy) or routes accepted (its
        ``import limit``: checked in :meth:`_judge`)."""
        out = Outcome()
        session = self.sessions.get(address)
        if session is None:
            return out
        session.add_path[family] = add_path
        encs = list(encodings)
        received = session.received[family]
        if self.options.max_prefix_count is MaxPrefixCount.RECEIVED:
            new = [e for e in encs if e not in received]
            kept = self._limit(session, new, session.received_count(), out)
            if kept is None:
                return out  # torn down: the session goes, and its routes with it
            if len(kept) < len(new):
                dropped = set(new) - set(kept)
                encs = [e for e in encs if e not in dropped]
        for enc in encs:
            received[enc] = path
        out.add(self._judge(session, family, encs, path))
        return out

    def _limit(
        self, session: _Session, new: list[bytes], held: int, out: Outcome
    ) -> list[bytes] | None:
        """``new`` routes coming on top of ``held`` counted ones: those within the limit
        (all of them unless the action is drop), or None for a teardown (in ``out``)."""
        limit = self.options.max_prefixes
        if limit is None or held + len(new) <= limit:
            return new
        over = Teardown(session.address, session.tenant, limit)
        action = self.options.max_prefix_action
        if action is MaxPrefixAction.TEARDOWN:
            out.teardown.append(over)
            return None
        if not session.over_limit:
            session.over_limit = True
            out.over_limit.append(over)
        if action is MaxPrefixAction.DROP:
            room = max(limit - held, 0)
            out.rejected[(session.tenant, Reason.MAX_PREFIX.value)] += len(new) - room
            return new[:room]
        return new

    def _counted(self, session: _Session) -> int:
        if self.options.max_prefix_count is MaxPrefixCount.RECEIVED:
            return session.received_count()
        return session.accepted_count()

    def withdraw(self, address: str, family: Family, encodings: Iterable[bytes]) -> Outcome:
        """Routes withdrawn by a session; one it never sent (another tenant's) is counted
        and changes nothing."""
        out = Outcome()
        session = self.sessions.get(address)
        if session is None:
            return out
        received, rejected = session.received[family], session.rejected[family]
        for enc in encodings:
            if received.pop(enc, None) is None:
                out.rejected[(session.tenant, Reason.WITHDRAW_NOT_SENT.value)] += 1
                continue
            rejected.pop(enc, None)
            if enc in session.accepted[family]:
                out.changed |= self._unset(family, session, enc)
        limit = self.options.max_prefixes
        if session.over_limit and (limit is None or self._counted(session) < limit):
            session.over_limit = False
        return out

    def set_policies(
        self, policies: Mapping[str, TenantPolicy], options: RelayOptions | None = None
    ) -> Outcome:
        """New policies (a Tenant changed, appeared or went): the sessions of every tenant
        whose policy changed are judged again over their Adj-RIB-In; sessions of a tenant
        gone lose their routes."""
        out = Outcome()
        changed_options = options is not None and options != self.options
        if options is not None:
            self.options = options
        old, self.policies = self.policies, dict(policies)
        for address, session in list(self.sessions.items()):
            policy = self.policies.get(session.tenant)
            if policy is None:
                out.add(self.drop_session(address))
                continue
            if not changed_options and old.get(session.tenant) == policy:
                continue
            out.add(self._rejudge(session))
        return out

    # -- explain ----------------------------------------------------------------------------

    def verdicts(self, tenant: str) -> list[RouteVerdict]:
        """Every route the tenant's sessions sent, with its verdict, by prefix."""
        out: list[RouteVerdict] = []
        for session in self.sessions.values():
            if session.tenant != tenant:
                continue
            for fam in _FAMILIES:
                received = session.received[fam]
                add_path = session.add_path.get(fam, False)
                encs = list(received)
                prefixes = decode_encodings(encs, fam, add_path)
                for enc, prefix in zip(encs, prefixes, strict=True):
                    path = received[enc]
                    why = session.rejected[fam].get(enc)
                    out.append(
                        RouteVerdict(
                            prefix,
                            session.address,
                            str(path.next_hop),
                            path.as_path,
                            None if why is None else str(why.reason),
                            None if why is None else why.rule,
                        )
                    )
        out.sort(key=lambda v: (v.prefix.version, v.prefix, ip_address(v.session)))
        return out

    # -- internals --------------------------------------------------------------------------

    def _rejudge(self, session: _Session) -> Outcome:
        out = Outcome()
        for fam in _FAMILIES:
            for enc in list(session.accepted[fam]):
                out.changed |= self._unset(fam, session, enc)
            session.rejected[fam].clear()
        for fam in _FAMILIES:
            by_path: dict[int, tuple[ReceivedPath, list[bytes]]] = {}
            for enc, path in session.received[fam].items():
                by_path.setdefault(id(path), (path, []))[1].append(enc)
            for path, encs in by_path.values():
                out.add(self._judge(session, fam, encs, path))
                if out.teardown:
                    return out  # over its limit under the new policy: the session goes
        return out

    def _judge(
        self, session: _Session, family: Family, encs: list[bytes], path: ReceivedPath
    ) -> Outcome:
        out = Outcome()
        policy = self.policies.get(session.tenant)
        tenant = session.tenant
        if policy is None:
            return out
        add_path = session.add_path.get(family, False)
        judged = policy.filter.judge_batch(family, encs, path, add_path=add_path)
        rejected = session.rejected[family]
        accepted = session.accepted[family]
        for why, rencs in judged.rejected:
            out.rejected[(tenant, str(why.reason))] += len(rencs)
            for enc in rencs:
                rejected[enc] = why
                if enc in accepted:
                    out.changed |= self._unset(family, session, enc)
        over: list[bytes] = []
        if self.options.max_prefix_count is MaxPrefixCount.ACCEPTED:
            new = [e for _, aencs in judged.accepted for e in aencs if e not in accepted]
            kept = self._limit(session, new, session.accepted_count(), out)
            if kept is None:
                return out  # torn down: the session goes, and its routes with it
            if len(kept) < len(new):
                over = new[len(kept) :]
        if over:
            limited = Rejected(Reason.MAX_PREFIX.value, None, policy.filter.name)
            for enc in over:
                rejected[enc] = limited
        dropped = set(over)
        sent = set(path.communities)
        sent_large = set(path.large_communities)
        for new_path, aencs in judged.accepted:
            attrs = self._intern(new_path.to_attributes())
            if dropped:
                aencs = [e for e in aencs if e not in dropped]
            # Scrubbed: a community the tenant sent is gone (RTBH's NO_EXPORT is added).
            if not sent.issubset(new_path.communities) or not sent_large.issubset(
                new_path.large_communities
            ):
                out.scrubbed[tenant] += len(aencs)
            if rejected:
                for enc in aencs:
                    rejected.pop(enc, None)
            accepted.update(aencs)
            out.changed |= self._set_all(family, session, aencs, attrs, add_path)
        return out

    def _intern(self, attrs: RouteAttributes) -> RouteAttributes:
        """One object for equal attributes (a tenant's UPDATEs mostly repeat them): the
        Adj-RIB-Out then groups and compares them by identity."""
        if len(self._interned) > _INTERNED_MAX:
            self._interned.clear()
        return self._interned.setdefault(attrs, attrs)

    def _key(self, session: _Session, enc: bytes, add_path: bool) -> tuple[bytes, str]:
        if add_path:
            return enc[PATH_ID_LENGTH:], f"{session.address}#{int.from_bytes(enc[:4], 'big')}"
        return enc, session.address

    def _set_all(
        self,
        family: Family,
        session: _Session,
        encs: list[bytes],
        attrs: RouteAttributes,
        add_path: bool,
    ) -> bool:
        """The session's path for each of ``encs`` is ``attrs``; whether any changed (the
        receive path's per-prefix loop: kept to dict operations)."""
        table, dirty = self._paths[family], self._dirty[family]
        address, changed, added = session.address, False, 0
        for enc in encs:
            if add_path:
                penc, key = self._key(session, enc, add_path)
            else:
                penc, key = enc, address
            paths = table.get(penc)
            if paths is None:
                paths = table[penc] = {}
            have = paths.get(key)
            if have is attrs:
                continue
            if have is None:
                added += 1
            elif have == attrs:
                continue
            paths[key] = attrs
            dirty.add(penc)
            changed = True
        self._path_total += added
        return changed

    def _unset(self, family: Family, session: _Session, enc: bytes) -> bool:
        session.accepted[family].discard(enc)
        penc, key = self._key(session, enc, session.add_path.get(family, False))
        paths = self._paths[family].get(penc)
        if paths is None or paths.pop(key, None) is None:
            return False
        self._path_total -= 1
        if not paths:
            del self._paths[family][penc]
        self._dirty[family].add(penc)
        return True

    def _publish(self) -> None:
        """Bring the network's table (:meth:`compiled`) up to date for the prefixes
        changed: once per prefix per flush, however many of its paths came and went."""
        for family, dirty in self._dirty.items():
            self.publish(family, dirty)


__all__ = ["Outcome", "RelayRib", "RouteVerdict", "Teardown"]
