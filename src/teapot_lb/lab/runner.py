"""`teapot-lb lab`: build the lab, run every mode's scenarios, report, clean up.

Everything the lab creates (namespaces, processes, its work directory) is removed on
the way out: normal end, failure, Ctrl-C, SIGTERM or SIGHUP. A lab that was killed
with SIGKILL leaves namespaces behind; ``teapot-lb lab --cleanup`` removes them.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from teapot_lb.lab.alerts import METRICS_PORT, LabAlerts
from teapot_lb.lab.client import Client
from teapot_lb.lab.gateway import run_gateway
from teapot_lb.lab.manifests import (
    DEFAULT_GROUPS,
    FAMILIES,
    MODES,
    LabConfigError,
    copy_manifests,
    layout,
    node_doc,
    read_dir,
    write_docs,
)
from teapot_lb.lab.network import LabNetwork
from teapot_lb.lab.ovn import run_ovn
from teapot_lb.lab.relay import run_relay
from teapot_lb.lab.report import Cleanup, LabReport, ModeResult
from teapot_lb.lab.router import FRR_DIR
from teapot_lb.lab.scenarios import LabState, ModeScenario, Sizes
from teapot_lb.lab.teapot import TeapotResult, run_teapot
from teapot_lb.lab.teapot_octavia import OpenStack, run_octavia
from teapot_lb.lab.teapot_route import run_teapot_route
from teapot_lb.lab.wait import LabTimeout, wait_for
from teapot_lb.netlab import NetlabError, Topology, netns_available

Progress = Callable[[str], None]
REPO_EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "lab"
_NETNS_DIR = Path("/run/netns")


@dataclass
class LabOptions:
    modes: tuple[str, ...] = (
        DEFAULT_GROUPS  # announcement modes (MODES), "teapot", "ovn", "gateway"
    )
    families: tuple[str, ...] = FAMILIES
    nodes: int | None = None  # None: the manifests' Nodes (3 generated when there are none)
    router: str = "bird"
    manifests: Path = REPO_EXAMPLES
    sizes: Sizes = field(default_factory=Sizes)
    poll_interval: float | None = None  # None: `teapot-lb run`'s own default
    keep: bool = False
    workdir: Path | None = None
    prometheus: bool = False  # a real Prometheus scrapes the nodes; the report lists alerts
    # The octavia group's OpenStack stack when one runs already (the test suite's); None:
    # the group starts its own.
    openstack: OpenStack | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "modes": list(self.modes),
            "families": list(self.families),
            "nodes": self.nodes,
            "router": self.router,
            "manifests": str(self.manifests),
            "services": self.sizes.services,
            "requests": self.sizes.requests,
            "trials": self.sizes.trials,
            "poll_interval_s": self.poll_interval,
            "probe_interval_s": 0.01,
            "connect_timeout_s": 0.2,
            "prometheus": self.prometheus,
        }


def missing_programs(options: LabOptions) -> list[str]:
    """Programs this run needs that are not installed."""
    need = ["ip"]
    if "bgp" in options.modes:
        need += ["bird", "birdc"] if options.router == "bird" else ["vtysh"]
    if "vip" in options.modes:
        need.append("keepalived")
    if options.prometheus:
        need.append("prometheus")
    path = "/usr/sbin:/sbin:/usr/bin:/bin"
    missing = [p for p in need if shutil.which(p) is None and shutil.which(p, path=path) is None]
    if "bgp" in options.modes and options.router == "frr":
        missing += [str(FRR_DIR / d) for d in ("zebra", "bgpd") if not (FRR_DIR / d).exists()]
    return missing


class _Stop(BaseException):
    """SIGTERM / SIGHUP: unwind like Ctrl-C so the finally blocks clean up."""


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    def raise_stop(signum: int, _frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, raise_stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """While cleaning up, a second Ctrl-C must not leave half the lab behind."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_lab(options: LabOptions, progress: Progress) -> LabReport:
    """Run the lab; always returns a report (check ``report.ok``)."""
    started = time.monotonic()
    report = LabReport(options=options.describe())
    groups = [g for g in ("teapot", "ovn", "gateway", "relay", "octavia") if g in options.modes]
    for group in groups:
        try:
            with _signals_unwind():
                if group == "teapot":
                    report.teapot, route = _teapot(options, progress)
                    report.modes.append(route)
                elif group == "gateway":
                    work = options.workdir / "gateway" if options.workdir is not None else None
                    report.gateway = run_gateway(progress, work)
                elif group == "relay":
                    work = options.workdir / "relay" if options.workdir is not None else None
                    report.relay = run_relay(progress, work)
                elif group == "octavia":
                    work = options.workdir / "octavia" if options.workdir is not None else None
                    report.octavia = run_octavia(progress, work, options.openstack)
                else:
                    work = options.workdir / "ovn" if options.workdir is not None else None
                    report.ovn = run_ovn(progress, work)
        except (KeyboardInterrupt, _Stop) as exc:
            report.interrupted = True
            progress(f"lab: interrupted ({type(exc).__name__} {exc})")
            break
    if groups and (report.interrupted or not any(m in MODES for m in options.modes)):
        report.duration_s = time.monotonic() - started
        return report
    announce = tuple(m for m in options.modes if m in MODES)
    reason = netns_available()
    missing = missing_programs(options)
    if reason or missing:
        report.errors.append(reason or f"not installed: {', '.join(missing)} (scripts/setup.sh)")
        return report
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="teapot-lab-"))
    workdir.mkdir(parents=True, exist_ok=True)
    manifests = workdir / "manifests"
    topology: Topology | None = None
    client: Client | None = None
    try:
        with _signals_unwind():
            try:
                src = options.manifests
                if not src.exists():
                    raise LabConfigError(f"{src}: no such manifest directory")
                has_nodes = bool(read_dir(src).view().nodes)
                generate = options.nodes is not None or not has_nodes
                copy_manifests(src, manifests, drop_nodes=generate)
                lay = layout(read_dir(manifests), nodes=options.nodes)
                if generate:
                    write_docs(manifests / "000-lab-nodes.yaml", [node_doc(n) for n in lay.nodes])
                report.options["nodes"] = len(lay.nodes)
                report.options["node_names"] = [n.name for n in lay.nodes]
                if lay.bgp is not None:
                    report.options["bgp_hold_time_s"] = lay.bgp.hold_time
                    if lay.bgp.bfd is not None:
                        report.options["bgp_bfd_detection_s"] = lay.bgp.bfd.detection_s
                progress(
                    f"lab: {len(lay.nodes)} nodes, router {options.router}, modes"
                    f" {','.join(options.modes)}, families {','.join(options.families)},"
                    f" manifests {src} (work dir {workdir})"
                )
                topology = Topology("lab")
                net = LabNetwork(
                    topology, lay, workdir, manifests,
                    router=options.router, modes=announce,
                    poll_interval=options.poll_interval,
                )  # fmt: skip
                net.build()
                progress(f"lab: namespaces up ({topology.tag}-*)")
                if "bgp" in options.modes and lay.bgp is not None:
                    net.start_router()
                    progress(f"lab: {options.router} running in the router namespace")
                if options.prometheus:
                    net.metrics_port = METRICS_PORT
                for name in net.nodes:
                    net.start_speaker(name)
                _wait_ready(net, options.modes, progress)
                alerts = None
                if options.prometheus:
                    alerts = LabAlerts(net, workdir / "prometheus")
                    alerts.start()
                    progress("lab: Prometheus scrapes every node (the speaker's alert rules)")
                client = Client(net.client.ns)
                state = LabState(manifests)
                for mode in announce:
                    for family in options.families:
                        scenario = ModeScenario(
                            mode, family, net, client, state, options.sizes, progress
                        )
                        if alerts is not None:
                            scenario.hold_down = alerts.hold_until_fired
                        mode_started = time.time()
                        result = scenario.run()
                        if alerts is not None:
                            alerts.judge(result, mode_started)
                            scenario.say(
                                f"alerts fired: {', '.join(result.alerts or ()) or 'none'}"
                            )
                        report.modes.append(result)
                        for name in net.nodes:
                            if not net.speaker_alive(name):
                                result.errors.append(
                                    f"teapot-lb run on {name} died:\n{net.log_tail(name)}"
                                )
                                net.start_speaker(name)
                if alerts is not None:
                    progress("lab: waiting for every alert to stop firing")
                    report.alerts_firing_after = alerts.quiet()
            except (LabConfigError, LabTimeout, NetlabError) as exc:
                report.errors.append(str(exc))
                progress(f"lab: FAILED: {exc}")
            except (KeyboardInterrupt, _Stop) as exc:
                report.interrupted = True
                progress(f"lab: interrupted ({type(exc).__name__} {exc}); cleaning up")
            except Exception as exc:
                report.errors.append(f"{type(exc).__name__}: {exc}")
                progress(f"lab: crashed:\n{traceback.format_exc()}")
    finally:
        with _signals_ignored():
            if client is not None:
                client.close()
            report.cleanup = _clean_up(topology, workdir, options, _quiet_on_error(progress))
    report.duration_s = time.monotonic() - started
    return report


