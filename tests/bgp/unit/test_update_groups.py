"""Update groups: peers whose Adj-RIB-Outs share a memo send exactly what each would have
computed alone, whatever the order of changes, flushes and session resets; and peers in
step compute a flush once."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_network

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.bgp.attributes import Desired, Paths, RouteAttributes
from teapot_lb.bgp.rib import AdjRibOut, ExportContext, change_compiled, compile_routes
from teapot_lb.bgp.rib.update_groups import ExportMemo
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST

PREFIXES = [ip_network(f"192.0.2.{i}/32") for i in range(1, 7)] + [
    ip_network(f"2001:db8::{i}/128") for i in range(1, 4)
]
ATTRS = st.sampled_from(
    [None, RouteAttributes(local_pref=200), RouteAttributes(communities=(7,))]
)  # fmt: skip
PATHS = st.builds(
    lambda keys: Paths.of({k: RouteAttributes(communities=(i,)) for i, k in enumerate(keys)}),
    st.sets(st.sampled_from(["a", "b", "c"]), min_size=1),
)
CHANGE = st.dictionaries(
    st.integers(0, len(PREFIXES) - 1), st.one_of(ATTRS, PATHS, st.just("gone")), min_size=1
)
PEERS = 4
OP = st.one_of(
    st.tuples(st.just("change"), CHANGE),
    st.tuples(st.just("flush"), st.integers(0, PEERS - 1)),
    st.tuples(st.just("flush all"), st.none()),
    st.tuples(st.just("reset"), st.integers(0, PEERS - 1)),
)
BOTH = frozenset({IPV4_UNICAST, IPV6_UNICAST})
PLAIN = ExportContext(
    local_as=64500, peer_as=64496, next_hop_v4=IPv4Address("192.0.2.254"),
    next_hop_v6=(IPv6Address("2001:db8::fe"),), families=BOTH,
)  # fmt: skip
ADD_PATH = ExportContext(
    local_as=64500, peer_as=64496, next_hop_v4=IPv4Address("192.0.2.254"),
    next_hop_v6=(IPv6Address("2001:db8::fe"),), families=BOTH, add_path=BOTH,
)  # fmt: skip
# Two peers of each kind: each pair may form a group, the kinds never share.
EXPORTS = [PLAIN, PLAIN, ADD_PATH, ADD_PATH]


def apply(table: dict[object, Desired | None], change: dict[int, object]) -> tuple[dict, list]:  # type: ignore[type-arg]
    put: dict[object, Desired | None] = {}
    gone: list[object] = []
    for i, what in change.items():
        if what == "gone":
            gone.append(PREFIXES[i])
            table.pop(PREFIXES[i], None)
        else:
            put[PREFIXES[i]] = what  # type: ignore[assignment]
            table[PREFIXES[i]] = what  # type: ignore[assignment]
    return put, gone


@settings(max_examples=400, deadline=None)
@given(st.lists(OP, min_size=1, max_size=30))
def test_grouped_peers_send_what_each_would_have_sent_alone(ops: list[tuple[str, object]]) -> None:
    memo = ExportMemo()
    grouped = [AdjRibOut() for _ in range(PEERS)]
    alone = [AdjRibOut() for _ in range(PEERS)]
    for rib in grouped:
        rib.memo = memo
    table: dict[object, Desired | None] = {}
    compiled = compile_routes({})
    for rib in (*grouped, *alone):
        rib.set_desired(compiled)

    def flush(i: int) -> None:
        got, want = grouped[i].updates(EXPORTS[i]), alone[i].updates(EXPORTS[i])
        assert sorted(got) == sorted(want)
        for family in (IPV4_UNICAST, IPV6_UNICAST):
            assert grouped[i].advertised(family) == alone[i].advertised(family)

    for op, arg in ops:
        if op == "change":
            put, gone = apply(table, arg)  # type: ignore[arg-type]
            touched = change_compiled(compiled, put, gone)  # type: ignore[arg-type]
            for rib in (*grouped, *alone):
                rib.set_desired(compiled, touched)
        elif op == "flush":
            flush(arg)  # type: ignore[arg-type]
        elif op == "flush all":
            for i in range(PEERS):
                flush(i)
        else:
            grouped[arg].reset()  # type: ignore[index]
            alone[arg].reset()  # type: ignore[index]
    for i in range(PEERS):
        flush(i)


def test_peers_in_step_compute_a_flush_once() -> None:
    memo = ExportMemo()
    ribs = [AdjRibOut() for _ in range(8)]
    routes = {ip_network(f"2001:db8:1::{i:x}/128"): None for i in range(1, 1001)}
    compiled = compile_routes(routes)
    for rib in ribs:
        rib.memo = memo
        rib.set_desired(compiled)
    first = [rib.updates(ADD_PATH) for rib in ribs]
    assert memo.shared == 7
    assert all(sorted(m) == sorted(first[0]) for m in first)
    # A change later: still one computation for the eight.
    extra = ip_network("2001:db8:2::1/128")
    touched = change_compiled(compiled, {extra: RouteAttributes(local_pref=50)}, [])
    for rib in ribs:
        rib.set_desired(compiled, touched)
    again = [rib.updates(ADD_PATH) for rib in ribs]
    assert memo.shared == 14 and len(again[0]) == 1
    # A peer whose session went down is out of step: it computes its full table alone.
    ribs[3].reset()
    assert ribs[3].updates(ADD_PATH) and memo.shared == 14
    assert ribs[3].advertised(IPV6_UNICAST) == ribs[0].advertised(IPV6_UNICAST)


def test_a_peer_taking_turns_to_compute_keeps_its_path_index_right() -> None:
    """Two ADD-PATH peers in step, the first to flush after each change computes it: each
    keeps its index of sent paths (prefix → keys) right when it takes the other's flush."""
    memo = ExportMemo()
    a, b = AdjRibOut(), AdjRibOut()
    alone = AdjRibOut()
    a.memo = b.memo = memo
    prefix = ip_network("2001:db8::1/128")
    compiled = compile_routes({ip_network("2001:db8::9/128"): None})
    steps: list[tuple[dict[object, Desired | None], list[object], list[AdjRibOut]]] = [
        ({}, [], [a, b]),  # the whole table: a computes, b takes
        ({prefix: Paths.of({"n1": RouteAttributes()})}, [], [a, b]),  # a builds its index
        ({}, [prefix], [b, a]),  # b computes; a takes, with an index: p's one key goes
        ({}, [prefix], [a, b]),  # p touched again, still gone: a computes from its index
        ({prefix: Paths.of({"n1": RouteAttributes()})}, [], [b, a]),
        ({}, [prefix], [a, b]),
    ]
    for put, gone, order in steps:
        touched = change_compiled(compiled, put, gone)  # type: ignore[arg-type]
        for rib in (a, b, alone):
            rib.set_desired(compiled, touched)
        want = sorted(alone.updates(ADD_PATH))
        for rib in order:
            assert sorted(rib.updates(ADD_PATH)) == want
            assert rib.advertised(IPV6_UNICAST) == alone.advertised(IPV6_UNICAST)
    assert memo.shared == len(steps)


