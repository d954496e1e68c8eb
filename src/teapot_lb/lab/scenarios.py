"""One mode and address family: create Services, reach them, spread, fail over, delete.

Every wait polls a condition against a deadline. Failover trials run a client probe
every 10 ms (each request a new TCP connection with a 0.2 s connect timeout) around
the failure and measure with :func:`teapot_lb.lab.measure.outage`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from teapot_lb.lab.client import Client, Probe
from teapot_lb.lab.manifests import (
    LAB_NAMESPACE,
    SERVICE_PORT,
    announced_view,
    assigned_ips,
    bgp_announcers,
    family_of,
    host_prefix,
    mode_of_ip,
    read_dir,
    service_doc,
    with_services,
    write_docs,
)
from teapot_lb.lab.measure import (
    Attempt,
    failure_reasons,
    first_success,
    outage,
    settled,
    spread,
)
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.report import Deletion, Failover, ModeResult, ServiceResult, Spread, Trial
from teapot_lb.lab.router import fib_next_hops
from teapot_lb.lab.timeline import timeline
from teapot_lb.lab.wait import LabTimeout, wait_for

Progress = Callable[[str], None]
PROBE_INTERVAL_S = 0.01
SETTLE_S = 0.5


@dataclass
class Sizes:
    services: int = 5
    requests: int = 30
    trials: int = 3


@dataclass
class LabState:
    """What the lab wrote into the manifest directory, shared by the modes."""

    manifests: Path
    docs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # "mode-family" -> Services

    def file(self, key: str) -> Path:
        return self.manifests / f"zz-lab-services-{key}.yaml"

    def all_docs(self) -> list[dict[str, Any]]:
        return [d for docs in self.docs.values() for d in docs]


class ModeScenario:
    def __init__(
        self,
        mode: str,
        family: str,
        net: LabNetwork,
        client: Client,
        state: LabState,
        sizes: Sizes,
        progress: Progress,
    ) -> None:
        self.mode = mode
        self.family = family
        self.key = f"{mode}-{family}"
        self.net = net
        self.client = client
        self.state = state
        self.sizes = sizes
        self.progress = progress
        self.result = ModeResult(mode, family)
        # Called with a hard-killed node before it is revived (the lab's alerts wait
        # there for the alerts the kill must fire); None: revive at once.
        self.hold_down: Callable[[str], None] | None = None

    def say(self, text: str) -> None:
        self.progress(f"{self.mode:<3} {self.family} {text}")

    # -- the whole mode

    def run(self) -> ModeResult:
        if not self.net.layout.pools.get(self.mode):
            self.result.errors.append(f"no AddressPool is announced in {self.mode} mode")
            return self.result
        pools = self.net.layout.pools_of(self.mode, self.family)
        if not pools:
            # The manifests announce this mode for the other family only: nothing to run.
            self.result.skipped = (
                f"no AddressPool with IP{self.family} addresses is announced in {self.mode} mode"
            )
            self.say(f"skipped: {self.result.skipped}")
            return self.result
        if self.mode == "bgp" and self.family == "v6":
            problem = self.net.layout.missing_ipv6_next_hop()
            if problem is not None:
                self.result.errors.append(problem)
                self.say(f"FAILED: {problem}")
                return self.result
        steps: list[Callable[[], None]] = [
            self.check_manifest_services,
            lambda: self.create_services(pools[0]),
            self.measure_spread,
            self.fail_over,
            self.delete_one,
        ]
        for step in steps:
            try:
                step()
            except (LabTimeout, ScenarioError) as exc:
                self.result.errors.append(str(exc))
                self.say(f"FAILED: {exc}")
                break
        return self.result

    # -- steps

    def check_manifest_services(self) -> None:
        snap = read_dir(self.net.manifests)
        view = snap.view()
        ips = assigned_ips(view, snap)
        for key, addrs in sorted(ips.items()):
            if key.startswith(f"{LAB_NAMESPACE}/"):
                continue
            for ip in addrs:
                if family_of(ip) != self.family:
                    continue
                if mode_of_ip(view, ip, self.net.layout.pools) != self.mode:
                    continue
                self.net.bind(ip)
                ok = self._reach(ip, timeout=20)
                self.result.services.append(ServiceResult(key, ip, False, None, ok))
                self.say(f"{key} {ip} {'reachable' if ok else 'NOT reachable'}")

    def create_services(self, pool: str) -> None:
        docs = self.state.docs.setdefault(self.key, [])
        self.say(f"creating {self.sizes.services} Services in pool {pool}")
        known: dict[str, str] = {}
        # Zero-padded, so that names sort in creation order: standalone assignment goes
        # in name order, and a newcomer sorting first would move the others' IPs.
        width = len(str(self.sizes.services))
        for i in range(1, self.sizes.services + 1):
            name = f"{self.key}-{i:0{width}d}"
            key = f"{LAB_NAMESPACE}/{name}"
            docs.append(service_doc(name, pool, self.family))
            ip = self._ip_of(key, known)
            known[key] = ip
            self.net.bind(ip)  # kube-proxy: every node accepts the IP before we announce it
            probe = self.client.probe([(ip, SERVICE_PORT)], PROBE_INTERVAL_S)
            t0 = time.monotonic()
            try:
                write_docs(self.state.file(self.key), docs)
                wait_for(
                    partial(_served_since, probe, t0),
                    timeout=15,
                    what=f"the client to reach {key} at {ip}",
                )
            except LabTimeout:
                self.result.services.append(ServiceResult(key, ip, True, None, False))
                raise
            finally:
                attempts = probe.stop()
            took = first_success(attempts, t0)
            self.result.services.append(ServiceResult(key, ip, True, took, took is not None))
            self.say(f"{key} {ip} created → reachable in {_ms(took)}")

    def _ip_of(self, key: str, known: dict[str, str]) -> str:
        snap = read_dir(self.net.manifests)
        ips = assigned_ips(with_services(snap, self.state.all_docs()), snap)
        for other, ip in known.items():
            if ips.get(other, [None])[0] != ip:
                raise ScenarioError(f"{other} moved from {ip} to {ips.get(other)}")
        got = ips.get(key) or []
        if not got:
            raise ScenarioError(f"{key} got no IP (pool exhausted or refused)")
        return got[0]

    @property
    def lab_ips(self) -> list[str]:
        return [s.ip for s in self.result.services if s.created_by_lab]

    def measure_spread(self) -> None:
        ip = self.lab_ips[0]
        if self.mode == "bgp":
            self._wait_all_hops(ip)
        attempts = self.client.burst(ip, SERVICE_PORT, self.sizes.requests)
        by_node = spread(attempts)
        failed = by_node.get("(failed)", 0)
        serving = [n for n in by_node if n != "(failed)"]
        if self.mode == "bgp":
            n_nodes = len(self.bgp_announcers(ip))
            want = n_nodes if self.sizes.requests >= 10 * n_nodes else min(2, n_nodes)
            ok = failed == 0 and len(serving) >= want
        else:
            ok = failed == 0 and len(serving) == 1
        self.result.spread = Spread(ip, self.sizes.requests, by_node, ok)
        shown = " ".join(f"{n}:{c}" for n, c in by_node.items())
        self.say(f"{self.sizes.requests} requests to {ip}: {shown}{'' if ok else '  FAILED'}")

    def fail_over(self) -> None:
        ip = self.lab_ips[0]
        if self.mode == "bgp":
            graceful = Failover("graceful")
            self.result.failovers.append(graceful)
            for i in range(self.sizes.trials):
                graceful.trials.append(self._bgp_trial(ip, self._victim(i), hard=False))
        hard = Failover("hard")
        self.result.failovers.append(hard)
        for i in range(self.sizes.trials):
            if self.mode == "bgp":
                hard.trials.append(self._bgp_trial(ip, self._victim(i), hard=True))
            else:
                hard.trials.append(self._owner_trial(ip))

    def delete_one(self) -> None:
        docs = self.state.docs[self.key]
        doc = docs.pop()
        name = f"{LAB_NAMESPACE}/{doc['metadata']['name']}"
        svc = next(s for s in self.result.services if s.name == name)
        ip = svc.ip
        t0 = time.monotonic()
        write_docs(self.state.file(self.key), docs)
        withdrawn: float | None = None
        try:
            if self.mode == "bgp":
                wait_for(
                    lambda: not fib_next_hops(self.net.router, host_prefix(ip)),
                    timeout=15,
                    what=f"the router to drop its route to {ip}",
                )
                withdrawn = time.monotonic() - t0
            else:
                seen: list[float] = []

                def silent() -> bool:
                    asked = time.monotonic()
                    if self.net.neighbor_answered(ip):
                        return False
                    seen.append(asked)
                    return True

                wait_for(silent, timeout=15, what=f"nobody to answer ARP/NDP for {ip}")
                withdrawn = seen[0] - t0
        except LabTimeout as exc:
            self.result.errors.append(str(exc))
        self.net.unbind(ip)  # kube-proxy drops the IP with the Service
        unreachable = all(not self.client.get(ip, SERVICE_PORT).ok for _ in range(3))
        self.result.deletion = Deletion(name, ip, withdrawn, unreachable)
        verdict = "unreachable" if unreachable else "STILL REACHABLE"
        self.say(f"deleted {name} {ip}: withdrawn after {_ms(withdrawn)}, {verdict}")

    # -- failover trials

    def _victim(self, trial: int) -> str:
        names = sorted(self.bgp_announcers(self.lab_ips[0]))
        if len(names) < 2:
            raise ScenarioError(
                f"{len(names)} node(s) announce {self.lab_ips[0]}: need 2 to fail over"
            )
        return names[trial % len(names)]

    def bgp_announcers(self, ip: str) -> list[str]:
        """The nodes that announce ``ip`` over BGP, by the same plan the nodes compute."""
        view = announced_view(read_dir(self.net.manifests), self.state.all_docs())
        prefix, nodes = bgp_announcers(view, ip)
        if prefix is None or not nodes:
            raise ScenarioError(f"no node plans to announce {ip} over BGP (see teapot-lb explain)")
        if prefix != host_prefix(ip):
            raise ScenarioError(f"{ip} is announced as {prefix}: the lab needs host routes")
        return sorted(nodes)

    def owners(self, ip: str) -> list[str]:
        """Nodes holding ``ip``: L2, whose status says they answer ARP for it; VIP, whose
        eth0 carries it (keepalived's master puts it there)."""
        out = []
        for name in sorted(self.net.nodes):
            if not self.net.speaker_alive(name):
                continue
            if self.mode == "vip":
                held = self.net.interface_addresses(name, "eth0")
            else:
                held = (self.net.status(name).get("l2") or {}).get("owned", [])
            if ip in held:
                out.append(name)
        return out

    def _baseline(self, ip: str, *, single_owner: bool = False) -> Probe:
        """A running probe once the client has been served steadily for a moment (with
        ``single_owner``: by the one node whose status says it holds the IP)."""
        probe = self.client.probe([(ip, SERVICE_PORT)], PROBE_INTERVAL_S)
        since = time.monotonic()

        def healthy() -> bool:
            recent = [a for a in probe.snapshot() if a.start >= since][-20:]
            if len(recent) < 20 or not all(a.ok for a in recent):
                return False
            if single_owner:
                served = sorted({a.node for a in recent if a.node is not None})
                return len(served) == 1 and self.owners(ip) == served
            return True

        try:
            wait_for(healthy, timeout=20, what=f"the client to be served steadily by {ip}")
        except LabTimeout:
            probe.stop()
            raise
        return probe

    def _bgp_trial(self, ip: str, victim: str, *, hard: bool) -> Trial:
        probe = self._baseline(ip)
        address = self.net.address_of(victim, self.family)
        bad: Callable[[Attempt], bool]
        if hard:
            bad = _failed
            self._wait_bfd_up(victim)
            t0 = self.net.crash(victim)
            limit = (self.net.layout.bgp.hold_time if self.net.layout.bgp else 90) + 15
        else:

            def bad(a: Attempt) -> bool:
                return not a.ok or a.node == victim

            t0 = time.monotonic()
            self.net.terminate_speaker(victim)
            limit = 15
        gone: list[float] = []

        def done() -> bool:
            if not gone and address not in fib_next_hops(self.net.router, host_prefix(ip)):
                gone.append(time.monotonic())
            return bool(gone) and settled(probe.snapshot(), t0, bad=bad, settle=SETTLE_S)

        try:
            # Each check runs `ip route`: poll finely only where milliseconds matter.
            every = 0.02 if hard else 0.005
            what = f"the client to be served without {victim}"
            wait_for(done, timeout=limit, what=what, every=every)
        finally:
            attempts = probe.stop()
        o = outage(attempts, t0, bad=bad, settle=SETTLE_S)
        withdrawn = gone[0] - t0
        kind = "hard kill" if hard else "SIGTERM"
        self.say(
            f"{kind} {victim}: router dropped it after {_ms(withdrawn)}, client served without"
            f" it after {_ms(o.recovered_after)} ({o.failed} of {o.total} requests failed)"
        )
        probe = self.client.probe([(ip, SERVICE_PORT)], PROBE_INTERVAL_S)
        try:
            if hard:
                if self.hold_down is not None:
                    self.hold_down(victim)
                self.net.revive(victim)
            else:
                code = self.net.stop_speaker(victim, signal_it=False)
                if code != 0:
                    self.result.errors.append(
                        f"{victim}: teapot-lb run exited with {code} on SIGTERM"
                    )
                self.net.start_speaker(victim)
            self._wait_all_hops(ip)
        finally:
            back = probe.stop()
        lost = sum(1 for a in back if not a.ok)
        why = failure_reasons(attempts, t0)
        return Trial(
            victim, o.recovered_after, o.failed, o.total, withdrawn, lost, why,
            timeline(attempts, t0),
        )  # fmt: skip

    def _owner_trial(self, ip: str) -> Trial:
        probe = self._baseline(ip, single_owner=True)
        owner = self.owners(ip)[0]
        t0 = self.net.crash(owner)
        try:
            wait_for(
                lambda: settled(probe.snapshot(), t0, settle=SETTLE_S),
                timeout=20,
                what=f"another node to serve {ip} after {owner} died",
            )
        finally:
            attempts = probe.stop()
        o = outage(attempts, t0, settle=SETTLE_S)
        after = {a.node for a in attempts if a.start > t0 + (o.recovered_after or 0) and a.ok}
        self.say(
            f"hard kill {owner}: served by {', '.join(sorted(n for n in after if n))} after"
            f" {_ms(o.recovered_after)} ({o.failed} of {o.total} requests failed)"
        )
        if self.hold_down is not None:
            self.hold_down(owner)
        # The node comes back (and may take the IP back): count what that costs the client.
        probe = self.client.probe([(ip, SERVICE_PORT)], PROBE_INTERVAL_S)
        try:
            self.net.revive(owner)
            self._wait_node_back(owner)
            wait_for(
                lambda: (
                    len(self.owners(ip)) == 1 and settled(probe.snapshot(), 0.0, settle=SETTLE_S)
                ),
                timeout=20,
                what=f"one node to hold {ip} after {owner} came back",
            )
        finally:
            back = probe.stop()
        lost = sum(1 for a in back if not a.ok)
        holder = self.owners(ip)
        self.say(f"{owner} back; {ip} held by {', '.join(holder)}; {lost} requests failed")
        why = failure_reasons(attempts, t0)
        return Trial(
            owner, o.recovered_after, o.failed, o.total, None, lost, why, timeline(attempts, t0)
        )

    # -- waits

    def _reach(self, ip: str, timeout: float) -> bool:
        try:
            wait_for(
                lambda: self.client.get(ip, SERVICE_PORT).ok,
                timeout=timeout,
                what=f"the client to reach {ip}",
            )
        except LabTimeout:
            return False
        return True

    def _wait_bfd_up(self, name: str) -> None:
        """With BFD, the router's BFD session to ``name`` is Up: BFD starts at one packet a
        second (RFC 5880 §6.8.3), so just after a node's return its BGP session can be
        Established while BFD is not yet Up, and a kill then would cost the hold time."""
        bgp, router = self.net.layout.bgp, self.net.router_daemon
        if bgp is None or bgp.bfd is None or router is None:
            return
        address = self.net.address_of(name, "v4")  # the session's transport
        wait_for(lambda: address in router.bfd_up(), timeout=20, what=f"BFD with {name} Up")

    def _wait_all_hops(self, ip: str) -> None:
        names = self.bgp_announcers(ip)
        want = frozenset(self.net.address_of(n, self.family) for n in names)
        wait_for(
            lambda: fib_next_hops(self.net.router, host_prefix(ip)) == want,
            timeout=30,
            what=f"the router's FIB to hold {host_prefix(ip)} via {', '.join(names)}",
            every=0.05,
        )

    def _wait_node_back(self, name: str) -> None:
        names = set(self.net.nodes)

        def back() -> bool:
            st = self.net.status(name)
            proc = self.net.nodes[name].speaker
            if proc is None or proc.poll() is not None or st.get("pid") != proc.pid:
                return False  # not (yet) the status of the process we started
            if "l2" in self.net.modes:
                l2 = st.get("l2") or {}
                if not l2.get("ready") or set(l2.get("live_speakers", [])) != names:
                    return False
            return True

        wait_for(back, timeout=30, what=f"{name} to be back", every=0.05)


class ScenarioError(RuntimeError):
    """A scenario step could not be carried out."""


def _served_since(probe: Probe, t0: float) -> bool:
    return any(a.ok and a.start >= t0 for a in probe.snapshot())


def _failed(a: Attempt) -> bool:
    return not a.ok


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
