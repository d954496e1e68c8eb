"""The OVN writer against a real Northbound ovsdb-server (no northd, no root needed).

One ovsdb-server for the module (conftest.py: `nb`); each test uses its own owner name (a
cluster), so the tests see only their own rows, as two clusters sharing one Northbound
would.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from needs import require_binary
from ovn.builders import POOL, endpoints, ovn, view, web
from teapot_lb.lab.ovnstack import NB_SCHEMA, OVNDatabases
from teapot_lb.lab.wait import wait_for
from teapot_lb.ovn.desired import desired_state
from teapot_lb.ovn.nbdb import Connection, NorthboundError
from teapot_lb.ovn.writer import NorthboundLoop


def hold(loop: NorthboundLoop, owner: str, *documents: dict[str, Any]) -> None:
    """Hand the loop the state the documents want and wait until the NB holds it."""
    generation = loop.want(desired_state(view(*documents), owner).state)
    wait_for(
        lambda: loop.stats.applied >= generation,
        timeout=20,
        what="the Northbound holding the desired state",
        detail=lambda: repr(loop.stats),
    )


@contextmanager
def writing(nb: OVNDatabases, owner: str) -> Iterator[NorthboundLoop]:
    """A writer loop for `owner` on the module's Northbound, stopped afterwards."""
    loop = NorthboundLoop(Connection(nb.nb_remote), owner)
    loop.start()
    try:
        yield loop
    finally:
        loop.stop()


def rows(nb: OVNDatabases, owner: str) -> dict[str, str]:
    """Our Load_Balancer rows: name → vips, as ovn-nbctl reads them."""
    out = nb.nbctl(
        "--format=csv", "--data=bare", "--no-headings", "--columns=name,vips",
        "find", "load_balancer", f'external_ids:"lb.teapot.io/owner"="{owner}"',
    )  # fmt: skip
    found = {}
    for line in out.splitlines():
        name, _, vips = line.partition(",")
        found[name] = vips.strip('"')
    return found


SERVICE = (POOL, ovn(), web("203.0.113.1"), endpoints("web", ("198.51.100.2", "n1", True)))


def test_a_service_becomes_a_load_balancer_in_a_group_on_the_router_and_switch(
    nb: OVNDatabases, owner: str
) -> None:
    with writing(nb, owner) as loop:
        hold(loop, owner, *SERVICE)
        name = f"teapot-lb/{owner}/default/web/203.0.113.1/tcp"
        assert rows(nb, owner) == {name: "203.0.113.1:80=198.51.100.2:8080"}
        group = f"teapot-lb/{owner}/lb-system/ovn"
        group_uuid = nb.nbctl("--bare", "--columns=_uuid", "find", "load_balancer_group",
                              f"name={group}").strip()  # fmt: skip
        for table, target in (("logical_router", "gr0"), ("logical_switch", "ls0")):
            refs = nb.nbctl("get", table, target, "load_balancer_group")
            assert group_uuid in refs


def test_a_deleted_service_leaves_no_row_and_no_group_reference(
    nb: OVNDatabases, owner: str
) -> None:
    with writing(nb, owner) as loop:
        hold(loop, owner, *SERVICE)
        hold(loop, owner, POOL)  # the Service and the advertisement are gone
        assert rows(nb, owner) == {}
        assert f"teapot-lb/{owner}/" not in nb.nbctl("list", "load_balancer_group")


def test_a_foreign_load_balancer_and_its_attachment_survive_our_reconciles(
    nb: OVNDatabases, owner: str
) -> None:
    foreign = f"foreign-{owner}"
    nb.nbctl("lb-add", foreign, "203.0.113.99:80", "198.51.100.99:80", "tcp")
    nb.nbctl("lr-lb-add", "gr0", foreign)
    with writing(nb, owner) as loop:
        hold(loop, owner, *SERVICE)
        hold(loop, owner, POOL)
        assert "203.0.113.99:80" in nb.nbctl("get", "load_balancer", foreign, "vips")
        foreign_uuid = nb.nbctl("--bare", "--columns=_uuid", "find", "load_balancer",
                                f"name={foreign}").strip()  # fmt: skip
        assert foreign_uuid in nb.nbctl("get", "logical_router", "gr0", "load_balancer")


def test_a_restarted_writer_finding_its_rows_in_place_writes_nothing(
    nb: OVNDatabases, owner: str
) -> None:
    with writing(nb, owner) as first:
        hold(first, owner, *SERVICE)
    with writing(nb, owner) as second:
        hold(second, owner, *SERVICE)
        assert second.stats.transactions == 0
        assert second.stats.operations == 0


def test_a_row_someone_deletes_is_put_back_without_being_asked(
    nb: OVNDatabases, owner: str
) -> None:
    with writing(nb, owner) as loop:
        hold(loop, owner, *SERVICE)
        name = f"teapot-lb/{owner}/default/web/203.0.113.1/tcp"
        nb.nbctl("lb-del", name)
        wait_for(lambda: name in rows(nb, owner), timeout=20, what="the row put back")


def test_a_lost_connection_converges_without_rewriting(nb: OVNDatabases, owner: str) -> None:
    with writing(nb, owner) as loop:
        hold(loop, owner, *SERVICE)
        before = loop.stats.transactions
        nb.stop_daemon("nb")
        nb.start_database("nb", Path("/usr/share/ovn/ovn-nb.ovsschema"), nb.nb_socket)
        # A change made while we were away is picked up once the connection is back.
        hold(loop, owner, POOL, ovn(), web("203.0.113.1"),
             endpoints("web", ("198.51.100.3", "n2", True)))  # fmt: skip
        assert loop.stats.transactions == before + 1
        assert list(rows(nb, owner).values()) == ["203.0.113.1:80=198.51.100.3:8080"]


