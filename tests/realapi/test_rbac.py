"""Least privilege, measured: the controller runs a day's work with its ServiceAccount's
token, the apiserver's audit log says what it called, and the shipped roles grant exactly
that (no request refused, no permission never used). docs/install.md has the table."""

from __future__ import annotations

from model.builders import pool

from .rbac import granted, table, used
from .release import Release, wait_until
from .test_controller import assigned, events_of, ips, pools, svc

CONFLICT_ONLY = {("", "services", "get"), ("", "services/status", "update")}
"""Used only after a 409 Conflict on a Service's status patch (kube_writer re-reads and
PUTs): granted, and proven by tests/controller/test_deploy.py with an injected conflict."""

CONTROLLER_ROLES = (
    ("ClusterRole", "teapot-lb-controller"),
    ("Role", "teapot-lb-controller"),
    ("Role", "teapot-lb-controller-leader"),
)


def test_the_controller_is_granted_what_it_uses_and_nothing_more(release: Release) -> None:
    release.apply(*pools(release, pool("blue", "192.0.2.0/31"), pool("typo", "192.0.2.300/32")))
    ctl = release.controller("alpha")
    release.apply(svc(release, "a"), svc(release, "b"), svc(release, "c"))
    assigned(release, [ctl], "a", "b")
    wait_until(lambda: events_of(release, "c", "AllocationFailed"), "c refused", daemons=[ctl])
    # The same refusal again: the Event's count goes up (a patch, not a new Event).
    release.plane.kubectl("label", "service", "c", "-n", release.namespace, "again=1")
    wait_until(
        lambda: any(e.get("count", 1) > 1 for e in events_of(release, "c", "AllocationFailed")),
        "the repeated refusal counted",
        daemons=[ctl],
    )
    release.plane.kubectl(
        "patch", "service", "a", "-n", release.namespace, "-p", '{"spec":{"type":"ClusterIP"}}'
    )
    assigned(release, [ctl], "c")
    wait_until(lambda: events_of(release, "a", "IPReleased"), "a released", daemons=[ctl])
    wait_until(
        lambda: release.get("addresspool", "typo").get("status", {}).get("conditions"),
        "the invalid pool's condition",
        daemons=[ctl],
    )
    ctl.stop()  # SIGTERM: the leader gives its Lease up
    assert ips(release, "c")

    made = used(release.requests_of("controller"))
    grants = granted(release.objects, *CONTROLLER_ROLES)
    assert not release.denied("controller")
    print("controller uses:\n" + table(made))
    assert made <= grants, f"used but not granted: {sorted(made - grants)}"
    unused = grants - made - CONFLICT_ONLY
    assert not unused, f"granted but never used: {sorted(unused)}"
