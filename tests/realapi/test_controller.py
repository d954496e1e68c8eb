"""`teapot-lb controller` as a process on a real kube-apiserver, with a TokenRequest token of
its own ServiceAccount and the arguments the chart renders: what it writes, how it shares
the work between two replicas, and that the shipped RBAC allows every call it makes."""

from __future__ import annotations

import json
from typing import Any

from model.builders import pool, service
from teapot_lb.controller.options import ANNOTATION_ALLOCATED_FROM
from teapot_lb.lab.kubeplane import Daemon

from .release import Release, in_namespace, wait_until


def svc(rel: Release, name: str, *ports: str, **kw: Any) -> dict[str, Any]:
    """A LoadBalancer Service of this release's class in its namespace."""
    (doc,) = in_namespace(
        rel.namespace, service(name, *ports, loadBalancerClass=rel.load_balancer_class, **kw)
    )
    return doc


def pools(rel: Release, *docs: dict[str, Any]) -> list[dict[str, Any]]:
    return in_namespace(rel.namespace, *docs)


def ips(rel: Release, name: str) -> list[str]:
    done = rel.kubectl("get", "service", name, "-n", rel.namespace, "-o", "json")
    if done.returncode != 0:
        return []
    ingress = json.loads(done.stdout).get("status", {}).get("loadBalancer", {}).get("ingress")
    return [entry["ip"] for entry in ingress or []]


def events_of(rel: Release, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in rel.events(reason) if e["involvedObject"]["name"] == name]


def assigned(rel: Release, daemons: list[Daemon], *names: str) -> None:
    for name in names:
        wait_until(lambda n=name: ips(rel, n), f"{name} assigned", daemons=daemons)  # type: ignore[misc]


def test_a_service_gets_an_ip_the_annotation_an_event_and_the_pool_counts_it(
    release: Release,
) -> None:
    release.apply(*pools(release, pool("blue", "192.0.2.0/28")))
    ctl = release.controller("alpha")
    release.apply(svc(release, "web"))
    assigned(release, [ctl], "web")
    assert ips(release, "web") == ["192.0.2.0"]
    web = release.get("service", "web")
    assert web["metadata"]["annotations"][ANNOTATION_ALLOCATED_FROM] == "blue"
    wait_until(lambda: events_of(release, "web", "IPAllocated"), "the IPAllocated Event")
    wait_until(
        lambda: release.get("addresspool", "blue").get("status", {}).get("assignedIPv4") == 1,
        "the pool's status counts the assignment",
        daemons=[ctl],
    )
    assert not release.denied("controller")


def test_requested_ips_pools_dual_stack_and_a_shared_ip(release: Release) -> None:
    release.apply(
        *pools(
            release,
            pool("v4", "192.0.2.0/28"),
            pool("dual", "198.51.100.0/28", "2001:db8::/124", autoAssign=False),
        )
    )
    ctl = release.controller("alpha")
    both = {"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"]}
    release.apply(
        svc(release, "pinned", ips="192.0.2.9"),
        svc(release, "named", pool="dual"),
        svc(release, "both", pool="dual", **both),
        svc(release, "dns-tcp", "53", ips="192.0.2.5", sharing_key="dns"),
        svc(release, "dns-udp", "53/UDP", ips="192.0.2.5", sharing_key="dns"),
    )
    assigned(release, [ctl], "pinned", "named", "both", "dns-tcp", "dns-udp")
    assert ips(release, "pinned") == ["192.0.2.9"]
    # Created in one apply: which of the two comes first is the informer's order.
    (named,) = ips(release, "named")
    both_v4, both_v6 = ips(release, "both")
    # 2001:db8:: is the Subnet-Router anycast address of its /64: never handed out.
    assert {named, both_v4} == {
        "198.51.100.0",
        "198.51.100.1",
    } and both_v6 == "2001:db8::1"  # not the anycast 2001:db8::
    assert ips(release, "dns-tcp") == ips(release, "dns-udp") == ["192.0.2.5"]
    release.apply(svc(release, "clash", "53", ips="192.0.2.5", sharing_key="dns"))
    wait_until(lambda: events_of(release, "clash", "AllocationFailed"), "the clash refused")
    (event,) = events_of(release, "clash", "AllocationFailed")
    assert event["type"] == "Warning" and "PortConflict" in event["message"]
    assert ips(release, "clash") == []


