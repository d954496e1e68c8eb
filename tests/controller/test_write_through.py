"""A status write that lands on a version someone else changed must not swallow that
change (the informer's event for it is older than what the write put in the cache)."""

from __future__ import annotations

from teapot_lb.controller.kube_cache import changed_by_others
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM


def _service(rv: str, kind: str = "LoadBalancer", **extra: object) -> dict[str, object]:
    return {
        "metadata": {"name": "a", "namespace": "default", "resourceVersion": rv, **extra},
        "spec": {"type": kind},
        "status": {},
    }


def test_our_own_status_and_annotation_are_not_someone_elses_change() -> None:
    before = _service("10")
    after = _service("12", annotations={ANNOTATION_ALLOCATED_FROM: "blue"})
    after["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    assert not changed_by_others(before, after)


def test_a_spec_patch_between_read_and_write_is_seen() -> None:
    assert changed_by_others(_service("10"), _service("12", kind="ClusterIP"))


def test_a_label_or_deletion_between_read_and_write_is_seen() -> None:
    assert changed_by_others(_service("10"), _service("12", labels={"x": "y"}))
    assert changed_by_others(
        _service("10"), _service("12", deletionTimestamp="2026-12-03T00:00:00Z")
    )
