"""Vetting and the manager's pure decisions: each rule refuses with its reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from teapot_lb.tenancy.book import ManagementView, TenantBook
from teapot_lb.tenancy.routes import wanted_routes
from teapot_lb.tenancy.vet import Refusal, Rule, Usage, tenant_of, vet
from teapot_lb.validation import validate

from .builders import TENANTS, parsed, pool_body, pools, tenant, tenant_body, tlb, tlb_body

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def view(*requests: Any, **tenants: Any) -> ManagementView:
    ts = tenants or {"acme": tenant("acme"), "bolt": tenant("bolt")}
    return ManagementView(
        tenants=ts,
        requests={f"{r.namespace}/{r.name}": r for r in requests},
        pools=pools(),
    )


def test_a_namespace_of_no_tenant_is_refused() -> None:
    owner = tenant_of("elsewhere", [tenant("acme")])
    assert isinstance(owner, Refusal) and owner.rule is Rule.NO_TENANT


def test_a_namespace_claimed_twice_is_refused() -> None:
    owner = tenant_of("tenant-acme", [tenant("acme"), tenant("bolt", namespace="tenant-acme")])
    assert isinstance(owner, Refusal) and owner.rule is Rule.AMBIGUOUS_TENANT


@pytest.mark.parametrize(
    ("spec", "rule", "field"),
    [
        ({"requestedIPs": ["198.51.100.20"]}, Rule.ADDRESS_NOT_ALLOCATED, "spec.requestedIPs[0]"),
        ({"mode": "Gateway"}, Rule.MODE_NOT_ALLOWED, "spec.mode"),
        (
            {"backends": [{"node": "x", "addresses": ["192.0.2.71"], "ready": True}]},
            Rule.BACKEND_NOT_ALLOWED,
            "spec.backends[0].addresses[0]",
        ),
        (
            {"requestedIPs": ["198.51.100.2", "198.51.100.3"]},
            Rule.INVALID_REQUEST,
            "spec.requestedIPs[1]",
        ),
    ],
)
def test_each_rule_names_its_field(spec: dict[str, Any], rule: Rule, field: str) -> None:
    refusals = vet(tlb("acme", "web", **spec), tenant("acme"), pools())
    assert [(r.rule, r.field) for r in refusals][:1] == [(rule, field)]


def test_quota_counts_what_the_tenant_holds() -> None:
    refusals = vet(tlb("acme", "web"), tenant("acme"), pools(), Usage(6, 1, 0))
    assert [r.rule for r in refusals] == [Rule.QUOTA_EXCEEDED]
    assert "quota of 6 addresses of Tenant acme reached" in refusals[0].message


def test_a_shared_ip_does_not_count_again_against_the_address_quota() -> None:
    assert vet(tlb("acme", "web"), tenant("acme"), pools(), Usage(6, 1, 0), shares=True) == []


def test_the_book_assigns_from_the_tenants_slice_and_routes_to_its_ready_nodes() -> None:
    body = tlb_body("acme", "web", externalTrafficPolicy="Local")
    body["spec"]["backends"][1]["ready"] = False
    request = parsed(body)
    book = TenantBook()
    outcome = book.decide(view(request), "tenant-acme/web", NOW)
    assert outcome.status is not None
    assert outcome.status["addresses"] == ["198.51.100.0"]
    assert [(r.prefix, [str(h) for h in r.next_hops]) for r in outcome.routes] == [
        ("198.51.100.0/32", ["192.0.2.11", "192.0.2.13"])
    ]
    assert {c["type"]: c["status"] for c in outcome.status["conditions"]} == {
        "Accepted": "True",
        "Programmed": "True",
    }


def test_cluster_policy_routes_to_every_node_but_only_while_one_is_ready() -> None:
    ips = [tlb("acme", "x").spec.backends[0].addresses[0]]
    assert len(wanted_routes("acme", tlb("acme", "x"), ips)[0].next_hops) == 3
    assert wanted_routes("acme", tlb("acme", "x", ready=False), ips) == ()


def test_a_refusal_is_a_condition_with_the_rule_as_reason_and_an_event() -> None:
    request = tlb("bolt", "steal", requestedIPs=["198.51.100.1"])
    outcome = TenantBook().decide(view(request), "tenant-bolt/steal", NOW)
    assert outcome.status is not None and outcome.status["addresses"] == []
    accepted = outcome.status["conditions"][0]
    assert (accepted["status"], accepted["reason"]) == ("False", "AddressNotAllocated")
    assert "198.51.100.1 is not allocated to Tenant bolt" in accepted["message"]
    assert outcome.event is not None and outcome.event.reason == "AddressNotAllocated"


def test_sharing_keys_work_across_one_tenants_clusters() -> None:
    a = tlb("acme", "a", cluster="c1", sharingKey="k")
    b = tlb("acme", "b", cluster="c2", sharingKey="k", ports=[{"port": 443}])
    book = TenantBook()
    v = view(a, b)
    first = book.decide(v, "tenant-acme/a", NOW).status
    second = book.decide(v, "tenant-acme/b", NOW).status
    assert first is not None and second is not None
    assert first["addresses"] == second["addresses"]
    assert book.usage("acme").addresses == 1


def test_the_book_rebuilds_from_statuses_and_keeps_ips() -> None:
    book = TenantBook()
    request = tlb("acme", "web")
    outcome = book.decide(view(request), "tenant-acme/web", NOW)
    assert outcome.status is not None
    held = parsed({**tlb_body("acme", "web"), "status": outcome.status})
    other = tlb("acme", "new")
    fresh = TenantBook()
    fresh.rebuild(view(held, other))
    again = fresh.decide(view(held, other), "tenant-acme/new", NOW).status
    assert again is not None and again["addresses"] != outcome.status["addresses"]


def test_validate_reports_tenants_that_overlap_and_requests_outside_their_tenant() -> None:
    objects = [
        parsed(pool_body("shared-v4", ["198.51.100.0/26"])),
        parsed(pool_body("shared-v6", ["2001:db8:100::/120"])),
        parsed(tenant_body("acme")),
        parsed(
            tenant_body(
                "bolt",
                nodeNetworks=["192.0.2.0/25"],
                allocations=[{"addressPool": "shared-v4", "cidrs": [TENANTS["acme"]["v4"]]}],
            )
        ),
        parsed(tlb_body("bolt", "steal", requestedIPs=["198.51.100.40"])),
    ]
    text = [str(p) for p in validate(objects)]
    assert any("Tenant/bolt: spec.allocations: overlaps" in t for t in text)
    assert any("Tenant/bolt: spec.nodeNetworks: 192.0.2.0/25 overlaps" in t for t in text)
    assert any(
        "TenantLoadBalancer/tenant-bolt/steal: spec.requestedIPs[0]:" in t
        and "[AddressNotAllocated]" in t
        for t in text
    )


def test_the_webhook_denies_a_request_for_another_tenants_ip_with_the_same_message() -> None:
    from teapot_lb.webhook.review import review

    existing = [*pools().values(), tenant("acme"), tenant("bolt")]
    body = tlb_body("bolt", "steal", requestedIPs=["198.51.100.1"])
    request = {
        "uid": "u1",
        "kind": {"group": "lb.teapot.io", "version": "v1alpha1", "kind": "TenantLoadBalancer"},
        "operation": "CREATE",
        "namespace": "tenant-bolt",
        "object": body,
    }
    answer, kind, allowed = review({"kind": "AdmissionReview", "request": request}, existing)
    assert (kind, allowed) == ("TenantLoadBalancer", False)
    message = answer["response"]["status"]["message"]
    assert message == (
        "TenantLoadBalancer/tenant-bolt/steal: spec.requestedIPs[0]: 198.51.100.1 is not "
        "allocated to Tenant bolt [AddressNotAllocated]"
    )
    ok = {**request, "object": tlb_body("bolt", "fine")}
    assert review({"kind": "AdmissionReview", "request": ok}, existing)[2] is True


def test_the_webhook_denies_a_registered_node_address_outside_the_node_networks() -> None:
    from teapot_lb.webhook.review import review

    nodes = [
        {"name": "n0", "addresses": ["192.0.2.11", "2001:db8:a::11"]},
        {"name": "n1", "addresses": ["203.0.113.7"]},
    ]
    request = {
        "uid": "u1",
        "kind": {"group": "lb.teapot.io", "version": "v1alpha1", "kind": "Tenant"},
        "operation": "CREATE",
        "object": tenant_body("acme", nodes=nodes),
    }
    answer, kind, allowed = review(
        {"kind": "AdmissionReview", "request": request}, pools().values()
    )
    assert (kind, allowed) == ("Tenant", False)
    assert answer["response"]["status"]["message"] == (
        "Tenant/acme: spec.nodes[1].addresses[0]: 203.0.113.7 of node n1 is outside the"
        " nodeNetworks of Tenant acme (192.0.2.0/26, 2001:db8:a::/64): the relay takes no"
        " session and no next hop from it"
    )
    inside = {**request, "object": tenant_body("acme", nodes=nodes[:1])}
    assert review({"kind": "AdmissionReview", "request": inside}, pools().values())[2] is True


def test_validate_reports_an_address_registered_for_two_nodes() -> None:
    twice = [
        {"name": "n0", "addresses": ["192.0.2.11"]},
        {"name": "n1", "addresses": ["192.0.2.11"]},
    ]
    text = [str(p) for p in validate([*pools().values(), parsed(tenant_body("acme", nodes=twice))])]
    assert "Tenant/acme: spec.nodes[1].addresses[0]: 192.0.2.11 is node n0's already" in text


def test_validate_reports_a_published_node_address_outside_its_tenants_node_networks() -> None:
    nodes = {
        "apiVersion": "lb.teapot.io/v1alpha1", "kind": "TenantNodes",
        "metadata": {"name": "c1", "namespace": "tenant-acme"},
        "spec": {"cluster": "c1", "nodes": [{"name": "n0", "addresses": ["192.0.2.11"]},
                                            {"name": "far", "addresses": ["203.0.113.50"]}]},
    }  # fmt: skip
    text = [str(p) for p in validate([*pools().values(), tenant("acme"), parsed(nodes)])]
    assert text == [
        "TenantNodes/tenant-acme/c1: spec.nodes[1].addresses[0]: 203.0.113.50 of node far is"
        " outside the nodeNetworks of Tenant acme (192.0.2.0/26, 2001:db8:a::/64): the relay"
        " takes no session and no next hop from it"
    ]


def test_a_tenant_given_a_namespace_of_the_clusters_own_is_refused() -> None:
    # Its agent would read that namespace whole: 'default' holds the Events about every
    # Tenant (the operator's detail), kube-system the cluster's own objects.
    pools = [parsed(pool_body("shared-v4", ["198.51.100.0/26"])),
             parsed(pool_body("shared-v6", ["2001:db8:100::/120"]))]  # fmt: skip
    for namespace in ("default", "kube-system", "kube-anything"):
        text = [
            str(p) for p in validate([*pools, parsed(tenant_body("acme", namespace=namespace))])
        ]
        assert [t for t in text if "spec.namespace" in t] == [
            f"Tenant/acme: spec.namespace: {namespace!r} is a namespace of the cluster's own, "
            "which the tenant's agent would read whole (the Events about every Tenant are in "
            "'default'); give the Tenant a namespace of its own"
        ]
    assert validate([*pools, parsed(tenant_body("acme"))]) == []
