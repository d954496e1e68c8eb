"""The manager's bookkeeping follows each change (issue 37 goal 3): after any sequence of
Tenant, request, denial and gateway-address events (and decisions, and the Tenants
followed), what it keeps incrementally equals the same computed from scratch over
everything it holds: the Tenant of each namespace (the old walk of every Tenant,
:func:`~teapot_lb.tenancy.vet.tenant_of`), the requests and denials by namespace, each
Tenant's refused count, the book's usage of each Tenant (with and without each request),
the routes count; and its view reads the maps as they are now, without a copy.

The events go straight to the informers' handlers (no API server: the manager is not
leading, so nothing is enqueued or written).
"""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_network
from typing import Any, cast

from hypothesis import example, given, settings
from hypothesis import strategies as st

from teapot_lb.gateway.control.l7services import LABEL_ADDRESS_OF
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.informer import EventType
from teapot_lb.manager.kube import KubeManager, ManagerConfig, _denied_object
from teapot_lb.model.service import ANNOTATION_IPS
from teapot_lb.tenancy.book import ManagementView, TenantBook
from teapot_lb.tenancy.request import REQUEST_KIND
from teapot_lb.tenancy.vet import NamespaceOwners, Refusal, Usage, tenant_of

from .builders import CONFIG_NS, pool_body, tenant, tenant_body, tlb_body

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TENANT_NAMES = ("acme", "bolt")
NAMESPACES = ("tenant-acme", "tenant-bolt", "elsewhere")
REQUEST_NAMES = ("web", "api", "db")

# ------------------------------------------------------------------ the events