def test_an_exhausted_pool_says_so_and_a_released_ip_is_reused(release: Release) -> None:
    release.apply(*pools(release, pool("one", "192.0.2.7/32")))
    ctl = release.controller("alpha")
    release.apply(svc(release, "first"))
    assigned(release, [ctl], "first")
    release.apply(svc(release, "second"))
    wait_until(lambda: events_of(release, "second", "AllocationFailed"), "the exhaustion Event")
    (event,) = events_of(release, "second", "AllocationFailed")
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Service"
    release.plane.kubectl("delete", "service", "first", "-n", release.namespace)
    assigned(release, [ctl], "second")
    assert ips(release, "second") == ["192.0.2.7"]
    assert not release.denied("controller")


def test_a_restarted_controller_keeps_every_ip(release: Release) -> None:
    release.apply(*pools(release, pool("blue", "192.0.2.0/27")))
    names = [f"s{i}" for i in range(8)]
    before = release.controller("before")
    release.apply(*(svc(release, n) for n in names))
    assigned(release, [before], *names)
    first = {n: ips(release, n) for n in names}
    before.stop()
    release.plane.kubectl("delete", "service", "s0", "-n", release.namespace)
    after = release.controller("after")
    release.apply(svc(release, "late"))
    assigned(release, [after], "late")
    assert {n: ips(release, n) for n in names[1:]} == {n: first[n] for n in names[1:]}
    assert ips(release, "late") == first["s0"]


def test_the_lease_moves_to_the_other_replica_when_the_leader_dies(release: Release) -> None:
    release.apply(*pools(release, pool("blue", "192.0.2.0/28")))
    replicas = {name: release.controller(name) for name in ("alpha", "beta")}
    lease_name = "teapot-lb-controller"

    def holder() -> str | None:
        done = release.kubectl("get", "lease", lease_name, "-n", release.namespace, "-o", "json")
        if done.returncode != 0:
            return None
        value = json.loads(done.stdout)["spec"].get("holderIdentity")
        return str(value) if value else None

    wait_until(holder, "a leader", daemons=list(replicas.values()))
    leader = holder()
    assert leader in replicas
    release.apply(svc(release, "before"))
    assigned(release, list(replicas.values()), "before")
    replicas[leader].kill()  # no goodbye: the Lease must expire (15 s)
    (survivor,) = set(replicas) - {leader}
    wait_until(
        lambda: holder() == survivor, f"{survivor} holds the Lease", timeout=40,
        daemons=[replicas[survivor]],
    )  # fmt: skip
    release.apply(svc(release, "after"))
    assigned(release, [replicas[survivor]], "after")
    assert ips(release, "after") == ["192.0.2.1"] and ips(release, "before") == ["192.0.2.0"]
    lease = release.get("lease", lease_name)
    assert lease["spec"]["leaseTransitions"] >= 1
    assert not release.denied("controller")


def test_a_requested_ipv6_ip_needs_ipv6_in_ip_families(release: Release) -> None:
    """The apiserver fills spec.ipFamilies with the cluster's primary family (IPv4 here)
    when a Service does not say, so an IPv6 IP asked for by annotation alone is refused,
    with a reason (the fake server defaults the same way)."""
    release.apply(*pools(release, pool("v6", "2001:db8:5::/120")))
    ctl = release.controller("alpha")
    release.apply(
        svc(release, "implicit", ips="2001:db8:5::5"),
        svc(release, "explicit", ips="2001:db8:5::6", ipFamilies=["IPv6"]),
    )
    assigned(release, [ctl], "explicit")
    wait_until(lambda: events_of(release, "implicit", "AllocationFailed"), "implicit refused")
    spec = release.get("service", "implicit")["spec"]
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    (event,) = events_of(release, "implicit", "AllocationFailed")
    assert "FamilyMismatch" in event["message"] and "2001:db8:5::5" in event["message"]
    assert ips(release, "explicit") == ["2001:db8:5::6"]
