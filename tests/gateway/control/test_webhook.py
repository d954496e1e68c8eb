"""The admission review for the gateway's kinds: an Ingress or a Gateway API object is
vetted by the gateway's check when one is given, and answered with object, field, rule."""

from __future__ import annotations

import json
from typing import Any

from model.gateway_api_cases import http_route
from teapot_lb.model import ApiObject
from teapot_lb.model.gateway_api import GATEWAY_GROUP
from teapot_lb.model.problem import Problem
from teapot_lb.tenancy.l7vet import L7World, problems_of, vet_object
from teapot_lb.webhook import review

from .builders import ingress, ingress_body, tenant


def admission_review(obj: dict[str, Any], group: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "operation": "CREATE",
            "namespace": obj["metadata"].get("namespace"),
            "object": obj,
        },
    }


def check(obj: ApiObject) -> list[Problem]:
    owner = ingress("acme", "shop", "www.apps.example")
    world = L7World(
        [
            tenant("acme", dnsDomains=["acme.example", "apps.example"]),
            tenant("bolt", dnsDomains=["bolt.example", "apps.example"]),
        ],
        [owner],
    )
    assert obj.kind == "Ingress"
    return problems_of(obj, vet_object(obj, L7World(world.tenants, [*world.objects, obj])))  # type: ignore[arg-type]


def test_an_ingress_stealing_a_hostname_is_denied_with_field_and_rule() -> None:
    theft = ingress_body("bolt", "evil", "www.apps.example", age=9)
    answer, kind, allowed = review(
        admission_review(theft, "networking.k8s.io", "Ingress"), [], l7=check
    )
    assert (kind, allowed) == ("Ingress", False)
    message = answer["response"]["status"]["message"]
    assert "spec.rules[0].host" in message and "[HostnameTaken]" in message


def test_a_fine_ingress_is_admitted_and_without_the_check_nothing_changes() -> None:
    fine = ingress_body("bolt", "site", "www.bolt.example", age=9)
    assert review(admission_review(fine, "networking.k8s.io", "Ingress"), [], l7=check)[2]
    theft = ingress_body("bolt", "evil", "www.apps.example", age=9)
    assert review(admission_review(theft, "networking.k8s.io", "Ingress"), [])[2]


def test_an_object_that_does_not_parse_is_denied_naming_the_field() -> None:
    broken = ingress_body("bolt", "evil", "www.bolt.example")
    broken["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = "Fuzzy"
    answer, _, allowed = review(
        admission_review(broken, "networking.k8s.io", "Ingress"), [], l7=check
    )
    assert not allowed and "pathType" in answer["response"]["status"]["message"]


def test_the_gateways_own_refusal_note_on_a_refused_ingress_is_admitted() -> None:
    theft = ingress_body("bolt", "evil", "www.apps.example", age=9)
    noted = json.loads(json.dumps(theft))
    noted["metadata"]["annotations"]["gateway.lb.teapot.io/refused"] = "HostnameTaken: ..."
    body = admission_review(noted, "networking.k8s.io", "Ingress")
    body["request"]["operation"] = "UPDATE"
    body["request"]["oldObject"] = theft
    assert review(body, [], l7=check)[2]
    # Any other change of the refused object is vetted again (and refused).
    noted["metadata"]["annotations"]["team"] = "x"
    assert not review(body, [], l7=check)[2]


def test_a_route_the_upstream_crd_refuses_is_denied_with_the_rule_message_and_field() -> None:
    route = http_route(
        {"matches": [{"path": {"type": "Exact", "value": "/old"}}],
         "filters": [{"type": "RequestRedirect", "requestRedirect": {
             "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}]})  # fmt: skip
    route["metadata"]["namespace"] = "tenant-acme"
    answer, kind, allowed = review(
        admission_review(route, GATEWAY_GROUP, "HTTPRoute"), [], l7=lambda _: []
    )
    assert (kind, allowed) == ("HTTPRoute", False)
    message = answer["response"]["status"]["message"]
    assert message.startswith("HTTPRoute/tenant-acme/r: spec.rules[0]: When using RequestRedirect")


def test_a_gateway_class_update_changing_its_controller_is_denied_as_immutable() -> None:
    def gateway_class(controller: str) -> dict[str, Any]:
        return {"apiVersion": f"{GATEWAY_GROUP}/v1", "kind": "GatewayClass",
                "metadata": {"name": "teapot"}, "spec": {"controllerName": controller}}  # fmt: skip

    body = admission_review(gateway_class("example.com/other"), GATEWAY_GROUP, "GatewayClass")
    body["request"].update(operation="UPDATE", namespace=None,
                           oldObject=gateway_class("lb.teapot.io/gateway"))  # fmt: skip
    answer, _, allowed = review(body, [], l7=lambda _: [])
    assert not allowed
    assert "spec.controllerName: Value is immutable" in answer["response"]["status"]["message"]
    body["request"]["operation"] = "CREATE"
    del body["request"]["oldObject"]
    assert review(body, [], l7=lambda _: [])[2]
