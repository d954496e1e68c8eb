"""The agent's reading of a refusal the API server gave (pure): the manager's webhook's
denial becomes the rule and the same `field: message` text the manager's own vetting puts
in a request's status; other failures are not refusals (they are retried)."""

from __future__ import annotations

from teapot_lb.model.common import ObjectRef
from teapot_lb.tenancy.refusal import Refusal, refusal_of_denial
from teapot_lb.tenancy.request import nodes_refused
from teapot_lb.tenancy.vet import Rule
from teapot_lb.webhook.review import denial_message

INVALID = Rule.INVALID_REQUEST.value
REF = ObjectRef("TenantLoadBalancer", "tenant-acme", "c1.default.web")
STEAL = Refusal(Rule.ADDRESS_NOT_ALLOCATED, "spec.requestedIPs[0]", "198.51.100.17 is not ours")
PORTS = Refusal(Rule.QUOTA_EXCEEDED, "spec.ports", "quota of 3 ports reached; ask for more")


def denied(*refusals: Refusal[Rule]) -> str:
    """The API server's message for our webhook's denial of `refusals`."""
    problems = denial_message(r.problem(REF) for r in refusals)
    return f'admission webhook "tenancy.lb.teapot.io" denied the request: {problems}'


def test_a_webhook_denial_reads_as_the_managers_own_refusal() -> None:
    assert refusal_of_denial(422, denied(STEAL, PORTS), INVALID) == (
        "AddressNotAllocated",
        "; ".join(str(r) for r in (STEAL, PORTS)),  # as the manager's condition says it
    )


def test_a_message_with_a_semicolon_stays_whole() -> None:
    assert refusal_of_denial(422, denied(PORTS), INVALID) == ("QuotaExceeded", str(PORTS))


def test_a_denial_without_rules_and_a_schema_error_are_invalid_requests() -> None:
    other = 'admission webhook "x.example" denied the request: no'
    assert refusal_of_denial(400, other, INVALID) == ("InvalidRequest", "no")
    schema = 'TenantLoadBalancer.lb.teapot.io "w" is invalid: spec.ports: Too many: 300'
    assert refusal_of_denial(422, schema, INVALID) == ("InvalidRequest", schema)


def test_failures_that_are_not_the_requests_fault_are_not_refusals() -> None:
    assert refusal_of_denial(500, 'failed calling webhook "tenancy.lb.teapot.io"', INVALID) is None
    assert refusal_of_denial(403, "forbidden: cannot create", INVALID) is None
    assert refusal_of_denial(409, "the object has been modified", INVALID) is None


def test_the_nodes_a_refusal_names_are_its_backends() -> None:
    desired = {"spec": {"backends": [{"node": "n0"}, {"node": "n1"}, {"node": "n2"}]}}
    message = (
        "spec.backends[2].addresses[0]: node n2 address 192.0.2.200 is outside; "
        "spec.backends[2].addresses[1]: node n2 address 2001:db8:f::1 is outside"
    )
    assert nodes_refused(message, desired) == ["n2"]
    assert nodes_refused("spec.ports: quota", desired) == []
