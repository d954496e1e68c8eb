"""What issue 38's test stack costs: the real Neutron and Octavia with ovn-octavia-provider
on a real OVN (src/teapot_lb/lab/octavia_ovn.py), as root.

- start: seconds each part takes to start (Keystone from nothing to answering; Neutron's
  schema, then its API answering; Octavia's API and driver agent once its schema is made),
  and the RSS of every process once a load balancer has been made;
- lb: load balancer (VIP on a Neutron subnet) + TCP listener + pool + one member, each
  call made once the previous one is ACTIVE → ACTIVE with the Northbound's Load_Balancer
  row holding the VIP and the member, `--runs` times;
- delete: cascade delete → gone from Octavia and no Load_Balancer row.

Polled every 10 ms (the polling is the benchmark's).

    .venv/bin/python bench/octavia_ovn_stack.py [--runs 5]

Last line, JSON: start_s (by part), rss_mb (by process), lb_active_p50_s, lb_active_max_s,
delete_p50_s, delete_max_s, runs, load_before and load_after (1-minute load average).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller_scale import percentile

ROOT = Path(__file__).resolve().parent.parent
from teapot_lb.lab.neutron_server import NOAUTH_PROJECT  # noqa: E402
from teapot_lb.lab.octavia_ovn import PROVIDER, OctaviaOVN, missing, running  # noqa: E402
from teapot_lb.lab.octavia_stack import active, connection  # noqa: E402
from teapot_lb.lab.ovnstack import OVNStack  # noqa: E402
from teapot_lb.lab.ovnstack import missing as ovn_missing  # noqa: E402
from teapot_lb.lab.wait import wait_for  # noqa: E402
from teapot_lb.netlab import Topology, netns_available  # noqa: E402

WITHIN = 60.0
EVERY = 0.01
MEMBER = "198.51.100.21"


def row(stack: OctaviaOVN, name: str, column: str) -> str:
    """A column of the Load_Balancer row named `name` ("" when there is none)."""
    found = stack.neutron.ovn.nbctl(
        "--bare", f"--columns={column}", "find", "load_balancer", f"name={name}"
    )
    return found.strip()


def one_run(stack: OctaviaOVN, conn: Any, subnet: str, i: int) -> tuple[float, float]:
    lbs = conn.load_balancer
    started = time.monotonic()
    lb = lbs.create_load_balancer(name=f"b{i}", vip_subnet_id=subnet, provider=PROVIDER,
                                  project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN, every=EVERY)
    listener = lbs.create_listener(loadbalancer_id=lb.id, protocol="TCP", protocol_port=80,
                                   project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN, every=EVERY)
    pool = lbs.create_pool(listener_id=listener.id, protocol="TCP",
                           lb_algorithm="SOURCE_IP_PORT", project_id=NOAUTH_PROJECT)  # fmt: skip
    active(conn, lb.id, within=WITHIN, every=EVERY)
    lbs.create_member(pool.id, address=MEMBER, protocol_port=8080, subnet_id=subnet,
                      project_id=NOAUTH_PROJECT)  # fmt: skip
    lb = active(conn, lb.id, within=WITHIN, every=EVERY)
    wait_for(lambda: f"{MEMBER}:8080" in row(stack, lb.id, "vips"), timeout=WITHIN, every=EVERY,
             what="the member in the Load_Balancer row")  # fmt: skip
    created = time.monotonic() - started
    started = time.monotonic()
    lbs.delete_load_balancer(lb.id, cascade=True)
    wait_for(lambda: lbs.find_load_balancer(lb.id) is None and not row(stack, lb.id, "_uuid"),
             timeout=WITHIN, every=EVERY, what="the load balancer and its row gone")  # fmt: skip
    return created, time.monotonic() - started


def arguments(doc: str) -> argparse.Namespace | None:
    """--runs and --workdir; None (after printing the skip as JSON) when this machine
    cannot run the stack."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the logs there (default: a temp dir)")
    args = parser.parse_args()
    reason = netns_available() or ovn_missing() or missing()
    if reason:
        print(json.dumps({"skipped": reason}))
        return None
    return args


@contextlib.contextmanager
def stack_up(
    workdir: Path | None, name: str
) -> Iterator[tuple[OVNStack, OctaviaOVN, dict[str, float], Path]]:
    """OVN, then Keystone + Neutron + Octavia on it (in `workdir`, else a temp dir): the
    OVN, the stack, the seconds each part took to start and the work directory."""
    with (
        tempfile.TemporaryDirectory(prefix=f"tlb-{name}-bench-") as tmp,
        Topology(name) as topo,
    ):
        work = workdir or Path(tmp)
        ovn = OVNStack(work / "ovn", topo)
        try:
            started = time.monotonic()
            ovn.start()
            start_s = {"ovn": time.monotonic() - started}
            with running(work / "openstack", ovn) as stack:
                start_s.update(stack.startup_s)
                yield ovn, stack, start_s, work
        finally:
            ovn.close()


def main() -> None:
    args = arguments(__doc__)
    if args is None:
        return
    load = os.getloadavg()[0]
    with stack_up(args.workdir, "octovnb") as (_, stack, start_s, _):
        net = stack.neutron.create("network", name="bench")
        subnet = stack.neutron.create("subnet", name="bench", network_id=net["id"],
                                      cidr="198.51.100.0/24", ip_version=4,
                                      enable_dhcp=False)  # fmt: skip
        conn = connection(stack.stack)
        runs = [one_run(stack, conn, subnet["id"], i) for i in range(args.runs)]
        rss = stack.rss_mb()
    created = [c for c, _ in runs]
    deleted = [d for _, d in runs]
    print(f"{'part':<28} start s")
    for part, seconds in start_s.items():
        print(f"{part:<28} {seconds:7.2f}")
    print(f"{'process':<28} RSS MB")
    for name, mb in rss.items():
        print(f"{name:<28} {mb:7.1f}")
    print(f"lb+listener+pool+member → ACTIVE and in the Northbound: p50 "
          f"{percentile(created, 0.5):.3f} s, max {max(created):.3f} s; cascade delete → "
          f"gone: p50 {percentile(deleted, 0.5):.3f} s, max {max(deleted):.3f} s")  # fmt: skip
    print(json.dumps({
        "start_s": {k: round(v, 2) for k, v in start_s.items()},
        "rss_mb": rss,
        "rss_total_mb": round(sum(rss.values()), 1),
        "lb_active_p50_s": round(percentile(created, 0.5), 3),
        "lb_active_max_s": round(max(created), 3),
        "delete_p50_s": round(percentile(deleted, 0.5), 3),
        "delete_max_s": round(max(deleted), 3),
        "runs": args.runs,
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