def test_peers_in_step_keep_one_sent_table_between_them() -> None:
    # Eight routers fed 200,000 paths: one table of what was sent (about 9 MB), not eight.
    memo = ExportMemo()
    ribs = [AdjRibOut() for _ in range(8)]
    compiled = compile_routes({ip_network(f"2001:db8:1::{i:x}/128"): None for i in range(1, 101)})
    for rib in ribs:
        rib.memo = memo
        rib.set_desired(compiled)
    for rib in ribs:
        rib.updates(ADD_PATH)
    first = ribs[0].advertised(IPV6_UNICAST)
    assert len(first) == 100 and all(r.advertised(IPV6_UNICAST) is first for r in ribs)
    # A change: the first to flush makes the new table (the old one is left unchanged for
    # those that have not flushed yet), the others take it.
    extra = ip_network("2001:db8:2::1/128")
    touched = change_compiled(compiled, {extra: RouteAttributes(local_pref=50)}, [])
    for rib in ribs:
        rib.set_desired(compiled, touched)
    ribs[0].updates(ADD_PATH)
    second = ribs[0].advertised(IPV6_UNICAST)
    assert len(second) == 101 and len(first) == 100
    for rib in ribs[1:]:
        assert rib.advertised(IPV6_UNICAST) is first
        rib.updates(ADD_PATH)
        assert rib.advertised(IPV6_UNICAST) is second
    # One out of step (its session reset) sends its own and keeps its own.
    ribs[3].reset()
    ribs[3].updates(ADD_PATH)
    assert ribs[3].advertised(IPV6_UNICAST) == second
    assert ribs[3].advertised(IPV6_UNICAST) is not second


def test_a_lone_peer_changes_its_sent_table_in_place() -> None:
    # The usual relay: one router. No other peer can hold its table, so a change costs the
    # change, not a copy of 200,000 paths per flush.
    memo = ExportMemo()
    rib = AdjRibOut()
    rib.memo = memo
    compiled = compile_routes({ip_network(f"2001:db8:1::{i:x}/128"): None for i in range(1, 101)})
    rib.set_desired(compiled)
    rib.updates(ADD_PATH)
    table = rib.advertised(IPV6_UNICAST)
    for i in range(3):
        extra = ip_network(f"2001:db8:2::{i + 1:x}/128")
        touched = change_compiled(compiled, {extra: RouteAttributes(local_pref=50)}, [])
        rib.set_desired(compiled, touched)
        assert rib.updates(ADD_PATH)
        assert rib.advertised(IPV6_UNICAST) is table
    assert len(table) == 103
