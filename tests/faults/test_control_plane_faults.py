"""Control-plane faults on a real control plane: etcd, kube-apiserver and
kube-controller-manager (../shared/kube), `teapot-lb speaker` in two node namespaces
announcing by BGP to a BIRD router, `teapot-lb controller` assigning IPs.

For each fault: while the control plane is away no route is withdrawn at the router and
no IP changes; Services created, changed and deleted meanwhile converge after it.
One control plane and one network for the whole module; each test uses its own Services.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from needs import require_binary, require_kube, require_root
from teapot_lb.lab.kubelab import KubeLab, RouteWatch, changed_ips, retrying, running
from teapot_lb.lab.wait import wait_for

# Convergence after the control plane is back: the goal is seconds; generous for a
# loaded 2-core machine.
CONVERGE_S = 30.0
OUTAGE_S = 5.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeLab]:
    require_root()
    require_kube()
    require_binary("bird", "birdc", "kubectl")
    workdir = tmp_path_factory.mktemp("faults")
    # Watches served from etcd: a compaction expires them at once (410), as a watch
    # cache that fell behind does.
    with running(workdir, tag="flt", apiserver_args=("--watch-cache=false",)) as cluster:
        yield cluster


def names(prefix: str, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:5]
    return [f"{prefix}-{tag}-{i}" for i in range(n)]


def announced(lab: KubeLab, service: str) -> Callable[[], bool]:
    def check() -> bool:
        ip = lab.ips().get(service)
        return ip is not None and lab.next_hops(ip) == lab.all_nodes()

    return check


def deleted(lab: KubeLab, service: str, ip: str) -> Callable[[], bool]:
    """The Service is gone and its IP is withdrawn, unless another Service holds it now
    (the controller hands out the lowest free IP)."""

    def check() -> bool:
        ips = lab.ips()
        return service not in ips and (ip in ips.values() or not lab.next_hops(ip))

    return check


def fault_round(
    lab: KubeLab, prefix: str, fault: Callable[[], None], heal: Callable[[], None]
) -> None:
    """Services before; the fault; changes while it lasts; heal; check convergence."""
    keep, gone = names(prefix, 2)
    for name in (keep, gone):
        lab.create_service(name)
    for name in (keep, gone):
        wait_for(announced(lab, name), timeout=CONVERGE_S, what=f"{name} announced")
    before = lab.ips()
    (new,) = names(prefix + "-new", 1)
    # `keep` is left alone: its route must never lose a next hop. (`gone` is deleted on
    # purpose while the fault lasts or right after it.)
    with RouteWatch(lab, {keep: before[keep]}) as watch:
        fault()
        # Changes while the control plane is away (they land once it is back for the
        # parts that need it).
        heal_then = _changes(lab, gone, new)
        heal()
        heal_then()
        wait_for(announced(lab, new), timeout=CONVERGE_S, what=f"{new} announced after")
        wait_for(deleted(lab, gone, before[gone]), timeout=CONVERGE_S, what=f"{gone} withdrawn")
    assert not watch.withdrawn, f"routes withdrawn while away: {watch.withdrawn[:5]}"
    assert watch.samples > 0
    after = lab.ips()
    assert not changed_ips({keep: before[keep]}, after), (before, after)
    assert lab.next_hops(before[keep]) == lab.all_nodes()


def _changes(lab: KubeLab, gone: str, new: str) -> Callable[[], None]:
    """Create `new` and delete `gone` (in that order, so `new` does not simply take
    `gone`'s IP), now if the API answers, else once it does again."""
    try:
        lab.create_service(new)
        lab.delete_service(gone)
        return lambda: None
    except RuntimeError:

        def later() -> None:
            retrying(lambda: lab.create_service(new), what="create after the fault")
            lab.delete_service(gone)

        return later


def test_apiserver_killed_and_restarted(lab: KubeLab) -> None:
    plane = lab.plane
    fault_round(
        lab,
        "api",
        fault=plane.apiserver.kill,
        heal=lambda: (_sleep(OUTAGE_S), plane.apiserver.start(), plane.apiserver.wait_ready()),
    )


def test_etcd_killed_and_restarted(lab: KubeLab) -> None:
    plane = lab.plane
    fault_round(
        lab,
        "etcd",
        fault=plane.etcd.kill,
        heal=lambda: (
            _sleep(OUTAGE_S),
            plane.etcd.start(),
            plane.etcd.wait_ready(),
            plane.apiserver.wait_ready(),
        ),
    )


def test_watches_expired_by_compaction(lab: KubeLab) -> None:
    """The nodes stop hearing from the apiserver (their connections stall) while Services
    change; etcd's history is compacted; then every watch breaks and resumes at once from
    its old resourceVersion: 410 Gone, and the informers re-list without waiting."""
    plane = lab.plane
    forwarders = list(lab.forwarders.values())
    logs = [lab.workdir / f"speaker-{name}.log" for name in lab.nodes]
    expired_before = sum(_count(log, "watch expired, re-listing") for log in logs)

    def stall() -> None:
        for f in forwarders:
            f.set_mode("blackhole")

    def compact_and_resume() -> None:
        plane.etcd.compact()
        for f in forwarders:
            f.set_mode("reset")

    fault_round(lab, "gone", fault=stall, heal=compact_and_resume)
    expired = sum(_count(log, "watch expired, re-listing") for log in logs)
    assert expired > expired_before, "no watch got 410 Gone"
    for f in forwarders:
        f.set_mode("pass")


def _count(path: Path, text: str) -> int:
    return path.read_text(errors="replace").count(text) if path.exists() else 0


def test_a_speaker_cut_off_from_the_apiserver_while_bgp_stays_up(lab: KubeLab) -> None:
    forwarder = lab.forwarders["n1"]
    fault_round(
        lab,
        "cut",
        fault=lambda: forwarder.set_mode("blackhole"),
        heal=lambda: (
            _sleep(OUTAGE_S),
            forwarder.set_mode("refuse"),
            _sleep(0.5),
            forwarder.set_mode("pass"),
        ),
    )


def test_a_slow_apiserver(lab: KubeLab) -> None:
    forwarders = list(lab.forwarders.values())

    def slow() -> None:
        for f in forwarders:
            f.set_mode("delay=300")

    def heal() -> None:
        _sleep(OUTAGE_S)
        for f in forwarders:
            f.set_mode("pass")

    fault_round(lab, "slow", fault=slow, heal=heal)


def _sleep(seconds: float) -> None:
    """The outage itself (not a wait for a condition)."""
    time.sleep(seconds)
