"""One refusal shape for load-balancer requests and gateway objects: the rule (its own
enum per vetting), the field, the message."""

from __future__ import annotations

from teapot_lb.model.common import ObjectRef
from teapot_lb.tenancy.l7vet import L7Refusal, L7Rule
from teapot_lb.tenancy.refusal import Refusal
from teapot_lb.tenancy.vet import Rule

REF = ObjectRef("TenantLoadBalancer", "tenant-acme", "web")


def test_a_refusal_as_a_problem_names_the_object_the_field_and_the_rule() -> None:
    refusal = Refusal(Rule.QUOTA_EXCEEDED, "spec.ports", "3 ports; the quota is 2")
    p = refusal.problem(REF)
    assert (p.kind, p.namespace, p.name, p.field) == (
        "TenantLoadBalancer", "tenant-acme", "web", "spec.ports",
    )  # fmt: skip
    assert p.message == "3 ports; the quota is 2 [QuotaExceeded]"


def test_a_request_refusal_reads_field_then_message_and_a_fieldless_one_the_message() -> None:
    assert str(Refusal(Rule.QUOTA_EXCEEDED, "spec.ports", "too many")) == "spec.ports: too many"
    assert str(Refusal(Rule.INVALID_REQUEST, "", "contradicts itself")) == "contradicts itself"


def test_a_gateway_object_refusal_is_a_refusal_whose_text_names_its_rule() -> None:
    refusal = L7Refusal(L7Rule.HOSTNAME_TAKEN, "spec.rules[0].host", "a.example is served")
    assert isinstance(refusal, Refusal)
    assert str(refusal) == "spec.rules[0].host: a.example is served [HostnameTaken]"
    assert refusal.problem(REF).message == "a.example is served [HostnameTaken]"
