"""The lab's OVN group: `teapot-lb ovn` programs a real OVN, the client goes through it.

A three-chassis OVN (:func:`teapot_lb.lab.ovnstack.ha_gateway_lab`: distributed router
lr0 whose gateway port is on chassis-1, else chassis-2; backends be1, be2 on chassis-3;
the client on the external bridge), and ``teapot-lb ovn --manifests DIR`` run as an
operator would, on a manifest directory the group writes. Steps, in the lab's report
format: create → reachable, spread over the backends, an endpoint removed → only the other
answers, the active gateway chassis killed → served again through the other, Service
deleted → its row gone and no answer.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client
from teapot_lb.lab.groups import run_group
from teapot_lb.lab.manifests import write_docs
from teapot_lb.lab.measure import Attempt
from teapot_lb.lab.ovnstack import (
    HA_ROUTER,
    PODS_SWITCH,
    GatewayLab,
    OVNStack,
    ha_gateway_lab,
    missing,
)
from teapot_lb.lab.processes import log_tail, start_workload
from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.netlab import Topology

Progress = Callable[[str], None]
OWNER = "lab"
VIP = "203.0.113.10"
TIMEOUT_S = 20.0
NS = "teapot-lb-system"
API = "lb.teapot.io/v1alpha1"


@dataclass
class OVNResult:
    ip: str = VIP
    create_to_reachable_s: float | None = None
    spread: dict[str, int] = field(default_factory=dict)
    endpoint_removed_s: float | None = None  # be1 removed → 10 answers in a row from be2
    failover_s: float | None = None  # chassis-1 killed → the client answered again
    failover_failed_requests: int = 0
    delete_to_no_row_s: float | None = None
    # Until the first request of the unanswered run that ended the wait was sent.
    delete_to_unreachable_s: float | None = None
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None
    not_done: str = (
        "BGP announcement of the VIP from the active gateway chassis' node (built; measured "
        "by tests/ovn/test_ovn_bgp_failover.py, not by this group)"
    )

    @property
    def ok(self) -> bool:
        if self.skipped is not None:
            return not self.errors
        return (
            not self.errors
            and self.create_to_reachable_s is not None
            and set(self.spread) == {"be1", "be2"}
            and self.endpoint_removed_s is not None
            and self.failover_s is not None
            and self.delete_to_no_row_s is not None
            and self.delete_to_unreachable_s is not None
        )


def _config() -> list[dict[str, Any]]:
    meta = {"name": "ovn-pool", "namespace": NS}
    adv = {"addressPools": ["ovn-pool"], "gatewayRouters": [{"name": HA_ROUTER}],
           "logicalSwitches": [PODS_SWITCH]}  # fmt: skip
    return [
        {"apiVersion": API, "kind": "AddressPool", "metadata": meta,
         "spec": {"addresses": ["203.0.113.0/24"]}},
        {"apiVersion": API, "kind": "OVNAdvertisement",
         "metadata": {"name": "ovn", "namespace": NS}, "spec": adv},
    ]  # fmt: skip


def _service() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default",
                     "annotations": {"lb.teapot.io/ips": VIP}},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]},
    }  # fmt: skip


def _slice(lab: GatewayLab, *names: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-a", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [lab.backends[n][1]], "conditions": {"ready": True}}
                      for n in names],
    }  # fmt: skip


class OVNGroup:
    def __init__(self, workdir: Path, topology: Topology, progress: Progress) -> None:
        self.workdir = workdir
        self.manifests = workdir / "manifests"
        self.stack = OVNStack(workdir / "ovn", topology, chassis=3)
        self.progress = progress
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "ovn-writer.log"

    def say(self, text: str) -> None:
        self.progress(f"lab: ovn: {text}")

    def _alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise LabTimeout(f"teapot-lb ovn exited:\n{log_tail(self.log)}")

    def _wait(self, check: Callable[[], Any], what: str) -> float:
        started = time.monotonic()

        def alive_check() -> Any:
            self._alive()
            return check()

        wait_for(alive_check, timeout=TIMEOUT_S, every=0.005, what=what,
                 detail=lambda: log_tail(self.log))  # fmt: skip
        return time.monotonic() - started

    def _rows(self) -> str:
        return self.stack.nbctl("--bare", "--columns=name", "find", "load_balancer",
                                f'external_ids:"lb.teapot.io/owner"={OWNER}').strip()  # fmt: skip

    def run(self, result: OVNResult) -> None:
        self.say("starting OVN: 3 chassis (ovs-vswitchd userspace, ovn-controller), northd")
        self.stack.start()
        lab = ha_gateway_lab(self.stack, backends=2)
        for name, (host, _) in lab.backends.items():
            start_workload(host, name, 8080)
        self.manifests.mkdir(parents=True, exist_ok=True)
        write_docs(self.manifests / "config.yaml", _config())
        write_docs(self.manifests / "web-slice.yaml", [_slice(lab, "be1", "be2")])
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "teapot_lb.cli.ovn", "--ovn-nb", self.stack.nb_remote,
                 "--manifests", str(self.manifests), "--cluster-name", OWNER,
                 "--metrics-address", ""],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        # Timed from the Service's write: first the writer must be up (it programs the
        # advertisement's group as soon as it has read the directory).
        self._wait(lambda: f"teapot-lb/{OWNER}/" in self.stack.nbctl("list",
                   "load_balancer_group"), "teapot-lb ovn to program the group")  # fmt: skip
        client = Client(lab.client.ns)
        try:
            self._steps(lab, client, result)
        finally:
            client.close()

    def _steps(self, lab: GatewayLab, client: Client, result: OVNResult) -> None:
        write_docs(self.manifests / "web.yaml", [_service()])
        result.create_to_reachable_s = self._wait(
            lambda: client.get(VIP, 80).node, f"{VIP}:80 reachable through OVN"
        )
        self.say(f"created → reachable in {result.create_to_reachable_s:.3f} s")
        result.spread = dict(Counter(a.node for a in client.burst(VIP, 80, 30) if a.node))
        self.say(f"spread {result.spread}")
        write_docs(self.manifests / "web-slice.yaml", [_slice(lab, "be2")])
        started = time.monotonic()
        answers: list[tuple[float, str | None]] = []

        def only_be2() -> bool:
            answers.append((time.monotonic(), client.get(VIP, 80).node))
            tail = answers[-10:]
            return len(tail) == 10 and all(node == "be2" for _, node in tail)

        self._wait(only_be2, "only be2 answering after be1's endpoint was removed")
        result.endpoint_removed_s = answers[-10][0] - started
        self.say(f"endpoint removed → only be2 answers after {result.endpoint_removed_s:.3f} s")
        self._failover(lab, client, result)
        self._delete(client, result)

    def _failover(self, lab: GatewayLab, client: Client, result: OVNResult) -> None:
        """Kill the active gateway chassis under a 10 ms probe; time until it answers again."""
        probe = client.probe([(VIP, 80)], interval=0.01)
        self._wait(lambda: any(a.ok for a in probe.snapshot()), "the probe answered")
        killed = time.monotonic()
        self.stack.stop_chassis("chassis-1")

        def served_again() -> bool:
            answered = any(a.ok and a.start > killed for a in probe.snapshot())
            return answered and lab.active_gateway() == "chassis-2"

        self._wait(served_again, "served again through chassis-2")
        after = [a for a in probe.stop() if a.start > killed]
        result.failover_s = next(a.end for a in after if a.ok) - killed
        result.failover_failed_requests = sum(1 for a in after if not a.ok)
        self.say(f"chassis-1 killed → served through chassis-2 after {result.failover_s:.3f} s")

    def _delete(self, client: Client, result: OVNResult) -> None:
        (self.manifests / "web.yaml").unlink()
        started = time.monotonic()
        self._wait(lambda: not self._rows(), "the row deleted")
        result.delete_to_no_row_s = time.monotonic() - started
        attempts: list[Attempt] = []

        def unanswered() -> bool:
            attempts.append(client.get(VIP, 80))
            return len(attempts) >= 3 and all(a.node is None for a in attempts[-3:])

        self._wait(unanswered, f"{VIP}:80 unreachable after the Service's deletion")
        answered = [i for i, a in enumerate(attempts) if a.node is not None]
        first_failed = attempts[answered[-1] + 1 if answered else 0]
        result.delete_to_unreachable_s = first_failed.start - started
        self.say(f"deleted → row gone in {result.delete_to_no_row_s:.3f} s")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.stack.close()


def run_ovn(progress: Progress, workdir: Path | None = None) -> OVNResult:
    """Run the group (root, OVN installed); failures are in ``result.errors``."""
    result = OVNResult()

    def make(work: Path, topology: Topology) -> OVNGroup:
        return OVNGroup(work, topology, progress)

    run_group("ovn", result, make, progress, workdir, missing())
    return result


def ovn_lines(r: OVNResult) -> list[str]:
    """The group in the lab's text report."""
    if r.skipped is not None:
        return [f"ovn: skipped: {r.skipped}"]

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f} s"

    spread = ", ".join(f"{k} {v}" for k, v in sorted(r.spread.items())) or "-"
    lines = [
        f"ovn: {'ok' if r.ok else 'FAILED'}; Service default/web {r.ip} on router {HA_ROUTER}"
        " (gateway port on chassis-1, else chassis-2)",
        f"  create → reachable {s(r.create_to_reachable_s)}; spread over backends: {spread}",
        f"  endpoint be1 removed → only be2 answers {s(r.endpoint_removed_s)}",
        f"  chassis-1 killed → served through chassis-2 {s(r.failover_s)}"
        f" ({r.failover_failed_requests} requests failed meanwhile)",
        f"  Service deleted → row gone {s(r.delete_to_no_row_s)}; "
        f"→ unreachable {s(r.delete_to_unreachable_s)}",
        f"  not measured: {r.not_done}",
    ]
    return lines + [f"ovn: {err}" for err in r.errors]


__all__ = ["OVNResult", "ovn_lines", "run_ovn"]
