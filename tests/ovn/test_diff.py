"""The operations between what the Northbound holds and what we want."""

from __future__ import annotations

from dataclasses import replace

from teapot_lb.ovn.diff import (
    Attach,
    DeleteGroup,
    DeleteLoadBalancer,
    Detach,
    PutGroup,
    PutLoadBalancer,
    diff,
)
from teapot_lb.ovn.rows import LoadBalancer, NBState, Table, Target

R = Target(Table.ROUTER, "gr0")
S = Target(Table.SWITCH, "ls0")
LB = LoadBalancer("teapot-lb/t/default/web/203.0.113.1/tcp", "tcp", (("203.0.113.1:80", "a"),))
G = "teapot-lb/t/ns/ovn"
WANT = NBState(
    load_balancers={LB.name: LB},
    groups={G: frozenset({LB.name})},
    group_attached={R: frozenset({G}), S: frozenset({G})},
)


def held(state: NBState, *targets: Target) -> NBState:
    return replace(state, targets=frozenset(targets or (R, S)))


def test_equal_states_need_no_operation() -> None:
    assert not diff(WANT, held(WANT))


def test_an_empty_database_gets_rows_then_groups_then_attachments() -> None:
    ops = diff(WANT, held(NBState())).operations
    assert ops == (
        PutLoadBalancer(LB),
        PutGroup(G, frozenset({LB.name})),
        Attach(R, G, group=True),
        Attach(S, G, group=True),
    )


def test_a_changed_row_sets_only_the_changed_columns() -> None:
    moved = replace(LB, vips=(("203.0.113.1:80", "b"),))
    want = replace(WANT, load_balancers={LB.name: moved})
    assert diff(want, held(WANT)).operations == (PutLoadBalancer(moved, ("vips",), create=False),)


def test_what_we_no_longer_want_is_detached_then_deleted() -> None:
    ops = diff(NBState(), held(WANT)).operations
    assert ops == (
        Detach(R, G, group=True),
        Detach(S, G, group=True),
        DeleteGroup(G),
        DeleteLoadBalancer(LB.name),
    )


def test_a_missing_router_is_reported_and_skipped_not_retried_as_an_operation() -> None:
    changes = diff(WANT, held(replace(WANT, group_attached={S: frozenset({G})}), S))
    assert changes.operations == ()
    assert changes.missing == (R,)


def test_direct_attachments_follow_the_wanted_set() -> None:
    local = replace(LB, name=LB.name + "/gr0")
    want = NBState(load_balancers={local.name: local}, attached={R: frozenset({local.name})})
    have = NBState(load_balancers={local.name: local})
    assert diff(want, held(have)).operations == (Attach(R, local.name),)
