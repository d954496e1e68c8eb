"""MD5 from a Secret in standalone mode, exactly as docs/bgp.md writes it: a `v1` Secret
beside the BGPPeer that names it in `passwordSecret`; BIRD as the router requires the
password (root, BIRD; skipped otherwise)."""

from __future__ import annotations

from pathlib import Path

from needs import require_binary, require_root
from teapot_lb.lab.peers import Bird, Neighbor, fib_next_hops
from teapot_lb.lab.standalone_lab import NODES, ROUTER_LAN, Lab, node, ours, service, write
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology

WEB = "203.0.113.10"
PASSWORD = "change-me"


def secret(name: str, **string_data: str) -> dict[str, object]:
    meta = {"name": name, "namespace": "lb-system"}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": string_data}


def test_a_bgppeer_password_from_a_secret_in_the_manifests_opens_the_md5_session(
    tmp_path: Path,
) -> None:
    require_root()
    require_binary("bird", "birdc")
    peer = {"myASN": 64512, "peerASN": 64500, "peerAddress": ROUTER_LAN, "holdTime": "9s"}
    with Topology("smd5") as topo:
        lab = Lab(topo, tmp_path)
        lab.bind_service_ip(WEB)
        write(
            lab.manifests / "config.yaml",
            [
                secret("tor-md5", password=PASSWORD),
                ours("BGPPeer", "router", {**peer, "passwordSecret": {"name": "tor-md5"}}),
                ours("AddressPool", "public", {"addresses": ["203.0.113.0/28"]}),
                ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
            ],
        )
        write(lab.manifests / "nodes.yaml", [node(n) for n in NODES])
        write(lab.manifests / "services.yaml", [service("web", WEB)])
        neighbors = [Neighbor(a, 64512, password=PASSWORD) for a in NODES.values()]
        bird = Bird(lab.router, tmp_path / "bird", asn=64500, router_id=ROUTER_LAN,
                    neighbors=neighbors, fib=True, local_addresses=[ROUTER_LAN])  # fmt: skip
        bird.start()
        try:
            lab.start_all(modes="bgp")
            for a in NODES.values():
                bird.wait_established(a, timeout=30)
            want = frozenset(NODES.values())
            wait_for(lambda: fib_next_hops(lab.router, f"{WEB}/32") == want, timeout=20,
                     what="ECMP over the 3 nodes through MD5 sessions")  # fmt: skip
            for name in NODES:
                assert lab.status(name)["problems"] == []
        finally:
            lab.kill_all()
            bird.stop()
