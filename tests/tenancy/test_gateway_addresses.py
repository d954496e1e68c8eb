"""The manager's book and the tenants' dedicated gateway addresses (issue 34, 7(b)): an
address the gateway holds for a tenant is never given to one of its requests and counts
in its `quotas.addresses`; one a request held first stays the request's."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address

from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.tenancy.book import ManagementView, TenantBook

from .builders import pools, tenant, tlb

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def view(
    *requests: TenantLoadBalancer, gateway: str | None = None, quota: int = 6
) -> ManagementView:
    return ManagementView(
        tenants={"acme": tenant("acme", quotas={"addresses": quota})},
        requests={f"{r.namespace}/{r.name}": r for r in requests},
        pools=pools(),
        gateway_addresses={"acme": frozenset({ip_address(gateway)})} if gateway else {},
    )


def programmed(book: TenantBook, v: ManagementView, name: str) -> tuple[str, list[str]]:
    outcome = book.decide(v, f"tenant-acme/{name}", NOW)
    assert outcome.status is not None
    conditions = {c["type"]: c for c in outcome.status["conditions"]}
    return conditions["Programmed"]["reason"], outcome.status["addresses"]


def test_a_dedicated_address_is_never_given_to_a_request_and_counts_in_the_quota() -> None:
    asking = tlb("acme", "asks", requestedIPs=["198.51.100.0"])
    book = TenantBook()
    v = view(asking, tlb("acme", "any"), gateway="198.51.100.0", quota=2)
    book.sync(v)
    reason, addresses = programmed(book, v, "asks")
    assert reason == "IPInUse" and addresses == []
    reason, addresses = programmed(book, v, "any")
    assert reason == "Programmed" and addresses == ["198.51.100.1"]
    assert book.usage("acme").addresses == 2  # the gateway's and the request's
    third = tlb("acme", "third")
    v = view(asking, tlb("acme", "any"), third, gateway="198.51.100.0", quota=2)
    outcome = book.decide(v, "tenant-acme/third", NOW)
    assert outcome.refusals and outcome.refusals[0].rule.value == "QuotaExceeded"


def test_the_address_of_a_request_that_held_it_first_stays_the_requests() -> None:
    book = TenantBook()
    first = view(tlb("acme", "web", requestedIPs=["198.51.100.4"]))
    book.sync(first)
    assert programmed(book, first, "web") == ("Programmed", ["198.51.100.4"])
    later = view(tlb("acme", "web", requestedIPs=["198.51.100.4"]), gateway="198.51.100.4")
    book.sync(later)
    assert programmed(book, later, "web") == ("Programmed", ["198.51.100.4"])
    assert book.usage("acme").addresses == 1


def test_an_address_the_gateway_lets_go_is_free_again() -> None:
    book = TenantBook()
    held = view(tlb("acme", "web", requestedIPs=["198.51.100.4"]), gateway="198.51.100.4")
    book.sync(held)
    assert programmed(book, held, "web")[0] == "IPInUse"
    free = view(tlb("acme", "web", requestedIPs=["198.51.100.4"]))
    assert programmed(book, free, "web") == ("Programmed", ["198.51.100.4"])
