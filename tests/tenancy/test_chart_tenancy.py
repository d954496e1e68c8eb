"""The chart's `speaker.tenancy` value: route mode's flag and the read access it needs."""

from __future__ import annotations

from typing import Any

from controller.chart import render_objects


def _speaker_args(objects: list[dict[str, Any]]) -> list[str]:
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return [str(a) for a in container["args"]]


def test_off_by_default_no_flag_and_no_access_to_the_management_kinds() -> None:
    objects = render_objects()
    assert "--tenancy" not in _speaker_args(objects)
    assert not [o for o in objects if o["metadata"]["name"] == "teapot-lb-speaker-tenancy"]


def test_on_the_speaker_runs_with_tenancy_and_may_read_tenants_and_requests() -> None:
    objects = render_objects({"speaker": {"tenancy": True}})
    assert "--tenancy" in _speaker_args(objects)
    role = next(
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "teapot-lb-speaker-tenancy"
    )
    assert role["rules"] == [
        {
            "apiGroups": ["lb.teapot.io"],
            "resources": ["tenants", "tenantloadbalancers"],
            "verbs": ["list", "watch"],
        }
    ]
    binding = next(
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding"
        and o["metadata"]["name"] == "teapot-lb-speaker-tenancy"
    )
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "teapot-lb-speaker", "namespace": "teapot-lb-system"}
    ]
