"""The changes that turn what the Northbound database holds into what we want (pure).

:func:`diff` compares two :class:`~teapot_lb.ovn.rows.NBState` and returns typed
operations, in the order one transaction applies them: rows are created and updated before
anything references them, references are dropped before their rows are deleted. Equal
states give no operation (no churn: a restart or a reconnect that finds the database as we
left it writes nothing). Only our rows are in either state, so nothing here can touch
another owner's rows or references.

Routers and switches that do not exist are skipped and named in :attr:`Changes.missing`:
a router created later is attached by the next reconcile (level-triggered).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from teapot_lb.ovn.rows import LoadBalancer, NBState, Target

# The Load_Balancer columns we manage, as named in the NB schema and on LoadBalancer.
COLUMNS = tuple(f.name for f in fields(LoadBalancer) if f.name != "name")


@dataclass(frozen=True)
class PutLoadBalancer:
    """Create the row, or set `columns` of the existing row of that name."""

    load_balancer: LoadBalancer
    columns: tuple[str, ...] = COLUMNS
    create: bool = True


@dataclass(frozen=True)
class DeleteLoadBalancer:
    name: str


@dataclass(frozen=True)
class PutGroup:
    """Create the Load_Balancer_Group, or set its members (load balancer names)."""

    name: str
    members: frozenset[str]
    create: bool = True


@dataclass(frozen=True)
class DeleteGroup:
    name: str


@dataclass(frozen=True)
class Attach:
    """Add a reference from `target` to our load balancer (or group, `group=True`)."""

    target: Target
    name: str
    group: bool = False


@dataclass(frozen=True)
class Detach:
    """Remove a reference from `target` to our load balancer (or group)."""

    target: Target
    name: str
    group: bool = False


Operation = PutLoadBalancer | DeleteLoadBalancer | PutGroup | DeleteGroup | Attach | Detach


@dataclass(frozen=True)
class Changes:
    operations: tuple[Operation, ...]
    missing: tuple[Target, ...] = ()  # wanted routers/switches the database does not have

    def __bool__(self) -> bool:
        return bool(self.operations)


def diff(desired: NBState, observed: NBState) -> Changes:
    ops: list[Operation] = []
    for name in sorted(desired.load_balancers):
        want = desired.load_balancers[name]
        have = observed.load_balancers.get(name)
        if have is None:
            ops.append(PutLoadBalancer(want))
        elif have != want:
            changed = tuple(c for c in COLUMNS if getattr(have, c) != getattr(want, c))
            ops.append(PutLoadBalancer(want, changed, create=False))
    for name in sorted(desired.groups):
        members = desired.groups[name]
        if name not in observed.groups:
            ops.append(PutGroup(name, members))
        elif observed.groups[name] != members:
            ops.append(PutGroup(name, members, create=False))
    exists = observed.targets
    missing: set[Target] = set()
    for group, wanted, held in (
        (False, desired.attached, observed.attached),
        (True, desired.group_attached, observed.group_attached),
    ):
        for target in sorted(set(wanted) | set(held)):
            want_names = wanted.get(target, frozenset())
            have_names = held.get(target, frozenset())
            if exists is not None and target not in exists:
                if want_names:
                    missing.add(target)
                continue
            ops.extend(Attach(target, n, group) for n in sorted(want_names - have_names))
            ops.extend(Detach(target, n, group) for n in sorted(have_names - want_names))
    ops.extend(DeleteGroup(n) for n in sorted(set(observed.groups) - set(desired.groups)))
    ops.extend(
        DeleteLoadBalancer(n)
        for n in sorted(set(observed.load_balancers) - set(desired.load_balancers))
    )
    return Changes(tuple(ops), tuple(sorted(missing)))
