"""Real HAProxy: simple Ingresses (one host, Prefix '/', to a Service of their own, with a
TLS certificate each) added one after another are served, by Host and by SNI, with no
reload (the same worker throughout), and removed are 404 with their certificate no
longer presented, again with no reload: the backend pool's spare sections, the fast
map's rows and the crt-list over the runtime API (issue 37). Hosts added under a
certificate already offered (a tenant's Secret shared by its Ingresses) get it presented
with no reload too (a crt-list line of their own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway.config import Certificate, GatewayConfig, HTTPRoute, Protocol
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.lab.gateway_lab import GatewayLab, gateway_lab, make_certificate

from .builders import E, P, backend, ingress, listener

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

ECHO = ("198.51.100.2", 8080)
ECHO2 = ("198.51.100.3", 8080)
ADDED = 8  # Ingresses added (and then removed), one apply each


@dataclass
class World:
    lab: GatewayLab
    haproxy: HAProxy
    pems: dict[str, str]  # certificate name (the host's first label) -> PEM


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    work = tmp_path_factory.mktemp("gwpool")
    with gateway_lab(work, "gwpool") as lab:
        lab.start_backends("http:echo:198.51.100.2:8080", "http:echo2:198.51.100.3:8080")
        yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(lab: GatewayLab) -> AsyncIterator[World]:
    pems = {}
    for name in ("www", *(f"n{k}" for k in range(ADDED))):
        _cert, _key, pems[name] = make_certificate(lab.work / "certs", f"{name}.example")
    _cert, _key, pems["shared"] = make_certificate(lab.work / "certs", "*.shared.example")
    haproxy = HAProxy(lab.work / "haproxy", wrap=lab.gateway.exec_argv([]))
    yield World(lab, haproxy, pems)
    await haproxy.stop()


def config(w: World, added: range) -> GatewayConfig:
    """A simple host (www) and one with two paths (shop), and the simple Ingresses n<k> in
    `added`: host n<k>.example to backend n<k> (echo for even k, echo2 for odd), TLS by
    certificate n<k>."""
    names = ["www", *(f"n{k}" for k in added)]
    routes: list[HTTPRoute] = [
        ingress(n, f"{n}.example", [(P, "/", n)], ("web", "tls")) for n in names
    ]
    routes.append(
        ingress("shop", "shop.example", [(P, "/", "shop"), (E, "/cart", "shop")], ("web", "tls"))
    )
    backends = [backend("www", ECHO), backend("shop", ECHO2)]
    backends += [backend(f"n{k}", ECHO if k % 2 == 0 else ECHO2) for k in added]
    return GatewayConfig(
        listeners=(
            listener("web", 80),
            listener("tls", 443, Protocol.HTTPS, certificates=tuple(names)),
        ),
        certificates=tuple(
            Certificate(name=n, hostnames=(f"{n}.example",), cert_pem=w.pems[n], key_pem="")
            for n in names
        ),
        backends=tuple(backends),
        http_routes=tuple(routes),
    )


async def test_simple_ingresses_added_and_removed_are_served_then_404_with_no_reload(
    world: World,
) -> None:
    lab, haproxy = world.lab, world.haproxy
    first = await haproxy.apply(config(world, range(0)))
    assert first.error is None, first.error
    pid, reloads = await haproxy.worker_pid(), haproxy.counters.reloads
    for k in range(ADDED):
        host = f"n{k}.example"
        applied = await haproxy.apply(config(world, range(k + 1)))
        assert applied.error is None, applied.error
        assert not applied.change.reload, applied.change.reasons
        assert lab.served_by("/", host) == ("echo" if k % 2 == 0 else "echo2")
        assert f"CN = {host}" in lab.peer_certificate_subject(443, host)
        https = lab.curl(f"https://{host}/", "-k", host=host, port=443)
        assert (https.code, https.json()["name"]) == (200, "echo" if k % 2 == 0 else "echo2")
    assert lab.served_by("/cart", "shop.example") == "echo2"  # (the other hosts still served)
    assert lab.served_by("/", "www.example") == "echo"
    for k in reversed(range(ADDED)):
        host = f"n{k}.example"
        applied = await haproxy.apply(config(world, range(k)))
        assert applied.error is None, applied.error
        assert not applied.change.reload, applied.change.reasons
        assert lab.curl(f"http://{host}/", host=host).code == 404
        assert f"CN = {host}" not in lab.peer_certificate_subject(443, host)
    assert lab.served_by("/", "www.example") == "echo"
    assert (await haproxy.worker_pid(), haproxy.counters.reloads) == (pid, reloads)


def shared(w: World, count: int) -> GatewayConfig:
    """The base config and hosts s<j>.shared.example (j < count) to backend www, TLS by one
    certificate (a wildcard's, as a tenant's Secret shared by its Ingresses), which is
    offered for those names only."""
    cfg = config(w, range(0))
    names = [f"s{j}.shared.example" for j in range(count)]
    routes = [
        ingress(f"s{j}", name, [(P, "/", "www")], ("web", "tls")) for j, name in enumerate(names)
    ]
    listeners = (
        cfg.listeners[0],
        cfg.listeners[1].model_copy(update={"certificates": ("www", "shared")}),
    )
    certificate = Certificate(
        name="shared", hostnames=tuple(names), cert_pem=w.pems["shared"], key_pem=""
    )
    return cfg.model_copy(update={
        "listeners": listeners,
        "certificates": (*cfg.certificates, certificate),
        "http_routes": (*cfg.http_routes, *routes),
    })  # fmt: skip


async def test_hosts_added_under_a_shared_certificate_are_offered_it_with_no_reload(
    world: World,
) -> None:
    lab, haproxy = world.lab, world.haproxy
    first = await haproxy.apply(shared(world, 1))
    assert first.error is None, first.error
    pid, reloads = await haproxy.worker_pid(), haproxy.counters.reloads
    for count in range(2, 5):
        host = f"s{count - 1}.shared.example"
        applied = await haproxy.apply(shared(world, count))
        assert applied.error is None, applied.error
        assert not applied.change.reload, applied.change.reasons
        assert "CN = *.shared.example" in lab.peer_certificate_subject(443, host)
        assert lab.served_by("/", host) == "echo"
    assert (await haproxy.worker_pid(), haproxy.counters.reloads) == (pid, reloads)
    # A name taken away from the certificate: one reload, then its one line again.
    applied = await haproxy.apply(shared(world, 1))
    assert applied.change.reload
    assert "CN = *.shared.example" not in lab.peer_certificate_subject(443, "s3.shared.example")
    assert "CN = *.shared.example" in lab.peer_certificate_subject(443, "s0.shared.example")
