"""`teapot-lb ovn` in a cluster: informers on the (fake) API server, the Lease, the NB."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

from fakeapi.fixtures import fake_api, fake_api_options
from ovn.builders import POOL, endpoints, ovn, web
from ovn.test_nbdb import rows
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.lab.ovnstack import OVNDatabases
from teapot_lb.lab.wait import wait_for_async

__all__ = ["fake_api", "fake_api_options"]


def lease_holder(fake_api: FakeApiServer) -> str | None:
    lease = fake_api.get("leases", "teapot-lb-ovn", "lb-system")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity") or ""


async def test_the_elected_writer_programs_the_clusters_services_and_releases_on_sigterm(
    fake_api: FakeApiServer, nb: OVNDatabases, owner: str, tmp_path: Path
) -> None:
    for ns in ("default", "lb-system"):
        if fake_api.get("namespaces", ns) is None:
            fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for doc in (POOL, ovn(), web("203.0.113.1"), endpoints("web", ("198.51.100.2", "n1", True))):
        fake_api.seed(doc)
    log = tmp_path / "ovn.log"
    with socket.socket() as probe:  # a free port for the metrics
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "teapot_lb.cli.ovn", "--ovn-nb", nb.nb_remote,
            "--kubeconfig", str(fake_api.kubeconfig_path), "--config-namespace", "lb-system",
            "--cluster-name", owner, "--metrics-address", f"127.0.0.1:{port}",
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        await wait_for_async(lambda: rows(nb, owner), within=30, what="the Service's row")
        assert list(rows(nb, owner).values()) == ["203.0.113.1:80=198.51.100.2:8080"]
        assert lease_holder(fake_api), "the writer holds the Lease teapot-lb-ovn"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as ready:
                assert ready.status == 200
            async with asyncio.timeout(10):
                while True:  # the writer confirms the rows on its next look: soon after
                    async with http.get(f"http://127.0.0.1:{port}/metrics") as metrics:
                        text = await metrics.text()
                    if "teapot_lb_ovn_pending 0.0" in text:
                        break
                    await asyncio.sleep(0.05)
        assert "teapot_lb_ovn_load_balancers 1.0" in text
        fake_api.delete("services", "web", "default")
        await wait_for_async(lambda: not rows(nb, owner), within=30, what="the row deleted")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 15)
    assert code == 0, log.read_text()
    assert lease_holder(fake_api) == "", "a graceful stop releases the Lease"
