"""A status write that lands on a version someone else changed must not swallow that
change (the informer's event for it is older than what the write put in the cache)."""

from __future__ import annotations

from model.builders import parse
from teapot_lb.controller.kube_cache import changed_by_others
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM
from teapot_lb.model import ApiObject


def _service(rv: str, kind: str = "LoadBalancer", **extra: object) -> ApiObject:
    return parse(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": rv, **extra},
            "spec": {"type": kind, "ports": [{"port": 80}]},
        }
    )


def test_our_own_status_and_annotation_are_not_someone_elses_change() -> None:
    before = _service("10", annotations={"example.com/note": "x"})
    after = _service("12", annotations={"example.com/note": "x", ANNOTATION_ALLOCATED_FROM: "b"})
    status = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    after = after.model_copy(update={"status": type(after.status).model_validate(status)})
    assert not changed_by_others(before, after)
    assert not changed_by_others(before, _service("13", annotations={"example.com/note": "x"}))


def test_a_spec_patch_between_read_and_write_is_seen() -> None:
    assert changed_by_others(_service("10"), _service("12", kind="ClusterIP"))


def test_a_label_or_annotation_between_read_and_write_is_seen() -> None:
    assert changed_by_others(_service("10"), _service("12", labels={"x": "y"}))
    assert changed_by_others(_service("10"), _service("12", annotations={"lb.teapot.io/pool": "p"}))
    assert changed_by_others(_service("10", generation=1), _service("12", generation=2))


def test_another_kind_is_a_change() -> None:
    node = parse({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}})
    assert changed_by_others(_service("10"), node)
