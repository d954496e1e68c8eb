"""`teapot-lb speaker` in kube mode, as a process in two node namespaces, with a TokenRequest
token of its own ServiceAccount and the DaemonSet's arguments, reaching the real apiserver
through a forwarder on the node's 127.0.0.1:6443; the controller assigns the IP; BIRD is
the router. What the router learns, what the speaker writes back (its announcement
annotation, its Events), and that its roles grant exactly what it uses."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from model.builders import bgp_advertisement, peer, pool
from needs import require_binary, require_root
from teapot_lb.lab.kubeplane import ControlPlane, Forwarder, forward_into
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import NODES, ROUTER_LAN, ROUTER_LAN6, Lab, node
from teapot_lb.netlab import Topology
from teapot_lb.speaker.report import annotation_key

from .rbac import granted, table, used
from .release import Release, unique, wait_until
from .test_controller import events_of, ips, pools, svc

SPEAKERS = ("n1", "n2")
REPEATED_EVENT = {("", "events", "patch")}
"""The Event recorder counts an Event seen again (the same reason and message on the same
object) with a patch: the controller's test exercises it; the speaker repeats an Event only
when an announcement comes back unchanged after a withdrawal."""

SPEAKER_ROLES = (("ClusterRole", "teapot-lb-speaker"), ("Role", "teapot-lb-speaker"))


class Cluster:
    def __init__(self, release: Release, lab: Lab, bird: Bird) -> None:
        self.release, self.lab, self.bird = release, lab, bird
        self.forwarders: list[Forwarder] = []

    def hops(self, ip: str) -> frozenset[str]:
        return fib_next_hops(self.lab.router, f"{ip}/32") or frozenset()


@pytest.fixture(scope="module")
def cluster(installed: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_root()
    require_binary("bird", "birdc")
    workdir = tmp_path_factory.mktemp("realapi-speaker")
    release = Release(installed, unique("spk"), workdir).install()
    topo = Topology("rspk")
    forwarders: list[Forwarder] = []
    bird: Bird | None = None
    try:
        lab = Lab(topo, workdir)
        for name in SPEAKERS:
            doc = node(name)
            installed.kubectl("apply", "-f", "-", input=json.dumps(doc))
            status = json.dumps({"status": doc["status"]})
            installed.kubectl(
                "patch", "node", name, "--subresource=status", "--type=merge", "-p", status
            )
        release.apply(
            *pools(
                release,
                pool("public", "203.0.113.0/28"),
                peer("router", ROUTER_LAN, holdTime="9s"),
                bgp_advertisement("public", "public"),
            )
        )
        bird = Bird(
            lab.router, workdir / "bird", asn=64500, router_id=ROUTER_LAN,
            neighbors=[Neighbor(address=NODES[n], asn=64512, hold_time=9) for n in SPEAKERS],
            fib=True, local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )  # fmt: skip
        bird.start()
        release.controller("alpha")
        for name in SPEAKERS:
            forwarder = forward_into(installed, lab.nodes[name].ns)
            forwarders.append(forwarder)
            release.speaker(name, lab.nodes[name], forwarder.server)
        cluster = Cluster(release, lab, bird)
        cluster.forwarders = forwarders
        yield cluster
    finally:
        release.close()
        for forwarder in forwarders:
            forwarder.stop()
        if bird is not None:
            bird.stop()
        topo.close()
        for name in SPEAKERS:
            installed.kubectl("delete", "node", name, "--ignore-not-found")


def test_the_router_learns_the_assigned_ip_from_both_speakers_and_they_report_it(
    cluster: Cluster,
) -> None:
    rel = cluster.release
    rel.apply(svc(rel, "web"))
    wait_until(lambda: ips(rel, "web"), "web assigned", daemons=rel.daemons)
    (ip,) = ips(rel, "web")
    wait_until(
        lambda: cluster.hops(ip) == {NODES[n] for n in SPEAKERS},
        f"{ip} via {', '.join(SPEAKERS)} at the router",
        daemons=rel.daemons,
    )

    def annotations() -> dict[str, str]:
        found = rel.get("service", "web")["metadata"].get("annotations") or {}
        return {k: v for k, v in found.items() if k in {annotation_key(n) for n in SPEAKERS}}

    want = {annotation_key(n): f"bgp {ip} to router" for n in SPEAKERS}
    wait_until(lambda: annotations() == want, "one announcement annotation per node")
    wait_until(
        lambda: (
            {e["source"].get("host") for e in events_of(rel, "web", "NodeAnnouncing")}
            >= set(SPEAKERS)
        ),
        "a NodeAnnouncing Event from each node",
    )


def test_a_deleted_service_is_withdrawn_from_the_router(cluster: Cluster) -> None:
    rel = cluster.release
    rel.apply(svc(rel, "gone"))
    wait_until(lambda: ips(rel, "gone"), "gone assigned", daemons=rel.daemons)
    (ip,) = ips(rel, "gone")
    wait_until(lambda: cluster.hops(ip), f"{ip} at the router", daemons=rel.daemons)
    rel.plane.kubectl("delete", "service", "gone", "-n", rel.namespace)
    wait_until(lambda: not cluster.hops(ip), f"{ip} withdrawn", daemons=rel.daemons)


def test_the_speaker_is_granted_what_it_uses_and_nothing_more(cluster: Cluster) -> None:
    """After the tests above (the module's order): lists, watches, its annotation patches
    and Events."""
    rel = cluster.release
    made = used(rel.requests_of("speaker"))
    grants = granted(rel.objects, *SPEAKER_ROLES)
    assert made, "the speakers made no request"
    assert not rel.denied("speaker")
    print("speaker uses:\n" + table(made))
    assert made <= grants, f"used but not granted: {sorted(made - grants)}"
    unused = grants - made - REPEATED_EVENT
    assert not unused, f"granted but never used: {sorted(unused)}"
