"""A watch that expires for real: a plane of its own without the watch cache (watches are
served by etcd), the controller cut off from it while a Service is deleted and etcd is
compacted past the deletion. Back on line, its watch resumes from a version that is gone
(410), it lists again, and the deletion is not lost: the waiting Service gets the IP."""

from __future__ import annotations

from pathlib import Path

from model.builders import pool
from needs import require_kube, require_root
from teapot_lb.lab.kubeplane import ControlPlane, forward_into
from teapot_lb.netlab import Topology

from .release import Release, install_shipped, unique, wait_until
from .test_controller import assigned, events_of, ips, pools, svc


def test_a_deletion_behind_a_compaction_is_seen_after_the_relist(tmp_path: Path) -> None:
    require_kube()
    require_root()
    with ControlPlane(tmp_path / "plane", apiserver_args=["--watch-cache=false"]) as plane:
        install_shipped(plane)
        release = Release(plane, unique("expiry"), tmp_path).install()
        topo = Topology("rwx")
        forwarder = None
        try:
            host = topo.add_host("ctl")
            forwarder = forward_into(plane, host.ns)
            release.apply(*pools(release, pool("one", "192.0.2.7/32")))
            ctl = release.controller("alpha", host=host, server=forwarder.server)
            release.apply(svc(release, "first"))
            assigned(release, [ctl], "first")
            release.apply(svc(release, "second"))
            wait_until(
                lambda: events_of(release, "second", "AllocationFailed"),
                "second waits (the pool is full)",
                daemons=[ctl],
            )
            forwarder.set_mode("refuse")  # the controller's connections reset, new ones refused
            plane.kubectl("delete", "service", "first", "-n", release.namespace)
            for i in range(3):  # history moves on past the deletion
                plane.kubectl("create", "configmap", f"churn{i}", "-n", release.namespace)
            plane.etcd.compact()
            forwarder.set_mode("pass")
            assigned(release, [ctl], "second")
            assert ips(release, "second") == ["192.0.2.7"]
            # After a failed request the informer lists again rather than resuming (so that
            # it is "synced" only once a fresh list is in): a resumed watch that met the
            # compaction (410) or a request refused while cut off both end in a re-list.
            relisted = [
                line
                for line in ctl.lines()
                if line.get("event") in ("watch expired, re-listing", "re-listed")
            ]
            assert relisted, "the controller did not list again after the outage"
        finally:
            release.close()
            if forwarder is not None:
                forwarder.stop()
            topo.close()
