"""The image that scripts/build-image.sh builds, run as a container runtime would run the
speaker's DaemonSet: its root filesystem read-only in a mount namespace of its own, in a
node's network namespace, uid 0 with only NET_RAW, NET_ADMIN and NET_BIND_SERVICE, the
state directory and the configuration mounted in. It starts a standalone speaker
(`teapot-lb run`) and BIRD learns the Service's route from it.

Building the image takes minutes (mmdebstrap downloads and unpacks Debian), so the test
uses an image built beforehand: ``$TEAPOT_IMAGE`` (an OCI layout and tag, ``DIR:TAG``),
else ``build/image`` with its only tag; it builds one itself with ``TEAPOT_BUILD_IMAGE=1``
(scripts/check.sh, the CI gate, sets it) and skips otherwise, saying so.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from needs import require_binary, require_root
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import (
    NODES,
    ROUTER_LAN,
    ROUTER_LAN6,
    Lab,
    node,
    ours,
    service,
    write,
)
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

ROOT = Path(__file__).resolve().parents[2]
WEB = "203.0.113.10"
# The DaemonSet's securityContext: drop ALL, add these (capability numbers, capability.h).
CAPABILITIES = {"NET_BIND_SERVICE": 10, "NET_ADMIN": 12, "NET_RAW": 13}


def image_reference() -> str | None:
    if os.environ.get("TEAPOT_IMAGE"):
        return os.environ["TEAPOT_IMAGE"]
    layout = ROOT / "build" / "image"
    if not (layout / "index.json").exists():
        if os.environ.get("TEAPOT_BUILD_IMAGE") != "1":
            return None
        subprocess.run([str(ROOT / "scripts" / "build-image.sh"), str(layout)], check=True)
    (manifest,) = json.loads((layout / "index.json").read_text())["manifests"]
    return f"{layout}:{manifest['annotations']['org.opencontainers.image.ref.name']}"


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_root()
    require_binary("umoci", "unshare", "bird", "birdc")
    reference = image_reference()
    if reference is None:
        pytest.skip(
            "no image: build one with scripts/build-image.sh (minutes), set $TEAPOT_IMAGE, "
            "or run with TEAPOT_BUILD_IMAGE=1"
        )
    target = tmp_path_factory.mktemp("image") / "rootfs"
    subprocess.run(
        ["umoci", "raw", "unpack", "--image", reference, str(target)],
        check=True, capture_output=True,
    )  # fmt: skip
    return target


def container_argv(
    rootfs: Path, mounts: dict[str, Path], argv: list[str], caps: Iterable[str] = CAPABILITIES
) -> list[str]:
    """``argv`` in the image as the DaemonSet runs it: a private mount namespace, the root
    filesystem read-only, ``mounts`` (path in the image: host directory) writable, /proc
    and /dev, then uid 0 with only the capabilities ``caps`` and no_new_privs."""
    root = shlex.quote(str(rootfs))
    steps = [f"mount --bind {root} {root}", f"mount -o remount,bind,ro {root}"]
    for inside, outside in mounts.items():
        steps.append(f"mount --bind {shlex.quote(str(outside))} {root}{inside}")
    steps += [f"mount -t proc proc {root}/proc", f"mount --rbind /dev {root}/dev"]
    bounding = ",".join(["-all", *(f"+{name.lower()}" for name in caps)])
    steps.append(
        f"exec chroot {root} setpriv --bounding-set={bounding} --inh-caps=-all "
        f"--no-new-privs {shlex.join(argv)}"
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec", " && ".join(steps)]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """The standalone lab (teapot_lb.lab.standalone_lab) with BIRD peering with n1."""
    with Topology("img") as topo:
        lab = Lab(topo, tmp_path)
        bird = Bird(
            lab.router, tmp_path / "bird", asn=64500, router_id=ROUTER_LAN,
            neighbors=[Neighbor(address=NODES["n1"], asn=64512, hold_time=9)],
            fib=True, local_addresses=[ROUTER_LAN, ROUTER_LAN6],
        )  # fmt: skip
        bird.start()
        try:
            yield lab
        finally:
            bird.stop()


def effective_capabilities(pid: int) -> set[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            bits = int(line.split()[1], 16)
            return {n for n in range(64) if bits >> n & 1}
    return set()


def start_speaker(
    rootfs: Path, net: Lab, tmp_path: Path, caps: Iterable[str] = CAPABILITIES
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """`teapot-lb run` for n1 from the image; the process, its log and its state dir."""
    write(
        net.manifests / "config.yaml",
        [
            ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
            ours("BGPPeer", "router", {"myASN": 64512, "peerASN": 64500,
                                       "peerAddress": ROUTER_LAN, "holdTime": "9s"}),
            ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
            node("n1"),
            service("web", WEB),
        ],
    )  # fmt: skip
    state = tmp_path / "state"
    state.mkdir()
    (rootfs / "manifests").mkdir(exist_ok=True)
    argv = ["teapot-lb", "--log-format=json", "run", "--manifests", "/manifests",
            "--node", "n1", "--state-dir", "/var/lib/teapot-lb", "--modes", "bgp",
            "--poll-interval", "0.2"]  # fmt: skip
    mounts = {"/manifests": net.manifests, "/var/lib/teapot-lb": state}
    log = tmp_path / "speaker.log"
    with log.open("ab") as out:
        proc = net.nodes["n1"].popen(
            container_argv(rootfs, mounts, argv, caps), stdout=out, stderr=subprocess.STDOUT
        )
    return proc, log, state


def test_the_image_runs_a_standalone_speaker_whose_route_reaches_the_router(
    rootfs: Path, lab: Lab, tmp_path: Path
) -> None:
    net = lab
    proc, log, state = start_speaker(rootfs, net, tmp_path)
    try:
        wait_for(
            lambda: fib_next_hops(net.router, f"{WEB}/32") == {NODES["n1"]},
            timeout=60,
            what=f"{WEB} via n1 at the router",
            detail=lambda: log.read_text(errors="replace")[-3000:],
        )
        # The process the route came from runs with exactly the DaemonSet's capabilities.
        assert effective_capabilities(proc.pid) == set(CAPABILITIES.values())
        assert (state / "status.json").exists(), "the state directory is the mounted one"
        assert not (rootfs / "var/lib/teapot-lb/status.json").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text(errors="replace")[-2000:]


def test_without_net_bind_service_the_speaker_cannot_listen_on_the_bgp_port(
    rootfs: Path, lab: Lab, tmp_path: Path
) -> None:
    """Why the DaemonSet adds NET_BIND_SERVICE: uid 0 without it may not bind port 179."""
    proc, log, _ = start_speaker(rootfs, lab, tmp_path, caps=("NET_RAW", "NET_ADMIN"))
    try:
        wait_for(
            lambda: (
                "needs root or the capability NET_BIND_SERVICE" in log.read_text(errors="replace")
            ),
            timeout=60,
            what="the refused bind on port 179, and what to do, in the speaker's log",
            detail=lambda: log.read_text(errors="replace")[-3000:],
        )
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)