tenant_events = st.tuples(
    st.just("tenant"),
    st.sampled_from(TENANT_NAMES),
    st.sampled_from((*NAMESPACES, None)),  # None: the Tenant is deleted
    st.sampled_from((5, 1, 0)),  # its load-balancer quota
    st.booleans(),  # its IPv4 allocation narrowed to its upper half (IPs held move)
)
request_events = st.tuples(
    st.just("request"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(REQUEST_NAMES),
    st.sampled_from(("ok", "foreign-ip", "invalid", "no-backend", None)),  # None: deleted
)
denial_events = st.tuples(
    st.just("denial"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(("d1", "d2", "d3")),
    st.sampled_from((REQUEST_KIND, "Gateway", None)),  # what it is about; None: deleted
)
gateway_events = st.tuples(
    st.just("gateway"),
    st.sampled_from(("g1", "g2")),  # the Service announcing it
    st.sampled_from(TENANT_NAMES),
    st.sampled_from(("198.51.100.0", "198.51.100.2", "198.51.100.17", None)),  # None: gone
)
decisions = st.tuples(
    st.just("decide"), st.sampled_from(NAMESPACES), st.sampled_from(REQUEST_NAMES)
)
event_lists = st.lists(
    st.one_of(
        tenant_events,
        request_events,
        denial_events,
        gateway_events,
        decisions,
        st.just(("sync",)),
    ),
    max_size=40,
)


def apply(manager: KubeManager, event: tuple[Any, ...]) -> None:
    match event:
        case ("tenant", name, namespace, quota, narrow):
            body = tenant_body(name, quotas={"loadBalancers": quota})
            if namespace is not None:
                body["spec"]["namespace"] = namespace
            if narrow:
                v4 = body["spec"]["allocations"][0]
                v4["cidrs"] = [str(list(ip_network(v4["cidrs"][0]).subnets(1))[1])]
            kind = EventType.MODIFIED if namespace is not None else EventType.DELETED
            manager._on_tenant(kind, name, body)
            manager.book.sync(manager.view())  # as the manager follows a Tenant's change
        case ("request", namespace, name, shape):
            key = f"{namespace}/{name}"
            manager._on_request(
                EventType.DELETED if shape is None else EventType.MODIFIED,
                key,
                _request_body(namespace, name, shape or "ok"),
            )
            manager.book.decide(manager.view(), key, NOW)  # as the manager reconciles it
            manager.book.reserve(manager.view())  # and then writes its Tenant's status
        case ("denial", namespace, name, about):
            body = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {"kind": about or REQUEST_KIND, "name": f"x-{name}"},
            }
            kind = EventType.DELETED if about is None else EventType.MODIFIED
            manager._on_denial(kind, f"{namespace}/{name}", body)
        case ("gateway", service, name, ip):
            body = {
                "metadata": {
                    "name": service,
                    "namespace": CONFIG_NS,
                    "labels": {LABEL_ADDRESS_OF: name},
                    "annotations": {ANNOTATION_IPS: ip or ""},
                }
            }
            kind = EventType.DELETED if ip is None else EventType.MODIFIED
            manager._on_gateway_service(kind, f"{CONFIG_NS}/{service}", body)
            manager.book.reserve(manager.view())  # as the Tenant's status write does
        case ("decide", namespace, name):
            manager.book.decide(manager.view(), f"{namespace}/{name}", NOW)
        case ("sync",):
            manager.book.sync(manager.view())


def _request_body(namespace: str, name: str, shape: str) -> dict[str, Any]:
    body = tlb_body("acme", name, namespace=namespace)
    if shape == "foreign-ip":
        body["spec"]["requestedIPs"] = ["203.0.113.7"]
    elif shape == "invalid":
        body["spec"]["ports"] = [{"port": "not a port"}]
    elif shape == "no-backend":
        body["spec"]["backends"] = []
    return body


def fresh_manager() -> KubeManager:
    """The pools and both Tenants, each in its own namespace."""
    # Not run: no informer starts, no call is made; the client is never used.
    manager = KubeManager(cast(KubeClient, object()), ManagerConfig(config_namespace=CONFIG_NS))
    for name in ("shared-v4", "shared-v6"):
        addresses = ["198.51.100.0/26"] if name == "shared-v4" else ["2001:db8:100::/120"]
        manager._on_pool(EventType.ADDED, f"{CONFIG_NS}/{name}", pool_body(name, addresses))
    for name in TENANT_NAMES:
        manager._on_tenant(EventType.ADDED, name, tenant_body(name))
    return manager


# ------------------------------------------------------------------ from scratch


def refused_from_scratch(manager: KubeManager, name: str, namespace: str) -> int:
    """The count as the manager computed it before (a walk of every request and denial)."""
    in_namespace = [k for k in manager._raw if k.startswith(namespace + "/")]
    denials = [e for k, e in manager._denials.items() if k.startswith(namespace + "/")]
    return len(
        {k for k in in_namespace if manager.book.holder_tenant(k) != name}
        | {_denied_object(namespace, e) for e in denials}
        | manager._gateway_refused.of(name)
    )


def ips_from_scratch(book: TenantBook, tenant: str, without: str | None = None) -> set[Any]:
    """The IPs a tenant's requests (but `without`) and gateway hold, from its allocator."""
    allocator = book._allocators[tenant]
    keys = [k for k in book._held.get(tenant, ()) if k != without]
    ips = {ip for k in keys if (a := allocator.assignment(k)) is not None for ip in a.ips}
    return ips | {ip for t, ip in book._gateway.values() if t == tenant}


def usage_from_scratch(book: TenantBook, tenant: str, without: str | None = None) -> Usage:
    """A tenant's usage as the book computed it before (a walk of its requests)."""
    if tenant not in book._allocators:
        return Usage()
    keys = [k for k in book._held.get(tenant, ()) if k != without]
    ips = ips_from_scratch(book, tenant, without)
    return Usage(len(ips), len(keys), sum(book._ports[k] for k in keys))


def by_namespace(keys: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in keys:
        out.setdefault(key.partition("/")[0], set()).add(key)
    return out


def assert_as_from_scratch(manager: KubeManager) -> None:
    view = manager.view()
    for namespace in NAMESPACES:
        assert view.tenant_of(namespace) == tenant_of(namespace, manager.tenants.values())
    assert dict(view.tenants) == manager.tenants
    assert dict(view.requests) == manager.requests
    assert dict(view.unparsed) == manager.unparsed
    assert manager._requests_in == by_namespace(manager._raw)
    assert manager._denials_in == by_namespace(manager._denials)
    for name, held in manager.tenants.items():
        namespace = held.spec.namespace
        assert manager.refused(name, namespace) == refused_from_scratch(manager, name, namespace)
    assert manager.book.route_count() == len(manager.book.routes())
    book = manager.book
    for name in TENANT_NAMES:
        for without in (None, *manager._raw):
            assert book.usage(name, without=without) == usage_from_scratch(book, name, without)
        if name in book._allocators:  # the IPs counted are the ones held, not only as many
            assert set(book._ip_refs.get(name, ())) == ips_from_scratch(book, name)
    # The gateway addresses as a full reserve settles them (a skipped one left no work).
    held, reserved = dict(book._gateway), book._reserved
    book.reserve(ManagementView(gateway_addresses=dict(view.gateway_addresses)))
    assert book._gateway == held
    book._reserved = reserved


# ------------------------------------------------------------------ the properties


@settings(max_examples=200, deadline=None)
@given(event_lists)
@example(  # a gateway address a request holds is the gateway's once the request lets go
    [
        ("request", "tenant-acme", "web", "ok"),
        ("gateway", "g1", "acme", "198.51.100.0"),
        ("request", "tenant-acme", "web", None),
    ]
)
@example(  # a narrowed allocation moves the IP a request holds
    [("request", "tenant-acme", "web", "ok"), ("tenant", "acme", "tenant-acme", 5, True)]
)
def test_the_managers_indexes_equal_a_computation_from_scratch_after_any_changes(
    events: list[tuple[Any, ...]],
) -> None:
    manager = fresh_manager()
    for event in events:
        apply(manager, event)
        assert_as_from_scratch(manager)


@settings(max_examples=200, deadline=None)
@given(event_lists)
def test_a_book_rebuilt_from_the_live_view_decides_as_the_book_that_followed(
    events: list[tuple[Any, ...]],
) -> None:
    """What the requests hold, written to their statuses, rebuilds the same book: the
    live view serves the rebuild as the snapshot did."""
    manager = fresh_manager()
    for event in events:
        apply(manager, event)
    for key in sorted(manager.requests):
        outcome = manager.book.decide(manager.view(), key, NOW)
        if outcome.status is not None:
            body = {**manager._raw[key], "status": outcome.status}
            manager._on_request(EventType.MODIFIED, key, body)
    held = {k: manager.book.holder_tenant(k) for k in manager.requests}
    manager.book.rebuild(manager.view())
    assert {k: manager.book.holder_tenant(k) for k in manager.requests} == held
    assert manager.book.route_count() == len(manager.book.routes())


def test_the_tenants_of_a_namespace_are_sorted_and_follow_a_move() -> None:
    owners = NamespaceOwners()
    acme = tenant("acme", namespace="tenant-x")
    bolt = tenant("bolt", namespace="tenant-x")
    owners.put(bolt)
    owners.put(acme)
    assert owners.names("tenant-x") == ["acme", "bolt"]
    both = owners.of("tenant-x")
    assert both == tenant_of("tenant-x", [bolt, acme])
    assert isinstance(both, Refusal) and "Tenants acme, bolt" in both.message
    owners.put(tenant("bolt", namespace="tenant-y"))  # bolt moves: acme alone in tenant-x
    assert owners.of("tenant-x") == acme
    owners.drop("acme")
    gone = owners.of("tenant-x")
    assert isinstance(gone, Refusal) and gone == tenant_of("tenant-x", [])


def test_the_view_reads_requests_as_they_are_now_without_a_copy() -> None:
    manager = fresh_manager()
    view = manager.view()
    manager._on_request(EventType.ADDED, "tenant-acme/web", tlb_body("acme", "web"))
    assert manager.view() is view and list(view.requests) == ["tenant-acme/web"]
    outcome = manager.book.decide(view, "tenant-acme/web", NOW)
    assert outcome.status is not None and outcome.status["addresses"] == ["198.51.100.0"]
    assert manager.book.route_count() == 1
    manager._on_request(EventType.DELETED, "tenant-acme/web", tlb_body("acme", "web"))
    assert manager.book.decide(view, "tenant-acme/web", NOW).status is None
    assert manager.book.route_count() == 0