def test_an_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    loop = NorthboundLoop(Connection(f"unix:{tmp_path / 'none.sock'}"), "x")
    with pytest.raises(NorthboundError, match=r"none\.sock"):
        loop.start()


def test_a_remote_that_is_not_an_ovsdb_address_is_refused() -> None:
    with pytest.raises(ValueError, match="unix:PATH"):
        Connection("http://nb:6641")


def test_the_ovn_command_programs_a_manifest_directory_and_stops_on_sigterm(
    nb: OVNDatabases, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    docs = [*SERVICE[:3], endpoints("web", ("198.51.100.2", "n1", True))]
    docs[2] = web()  # no status: the standalone core assigns the IP, as `teapot-lb run` does
    (manifests / "all.yaml").write_text(yaml.safe_dump_all(docs))
    log = (tmp_path / "ovn.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "teapot_lb.cli.ovn", "--ovn-nb", nb.nb_remote,
         "--manifests", str(manifests), "--cluster-name", "cli", "--metrics-address", ""],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(
            lambda: rows(nb, "cli"),
            timeout=30,
            what="the command's row",
            detail=lambda: (tmp_path / "ovn.log").read_text(),
        )
        ((name, vips),) = rows(nb, "cli").items()
        assert name.startswith("teapot-lb/cli/default/web/203.0.113.")
        assert vips.endswith(":80=198.51.100.2:8080")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        log.close()


def test_an_ssl_remote_with_certificates_is_programmed_like_a_unix_socket(
    nb: OVNDatabases, owner: str, tmp_path: Path
) -> None:
    require_binary("openssl")
    pki = certificates(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A second server on the module's database file would clash: a database of its own.
    db = tmp_path / "nb.db"
    subprocess.run(["ovsdb-tool", "create", str(db), str(NB_SCHEMA)], check=True)
    server = shutil.which("ovsdb-server", path="/usr/sbin:/usr/bin") or "ovsdb-server"
    nb.spawn(f"nb-ssl-{owner}", [
        server, str(db), f"--remote=pssl:{port}:127.0.0.1",
        f"--private-key={pki['server.key']}", f"--certificate={pki['server.pem']}",
        f"--ca-cert={pki['ca.pem']}", f"--unixctl={tmp_path / 'ssl.ctl'}",
    ])  # fmt: skip
    connection = Connection(
        f"ssl:127.0.0.1:{port}", pki["client.key"], pki["client.pem"], pki["ca.pem"]
    )
    wait_for(lambda: _listening(port), timeout=10, what="the SSL server listening")
    loop = NorthboundLoop(connection, owner)
    loop.start()
    try:
        generation = loop.want(desired_state(view(POOL, web("203.0.113.1")), owner).state)
        wait_for(lambda: loop.stats.applied >= generation, timeout=20, what="synced over SSL")
    finally:
        loop.stop()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def certificates(directory: Path) -> dict[str, Path]:
    """A CA and a server and a client certificate it signed (openssl, one day)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *ec, "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "1", "-subj", "/CN=test-ca")  # fmt: skip
    for name in ("server", "client"):
        openssl("req", *ec, "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", f"/CN={name}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "1")  # fmt: skip
    return {p.name: p for p in directory.iterdir()}


def test_a_health_check_someone_edits_is_set_back(nb: OVNDatabases, owner: str) -> None:
    checked = ovn(healthCheck={"sourceIP": "198.51.100.254", "interval": 2})
    docs = (POOL, checked, web("203.0.113.1"), endpoints("web", ("198.51.100.2", "n1", True)))
    with writing(nb, owner) as loop:
        hold(loop, owner, *docs)
        name = f"teapot-lb/{owner}/default/web/203.0.113.1/tcp"

        def check() -> str:
            return nb.nbctl("get", "load_balancer", name, "health_check").strip("[]\n")

        nb.nbctl("set", "load_balancer_health_check", check(), "options:interval=99")

        def interval() -> str:  # the row we own may be replaced by a new one: look it up
            return nb.nbctl("get", "load_balancer_health_check", check(), "options:interval")

        wait_for(lambda: interval().strip().strip('"') == "2", timeout=20,
                 what="the interval set back", detail=interval)  # fmt: skip


def test_a_router_created_after_us_is_attached_when_it_appears(
    nb: OVNDatabases, owner: str
) -> None:
    late = f"late-{owner}"[:60]
    adv = ovn(gatewayRouters=[{"name": late}])
    with writing(nb, owner) as loop:
        hold(loop, owner, POOL, adv, web("203.0.113.1"))
        assert [t.name for t in loop.stats.missing] == [late]
        nb.nbctl("lr-add", late)
        group = f"teapot-lb/{owner}/lb-system/ovn"

        def attached() -> bool:
            refs = nb.nbctl("get", "logical_router", late, "load_balancer_group")
            uuid = nb.nbctl("--bare", "--columns=_uuid", "find", "load_balancer_group",
                            f"name={group}").strip()  # fmt: skip
            return bool(uuid) and uuid in refs

        wait_for(attached, timeout=20, what=f"our group attached to {late}")
        wait_for(lambda: not loop.stats.missing, timeout=20, what="nothing missing any more")
