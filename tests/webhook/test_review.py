"""AdmissionReview answers: the same validation as `teapot-lb validate`, against the cache."""

from __future__ import annotations

from typing import Any

import pytest

from model.builders import objects, pool
from teapot_lb.webhook import BadReview, review


def admission(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    kind = obj.get("kind", "AddressPool")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "4b1f",
            "kind": {"group": "lb.teapot.io", "version": "v1alpha1", "kind": kind},
            "operation": operation,
            "namespace": obj.get("metadata", {}).get("namespace"),
            "name": obj.get("metadata", {}).get("name"),
            "object": obj,
        },
    }


def test_a_valid_pool_is_allowed_with_the_request_uid() -> None:
    answer, kind, allowed = review(admission(pool("blue", "192.0.2.0/28")), [])
    assert allowed and kind == "AddressPool"
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"] == {"uid": "4b1f", "allowed": True}


def test_a_pool_overlapping_an_existing_one_is_denied_naming_both() -> None:
    existing = objects(pool("blue", "192.0.2.0/28"))
    answer, _, allowed = review(admission(pool("green", "192.0.2.8/29")), existing)
    assert not allowed
    status = answer["response"]["status"]
    assert status["code"] == 422
    assert "AddressPool/lb-system/green" in status["message"]
    assert "overlaps AddressPool 'blue'" in status["message"]


def test_a_malformed_field_is_denied_with_the_field_and_reason() -> None:
    answer, _, allowed = review(admission(pool("typo", "192.0.2.0/33")), [])
    assert not allowed
    assert "spec.addresses[0]" in answer["response"]["status"]["message"]


def test_updating_a_pool_does_not_conflict_with_its_own_old_version() -> None:
    existing = objects(pool("blue", "192.0.2.0/28"))
    _, _, allowed = review(admission(pool("blue", "192.0.2.0/27"), "UPDATE"), existing)
    assert allowed


def test_deletions_and_other_groups_are_allowed() -> None:
    broken = pool("typo", "nonsense")
    assert review(admission(broken, "DELETE"), [])[2]
    other = admission(broken)
    other["request"]["kind"]["group"] = "example.com"
    assert review(other, [])[2]


def test_a_namespace_given_only_by_the_request_counts() -> None:
    doc = pool("green", "192.0.2.8/29")
    del doc["metadata"]["namespace"]
    request = admission(doc)
    request["request"]["namespace"] = "lb-system"
    _, _, allowed = review(request, objects(pool("blue", "192.0.2.0/28")))
    assert not allowed


def test_something_else_than_a_review_is_rejected() -> None:
    with pytest.raises(BadReview):
        review({"kind": "Pod"}, [])


def test_an_object_outside_the_config_namespace_is_admitted_with_a_warning() -> None:
    answer, _, allowed = review(admission(pool("blue", "192.0.2.0/28")), [], "teapot-lb-system")
    assert allowed
    (warning,) = answer["response"]["warnings"]
    assert "'teapot-lb-system' only" in warning and "'lb-system'" in warning
    quiet, _, _ = review(admission(pool("blue", "192.0.2.0/28")), [], "lb-system")
    assert "warnings" not in quiet["response"]
