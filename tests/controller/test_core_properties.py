"""Properties of the controller core under random create/delete/pool-change sequences."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.builders import pool, service
from teapot_lb.cluster import Kind, Store
from teapot_lb.controller import rebuild

from .test_core import put, settle

POOLS = {
    "small": pool("small", "192.0.2.0/30", serviceAllocation={"priority": 1}),
    "large": pool("large", "198.51.100.0/29", serviceAllocation={"priority": 2}),
}

operation = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 11)),
    st.tuples(st.just("delete"), st.integers(0, 11)),
    st.tuples(st.just("drop-pool"), st.sampled_from(sorted(POOLS))),
    st.tuples(st.just("add-pool"), st.sampled_from(sorted(POOLS))),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=25))
def test_settled_statuses_never_duplicate_an_ip_and_survive_a_rebuild(
    operations: list[tuple[str, object]],
) -> None:
    store = Store()
    put(store, *POOLS.values())
    state = rebuild(store.view())
    for op, arg in operations:
        if op == "create":
            put(store, service(f"s{arg}"))
        elif op == "delete":
            store.delete(Kind.SERVICE, f"default/s{arg}")
        elif op == "drop-pool":
            store.delete(Kind.ADDRESS_POOL, f"lb-system/{arg}")
        else:
            put(store, POOLS[str(arg)])
        touched = [f"default/s{arg}"] if op in ("create", "delete") else []
        settle(store, state, *touched, *store.view().services)

    view = store.view()
    shown = {key: tuple(svc.ingress_ips()) for key, svc in view.services.items()}
    counts = Counter(ip for ips in shown.values() for ip in ips)
    assert all(n == 1 for n in counts.values()), counts
    for ips in shown.values():
        assert all(view.pool_of(ip) is not None for ip in ips)
    # What the statuses show is what the allocator holds.
    held = {key: a.ips for key, a in state.allocator.assignments().items()}
    assert {k: v for k, v in shown.items() if v} == held
    # Free addresses are never left unused while a Service waits.
    free = sum(p.address_count(4) for p in view.pools.values()) - len(counts)
    waiting = [key for key, ips in shown.items() if not ips]
    assert not (free > 0 and waiting), (free, waiting)
    # A restarted controller takes over exactly these IPs, with nothing to change.
    restarted = rebuild(view)
    assert not restarted.changes
    assert {k: a.ips for k, a in restarted.allocator.assignments().items()} == held
