"""Control-plane faults: how fast the cluster recovers after the API server comes back.

On a real control plane (etcd, kube-apiserver, kube-controller-manager from
../shared/kube; `teapot_lb.lab.kubelab`): a BIRD router, two nodes running
`teapot-lb speaker` (BGP), one `teapot-lb controller`. Each trial: two Services announced
(`keep`, `gone`); the apiserver is killed and stays down `--outage` seconds (default 15)
while the router's routes are sampled every 50 ms; it is started again and, from the
moment its /readyz answers ok (it answers 429 "storage is (re)initializing" for a while
before that), a new Service is created, `gone` is deleted and node n2 is labelled
excluded (with the project's own client as the admin, one request each, in that order).
Timed from /readyz ok:

- new Service: until the router has a route for its IP (controller assigns, speaker
  announces);
- node exclusion: until `keep`'s route no longer goes through n2;
- delete: until `gone`'s IP has no route.

Last line, JSON: recover_new_service_p50_s, recover_new_service_max_s,
recover_exclusion_p50_s, recover_exclusion_max_s, recover_delete_p50_s,
recover_delete_max_s, withdrawn_during_outage (route samples that lost a next hop while
the apiserver was away, all trials), ips_changed (Services whose IP changed), trials,
outage_s. Needs root, bird, kubectl and ../shared/kube.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from teapot_lb.lab.kubelab import KubeLab, RouteWatch, changed_ips, retrying, running
from teapot_lb.lab.kubeplane import missing
from teapot_lb.lab.wait import wait_for


def trial(lab: KubeLab, n: int, outage_s: float) -> dict[str, float | int]:
    plane = lab.plane
    keep, gone, new = f"keep-{n}", f"gone-{n}", f"new-{n}"
    n2 = lab.node_addresses["n2"]
    for name in (keep, gone):
        lab.create_service(name)

    def announced(name: str) -> bool:
        ip = lab.ips().get(name)
        return ip is not None and lab.next_hops(ip) == lab.all_nodes()

    for name in (keep, gone):
        wait_for(lambda name=name: announced(name), timeout=60, what=f"{name} announced")
    before = lab.ips()
    with RouteWatch(lab, {keep: before[keep], gone: before[gone]}) as watch:
        plane.apiserver.kill()
        time.sleep(outage_s)  # the outage itself
        plane.apiserver.start()
        wait_for(plane.apiserver.ready, timeout=120, what="apiserver /readyz ok", every=0.05)
        ready = time.monotonic()
    retrying(lambda: lab.create_service(new), what="create the new Service")
    retrying(lambda: lab.delete_service(gone), what="delete a Service")
    retrying(lambda: lab.label_excluded("n2", True), what="label n2 excluded")
    done: dict[str, float] = {}

    def progress() -> bool:
        now = time.monotonic() - ready
        if "new" not in done:
            ip = lab.ips().get(new)
            if ip is not None and lab.next_hops(ip):
                done["new"] = now
        if "exclusion" not in done and n2 not in lab.next_hops(before[keep]):
            done["exclusion"] = now
        if "delete" not in done:
            ips = lab.ips()
            old = before[gone]
            # Withdrawn, unless the controller already gave the IP to another Service.
            if gone not in ips and (old in ips.values() or not lab.next_hops(old)):
                done["delete"] = now
        return len(done) == 3

    wait_for(progress, timeout=120, what="recovery", every=0.02)
    after = lab.ips()
    result: dict[str, float | int] = {
        "new_s": done["new"],
        "exclusion_s": done["exclusion"],
        "delete_s": done["delete"],
        "withdrawn": len(watch.withdrawn),
        "samples": watch.samples,
        "ips_changed": len(changed_ips({keep: before[keep]}, after)),
    }
    # Back to the starting state for the next trial.
    retrying(lambda: lab.label_excluded("n2", False), what="unlabel n2")
    for name in (keep, new):
        retrying(lambda name=name: lab.delete_service(name), what="delete")
    wait_for(
        lambda: not any(lab.next_hops(ip) for ip in (before[keep], after.get(new, before[keep]))),
        timeout=60,
        what="clean slate",
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--outage", type=float, default=15.0, help="seconds the apiserver is down")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    reason = missing()
    if reason:
        sys.exit(f"cannot run: {reason}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="teapot-faults-"))
    results = []
    with running(workdir, tag="fbench") as lab:
        for n in range(args.trials):
            r = trial(lab, n, args.outage)
            results.append(r)
            print(
                f"trial {n}: new Service {r['new_s']:.2f} s, exclusion "
                f"{r['exclusion_s']:.2f} s, delete {r['delete_s']:.2f} s, withdrawn "
                f"{r['withdrawn']} of {r['samples']} samples, IPs changed "
                f"{r['ips_changed']}",
                flush=True,
            )

    def figures(key: str) -> tuple[float, float]:
        values = [float(r[key]) for r in results]
        return round(statistics.median(values), 3), round(max(values), 3)

    new_p50, new_max = figures("new_s")
    excl_p50, excl_max = figures("exclusion_s")
    del_p50, del_max = figures("delete_s")
    print(f"work dir (logs): {workdir}")
    print(
        json.dumps(
            {
                "recover_new_service_p50_s": new_p50,
                "recover_new_service_max_s": new_max,
                "recover_exclusion_p50_s": excl_p50,
                "recover_exclusion_max_s": excl_max,
                "recover_delete_p50_s": del_p50,
                "recover_delete_max_s": del_max,
                "withdrawn_during_outage": sum(int(r["withdrawn"]) for r in results),
                "ips_changed": sum(int(r["ips_changed"]) for r in results),
                "trials": len(results),
                "outage_s": args.outage,
            }
        )
    )


if __name__ == "__main__":
    main()