def _teapot(options: LabOptions, progress: Progress) -> tuple[TeapotResult, ModeResult]:
    """The Teapot group: the standalone manager and agent as processes on directories (no
    namespaces), then route mode with a router and traffic (namespaces: root)."""
    workdir = (options.workdir or Path(tempfile.mkdtemp(prefix="teapot-lab-"))) / "teapot"
    try:
        result = run_teapot(workdir, progress)
        needs = LabOptions(modes=("bgp",), router=options.router)  # a router, namespaces
        missing = missing_programs(needs)
        skip = netns_available() or (f"not installed: {', '.join(missing)}" if missing else None)
        route = run_teapot_route(workdir / "route", progress, options.router, skip=skip)
        result.not_done = route.skipped or ""
        return result, route
    finally:
        if options.workdir is None and not options.keep:
            shutil.rmtree(workdir.parent, ignore_errors=True)


def _quiet_on_error(progress: Progress) -> Progress:
    """Cleanup goes on when reporting progress fails (the reader of the output is gone)."""

    def report(text: str) -> None:
        with contextlib.suppress(Exception):
            progress(text)

    return report


def _wait_ready(net: LabNetwork, modes: tuple[str, ...], progress: Progress) -> None:
    names = set(net.nodes)

    def started() -> bool:
        for name in names:
            if not net.speaker_alive(name):
                raise LabTimeout(f"teapot-lb run on {name} exited:\n{net.log_tail(name)}")
        return all(net.status(n).get("generation", 0) >= 1 for n in names)

    wait_for(
        started, timeout=60, what="every node's teapot-lb run to load the manifests", every=0.1
    )
    progress("lab: teapot-lb run is up on every node")
    if "bgp" in modes and net.router_daemon is not None:
        router = net.router_daemon
        peered = net.layout.bgp.nodes if net.layout.bgp else ()
        want = {n.address for n in net.nodes.values() if n.name in peered}
        wait_for(
            lambda: router.established() >= want,
            timeout=60,
            what=f"{router.kind} sessions with every node",
            every=0.2,
        )
        progress(f"lab: {router.kind} has an Established session with every node")
    if "l2" in modes:
        wait_for(
            lambda: all(
                set((net.status(n).get("l2") or {}).get("live_speakers", [])) == names
                for n in names
            ),
            timeout=30,
            what="the L2 speakers to hear each other",
            every=0.1,
        )
        progress("lab: the L2 speakers hear each other")


def _clean_up(
    topology: Topology | None,
    workdir: Path,
    options: LabOptions,
    progress: Progress,
) -> Cleanup:
    if topology is None:
        if options.workdir is None and not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        return Cleanup(ok=True)
    if options.keep:
        names = sorted(h.ns for h in topology.hosts.values())
        progress(
            f"lab: kept for debugging: namespaces {', '.join(names)}; work dir {workdir};"
            " enter one with `ip netns exec NAME bash`, remove all with `teapot-lb lab --cleanup`"
        )
        return Cleanup(ok=True, kept=True)
    processes = [p for h in topology.hosts.values() for p in h.procs]
    namespaces = [h.ns for h in topology.hosts.values()]
    progress("lab: removing namespaces and processes")
    error = ""
    try:
        topology.close()
    except NetlabError as exc:
        error = str(exc)
    left = [ns for ns in namespaces if (_NETNS_DIR / ns).exists()]
    running = sum(1 for p in processes if p.poll() is None)
    if options.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    if error:
        progress(f"lab: cleanup: {error}")
    return Cleanup(ok=not left and not running and not error, leftover_namespaces=left,
                   leftover_processes=running)  # fmt: skip
