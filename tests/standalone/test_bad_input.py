"""Bad input never stops `teapot-lb run` nor disturbs an unrelated Service.

Each case starts the standalone runner in-process (the manifest source, the node speaker
and the status writer, as :func:`teapot_lb.cli.run.run_node` wires them) on a directory
with one working Service, `web`, pinned to 203.0.113.1 and announced by BGP and L2. Then
it adds one bad input and checks that the runner still runs, `web` keeps its IP and its
announcements, and the problem is reported naming the object, the field and why.

No root needed: the BGP speaker is the recording fake of the speaker tests, the L2
responders are stand-ins (the real ones need AF_PACKET), interfaces are listed from a
fixed table, and keepalived is not started (the supervisor records what it was given).
One node only, so no heartbeat leaves the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Network, ip_address
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from speaker.builders import FakeFactory, FakeSpeaker
from teapot_lb.bgp import PeerConfig, State
from teapot_lb.cluster import Store
from teapot_lb.lab.standalone_lab import ours, service, write, write_text
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.membership.core import Timing
from teapot_lb.speaker.bgp_backend import BGPBackend
from teapot_lb.speaker.interfaces import InterfaceInfo
from teapot_lb.speaker.l2_backend import L2Backend
from teapot_lb.speaker.node import NodeSpeaker
from teapot_lb.speaker.vip_backend import VIPBackend
from teapot_lb.standalone.runner import ManifestSource, StatusWriter
from teapot_lb.vrrp.render import Rendered

GOOD_IP = "203.0.113.1"
ROUTER = "192.0.2.1"
INTERFACES = {
    "eth0": InterfaceInfo(
        "eth0",
        2,
        b"\x02\x00\x00\x00\x00\x01",
        None,
        (IPv4Network("192.0.2.0/24"), IPv4Network("203.0.113.0/24")),
    ),
}


def node1() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.11"}]},
    }


def base() -> list[dict[str, Any]]:
    return [
        node1(),
        ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
        ours("BGPPeer", "router", {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER}),
        ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
        ours("L2Advertisement", "public", {"addressPools": ["public"]}),
    ]


# --- stand-ins -------------------------------------------------------------------------------


class FakeResponder:
    """What L2Backend uses of a Responder, recorded."""

    def __init__(self, info: InterfaceInfo, on_claim: Any = None) -> None:
        self.info = info
        self.owned: set[Any] = set()

    def start(self) -> None: ...

    def acquire(self, ip: Any) -> None:
        self.owned.add(ip)

    def release(self, ip: Any) -> None:
        self.owned.discard(ip)

    def watch(self, ips: Any) -> None: ...

    def defend(self, ip: Any, until: float, every: float) -> None: ...

    def close(self) -> None: ...

    @property
    def counters(self) -> Any:
        return SimpleNamespace()


class UpSpeaker(FakeSpeaker):
    """The recording fake BGP speaker, its sessions established at once."""

    def add_peer(self, config: PeerConfig) -> Any:
        peer = super().add_peer(config)
        peer.state = State.ESTABLISHED
        peer.counters = SimpleNamespace(established=1)
        return peer


class UpFactory(FakeFactory):
    def __call__(self, local_as: int, router_id: Any) -> Any:
        s = UpSpeaker(local_as, router_id)
        self.made.append(s)
        return s


async def list_interfaces() -> dict[str, InterfaceInfo]:
    return dict(INTERFACES)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Runner:
    manifests: Path
    state: Path
    source: ManifestSource
    speaker: NodeSpeaker
    bgp: FakeFactory
    tasks: list[asyncio.Task[None]]
    rendered: list[Rendered] = field(default_factory=list)

    def alive(self) -> bool:
        return all(not t.done() for t in self.tasks)

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def events(self) -> list[dict[str, Any]]:
        path = self.state / "events.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def reported(self) -> str:
        """Everything the runner reports, as one text to search."""
        doc = self.status()
        parts = [*doc.get("problems", []), json.dumps(doc.get("services", {}))]
        parts += [json.dumps(doc.get(k, {})) for k in ("bgp", "l2", "vip")]
        parts += [json.dumps(e) for e in self.events()]
        return "\n".join(parts)

    def good_ok(self) -> bool:
        """`web` keeps its IP and is announced by BGP (route at the fake router) and L2."""
        doc = self.status()
        web = doc.get("services", {}).get("default/web", {})
        if web.get("ips") != [GOOD_IP]:
            return False
        announcing = doc.get("announcing", {})
        if GOOD_IP not in announcing.get("bgp", []) or GOOD_IP not in announcing.get("l2", []):
            return False
        speaker = self.bgp.made[0] if self.bgp.made else None
        routes = speaker.routes.get(ROUTER, {}) if speaker is not None else {}
        if f"{GOOD_IP}/32" not in {str(p) for p in routes}:
            return False
        l2 = self.speaker.l2
        return l2 is not None and ip_address(GOOD_IP) in l2.owned


@contextlib.asynccontextmanager
async def running(tmp_path: Path, state: Path | None = None) -> AsyncIterator[Runner]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    state = state or tmp_path / "state"
    write(manifests / "base.yaml", base())
    write(manifests / "web.yaml", [service("web", GOOD_IP)])
    store = Store()
    factory = UpFactory()
    speaker = NodeSpeaker("n1", store)
    speaker.bgp = BGPBackend(factory)
    speaker.l2 = L2Backend(
        "n1",
        on_change=speaker.notify,
        timing=Timing(interval=0.02),
        port=free_udp_port(),
        list_interfaces=list_interfaces,
        responder=FakeResponder,
    )
    vip = VIPBackend(
        "n1", state / "keepalived", on_change=speaker.notify, list_interfaces=list_interfaces
    )
    rendered: list[Rendered] = []

    async def record(r: Rendered, *, timeout_s: float = 15.0) -> None:
        rendered.append(r)

    async def stop() -> None: ...

    vip.supervisor.apply = record  # type: ignore[method-assign]
    vip.supervisor.stop = stop  # type: ignore[method-assign]
    speaker.vip = vip
    source = ManifestSource(
        manifests, store, state_dir=state, poll_s=0.05, on_change=speaker.notify
    )
    writer = StatusWriter("n1", state, source)
    writer.speaker = speaker
    speaker.reporter = writer
    source.reload_if_changed()
    tasks = [asyncio.create_task(source.run()), asyncio.create_task(speaker.run())]
    speaker.notify()
    runner = Runner(manifests, state, source, speaker, factory, tasks, rendered)
    try:
        await wait_for_async(runner.good_ok, within=15, what="web announced before any bad input")
        yield runner
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await speaker.shutdown()


# --- the cases -------------------------------------------------------------------------------


def add(name: str, *docs: dict[str, Any]) -> Callable[[Runner], Awaitable[None]]:
    async def go(r: Runner) -> None:
        write(r.manifests / name, docs)

    return go


def add_text(name: str, text: str) -> Callable[[Runner], Awaitable[None]]:
    async def go(r: Runner) -> None:
        write_text(r.manifests / name, text)

    return go


def vip_setup(vrid: dict[str, int] | None, interface: str | None, n: int) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"addressPools": ["vip"]}
    if vrid is not None:
        spec["vridRange"] = vrid
    if interface is not None:
        spec["interface"] = interface
    return [
        ours("AddressPool", "vip", {"addresses": ["203.0.113.64/28"], "autoAssign": False}),
        ours("VIPAdvertisement", "vip", spec),
        # Local Services: an instance each, so n of them need n VRIDs.
        *[
            service(f"vip{i}", f"203.0.113.{65 + i}", externalTrafficPolicy="Local")
            for i in range(n)
        ],
    ]


def md5_peer(secret: str) -> dict[str, Any]:
    """A BGPPeer (another router) whose MD5 password comes from Secret `secret`."""
    spec = {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.2"}
    return ours("BGPPeer", "secret", {**spec, "passwordSecret": {"name": secret}})


@dataclass(frozen=True)
class Case:
    name: str
    act: Callable[[Runner], Awaitable[None]]
    expect: tuple[str, ...]  # all must appear in what is reported
    # A bad peer that selects this node is one `web` is not announced to: reported on
    # `web` too (as a failure naming that peer), which is right; nothing else may be.
    web_failure: str | None = None
    vip_failed: tuple[str, ...] = ()  # VIPs the VIP backend must name as not run here


CASES = [
    Case(
        "yaml syntax error",
        add_text("broken.yaml", "kind: Service\nmetadata: {name: [unclosed\n"),
        ("broken.yaml", "YAML"),
    ),
    Case(
        "unknown kind of ours",
        add("typo.yaml", ours("AdressPool", "typo", {"addresses": ["203.0.113.32/28"]})),
        ("AdressPool", "typo", "kind", "not a kind"),
    ),
    Case(
        "unknown field",
        add(
            "field.yaml",
            ours("AddressPool", "extra", {"addresses": ["203.0.113.32/28"], "adresses": []}),
        ),
        ("AddressPool", "extra", "adresses"),
    ),
    Case(
        "overlapping pool",
        add("overlap.yaml", ours("AddressPool", "zz-overlap", {"addresses": ["203.0.113.0/30"]})),
        ("AddressPool/lb-system/zz-overlap", "spec.addresses[0]", "overlaps AddressPool 'public'"),
    ),
    Case(
        "bgp peer with an invalid address",
        add(
            "peer.yaml",
            ours("BGPPeer", "bogus", {"myASN": 64512, "peerASN": 64500, "peerAddress": "1.2.3"}),
        ),
        ("BGPPeer", "bogus", "peerAddress"),
    ),
    Case(
        "bfd profile asking for echo mode",
        add("bfd.yaml", ours("BFDProfile", "echo", {"echoMode": True})),
        ("BFDProfile/lb-system/echo", "spec.echoMode", "not implemented"),
    ),
    Case(
        "bgp peer with a duplicate address",
        add(
            "peer.yaml",
            ours("BGPPeer", "twin", {"myASN": 64512, "peerASN": 64501, "peerAddress": ROUTER}),
        ),
        ("BGPPeer/lb-system/twin", "nodeSelectors", "duplicates BGPPeer 'router'"),
    ),
    Case(
        "bgp peer whose passwordSecret is missing",
        add(
            "peer.yaml",
            md5_peer("nope"),
        ),
        # A problem of the BGPPeer (which is then left out): no session, web untouched.
        ("BGPPeer/lb-system/secret", "spec.passwordSecret", "Secret lb-system/nope not found"),
    ),
    Case(
        "bgp peer whose secret has no password key",
        add(
            "peer.yaml",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "md5", "namespace": "lb-system"},
                "stringData": {"pasword": "x"},
            },
            md5_peer("md5"),
        ),
        ("BGPPeer/lb-system/secret", "Secret lb-system/md5 has no key 'password'", "pasword"),
    ),
    Case(
        "l2 advertisement naming a missing interface",
        add(
            "l2.yaml",
            ours("AddressPool", "lan", {"addresses": ["203.0.113.48/28"], "autoAssign": False}),
            ours("L2Advertisement", "lan", {"addressPools": ["lan"], "interfaces": ["nope0"]}),
            service("lan", "203.0.113.49"),
        ),
        ("203.0.113.49", "nope0", "not on this node"),
    ),
    Case(
        "vip advertisement whose vrid range is too small",
        add("vip.yaml", *vip_setup({"start": 10, "end": 10}, "eth0", 3)),
        ("no free virtual router ID in 10-10", "vip/203.0.113.66", "widen vridRange"),
        vip_failed=("203.0.113.66", "203.0.113.67"),
    ),
    Case(
        "vip advertisement naming a missing interface",
        add("vip.yaml", *vip_setup(None, "nope0", 1)),
        ("no interface 'nope0'", "vip/203.0.113.65"),
        vip_failed=("203.0.113.65",),
    ),
    Case(
        "service asking for an ip outside every pool",
        add("out.yaml", service("outside", "198.51.100.77")),
        ("default/outside", "198.51.100.77", "pool"),
    ),
    Case(
        "two services asking for the same ip without a sharing key",
        add("same.yaml", service("zcopy", GOOD_IP)),
        ("default/zcopy", GOOD_IP),
    ),
    Case(
        "malformed ips annotation",
        add("bad-ann.yaml", service("garbled", "203.0.113.300,zz")),
        ("default/garbled", "lb.teapot.io/ips"),
    ),
]


# A newcomer never wins a conflict by sorting first: the older object keeps the IP or the
# range (creation time: the manifest's, or the first time this node saw the object) and a
# pool holding a Service IP keeps its range over one holding none.
CASES += [
    Case(
        "same ip, the newcomer sorting first",
        add("same.yaml", service("aaa-copy", GOOD_IP)),
        ("default/aaa-copy", GOOD_IP, "also requested by Service default/web"),
    ),
    Case(
        "overlapping pool sorting first",
        add(
            "overlap.yaml",
            ours("AddressPool", "aaa-overlap", {"addresses": ["203.0.113.0/30"]}),
        ),
        ("AddressPool/lb-system/aaa-overlap", "203.0.113.0/30", "overlaps AddressPool 'public'"),
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_bad_input_is_reported_and_the_good_service_is_untouched(
    tmp_path: Path, case: Case
) -> None:
    async with running(tmp_path) as r:
        gen = r.status().get("generation", 0)
        await case.act(r)
        await wait_for_async(
            lambda: r.status().get("generation", 0) > gen, within=15, what="the change loaded"
        )

        def reported() -> bool:
            text = r.reported()
            return all(e in text for e in case.expect)

        try:
            await wait_for_async(reported, within=10, what=f"{case.expect} reported")
        except AssertionError:
            raise AssertionError(f"{case.expect} not all in:\n{r.reported()}") from None
        assert r.alive()
        await wait_for_async(r.good_ok, within=8, what="web still announced")
        # The good Service is never refused nor reported as failing.
        web = r.status()["services"]["default/web"]
        assert web["refused"] is None
        allowed = {GOOD_IP: case.web_failure} if case.web_failure else {}
        assert web["failures"] == allowed
        assert r.speaker.stats.step_errors == 0, r.speaker.stats.last_error
        if case.vip_failed:  # the backend says which VIPs fail (for the Services' status)
            assert r.speaker.vip is not None
            assert set(r.speaker.vip.failed) == set(case.vip_failed)


async def test_a_huge_manifest_file_keeps_the_runner_responsive(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        many = [service(f"bulk{i:04d}") for i in range(5000)]
        pool = ours("AddressPool", "bulk", {"addresses": ["2001:db8:1::/112"]})
        gen = r.status().get("generation", 0)
        lag = [0.0]

        async def ticker() -> None:  # how long the event loop goes without a turn
            while True:
                before = time.monotonic()
                await asyncio.sleep(0.01)
                lag[0] = max(lag[0], time.monotonic() - before - 0.01)

        tick = asyncio.create_task(ticker())
        write(
            r.manifests / "bulk.yaml",
            [pool, *[{**s, "spec": {**s["spec"], "ipFamilies": ["IPv6"]}} for s in many]],
        )
        await wait_for_async(
            lambda: r.status().get("generation", 0) > gen, within=60, what="the huge file loaded"
        )
        tick.cancel()
        print(f"longest event-loop stall while loading 5,000 Services: {lag[0]:.3f}s")
        assert lag[0] < 2.0  # generous: heartbeats and keepalives keep going (0.4s here)
        doc = r.status()
        assert len(doc["services"]) == 5001
        assert r.alive()
        await wait_for_async(r.good_ok, within=8, what="web still announced")
        # Still responsive: a small edit after the big one is applied promptly.
        write(r.manifests / "late.yaml", [service("late", "203.0.113.2")])
        await wait_for_async(
            lambda: "203.0.113.2" in r.status().get("announcing", {}).get("bgp", []),
            within=30,
            what="a later edit applied",
        )


async def test_a_deleted_manifest_file_withdraws_only_its_objects(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        write(r.manifests / "other.yaml", [service("other", "203.0.113.3")])
        await wait_for_async(
            lambda: "203.0.113.3" in r.status().get("announcing", {}).get("bgp", []),
            within=15,
            what="other announced",
        )
        (r.manifests / "other.yaml").unlink()
        await wait_for_async(
            lambda: "default/other" not in r.status().get("services", {}),
            within=15,
            what="other withdrawn",
        )
        assert "203.0.113.3" not in r.status().get("announcing", {}).get("bgp", [])
        assert r.alive()
        await wait_for_async(r.good_ok, within=8, what="web still announced")


async def test_a_removed_manifest_directory_keeps_the_last_state_until_it_returns(
    tmp_path: Path,
) -> None:
    async with running(tmp_path) as r:
        gen = r.status().get("generation", 0)
        saved = tmp_path / "saved"
        shutil.copytree(r.manifests, saved)
        shutil.rmtree(r.manifests)

        def missing_reported() -> bool:
            return any(
                str(r.manifests) in p and "does not exist" in p
                for p in r.status().get("problems", [])
            )

        await wait_for_async(missing_reported, within=15, what="the missing directory reported")
        assert r.alive()
        assert r.good_ok()  # a vanished directory is not a reason to withdraw everything
        write(saved / "more.yaml", [service("more", "203.0.113.4")])
        shutil.copytree(saved, r.manifests)
        await wait_for_async(
            lambda: "203.0.113.4" in r.status().get("announcing", {}).get("bgp", []),
            within=15,
            what="the recreated directory read",
        )
        assert r.status()["generation"] > gen
        assert not r.status()["problems"]
        await wait_for_async(r.good_ok, within=8, what="web still announced")


async def test_the_default_state_dir_comes_back_with_a_recreated_manifest_directory(
    tmp_path: Path,
) -> None:
    # The default state directory is MANIFESTS/.state/NODE: removed with the manifests.
    async with running(tmp_path, tmp_path / "manifests" / ".state" / "n1") as r:
        saved = tmp_path / "saved"
        shutil.copytree(r.manifests, saved, ignore=shutil.ignore_patterns(".state"))
        shutil.rmtree(r.manifests)
        r.speaker.notify()
        await wait_for_async(
            lambda: r.source._gone, within=15, what="the missing directory noticed"
        )
        assert not r.manifests.exists()  # not recreated by writing the status
        write(saved / "more.yaml", [service("more", "203.0.113.4")])
        shutil.copytree(saved, r.manifests)
        await wait_for_async(
            lambda: "203.0.113.4" in r.status().get("announcing", {}).get("bgp", []),
            within=15,
            what="status written again once the directory is back",
        )
        assert r.alive()
        await wait_for_async(r.good_ok, within=8, what="web still announced")
