"""TLS termination and TLS passthrough on one IP:port through real HAProxy: the SNI of a
passthrough route goes to its backend untouched, every other name is terminated with the
tenant's certificate behind an internal hop that keeps the client's address (PROXY v2);
and a new certificate is added without a reload."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway.config import (
    BackendRef,
    Certificate,
    GatewayConfig,
    Owner,
    PathType,
    Protocol,
    TLSRoute,
)
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.gateway.plan import AddCertificate
from teapot_lb.gateway.translate import translate
from teapot_lb.tenancy.l7vet import L7World

from .builders import backend, ingress, listener
from .control import builders as cb
from .lab import CLIENT, GATEWAY, GatewayLab, gateway_lab, make_certificate

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

TENANT_A = Owner(tenant="a", kind="Ingress", namespace="shop", name="web")


@dataclass
class World:
    lab: GatewayLab
    haproxy: HAProxy
    pems: dict[str, str]  # hostname -> certificate and key
    files: dict[str, Path]  # hostname -> certificate file (curl --cacert)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    work = tmp_path_factory.mktemp("gwtls")
    with gateway_lab(work, "gwtls") as lab:
        p_cert, p_key, _ = make_certificate(work / "certs", "p.example")
        proc = lab.start_backends(
            "http:echo:198.51.100.2:8080",
            "http:other:198.51.100.3:8080",
            f"tls:passthrough:198.51.100.6:8443:{p_cert}:{p_key}",
        )
        try:
            yield lab
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(lab: GatewayLab) -> AsyncIterator[World]:
    pems, files = {}, {"p.example": lab.work / "certs" / "p.example.crt"}
    for host in ("a.example", "c.example"):
        cert, _key, pem = make_certificate(lab.work / "certs", host)
        pems[host], files[host] = pem, cert
    haproxy = HAProxy(lab.work / "haproxy", wrap=lab.gateway.exec_argv([]))
    w = World(lab, haproxy, pems, files)
    applied = await haproxy.apply(config(w))
    assert applied.error is None, applied.error
    yield w
    await haproxy.stop()


def config(w: World, *, with_c: bool = False) -> GatewayConfig:
    """a.example terminated and p.example passed through, both on 443, and c.example routed
    on the terminating listener; `with_c`: c.example's own certificate added."""
    hosts = ["a", "c"] if with_c else ["a"]
    return GatewayConfig(
        listeners=(
            listener("tls", 443, Protocol.HTTPS, certificates=tuple(hosts)),
            listener("pt", 443, Protocol.TLS_PASSTHROUGH),
        ),
        certificates=tuple(
            Certificate(
                name=h,
                hostnames=(f"{h}.example",),
                owner=TENANT_A,
                cert_pem=w.pems[f"{h}.example"],
                key_pem="",
            )
            for h in hosts
        ),
        backends=(
            backend("echo", ("198.51.100.2", 8080), owner=TENANT_A),
            backend("other", ("198.51.100.3", 8080), owner=TENANT_A),
            backend("passthrough", ("198.51.100.6", 8443)),
        ),
        http_routes=(
            ingress("a", "a.example", [(PathType.PREFIX, "/", "echo")], ("tls",), "a"),
            ingress("c", "c.example", [(PathType.PREFIX, "/", "other")], ("tls",), "a"),
        ),
        tls_routes=(
            TLSRoute(
                listeners=("pt",),
                hostnames=("p.example",),
                backends=(BackendRef(backend="passthrough"),),
            ),
        ),
    )


def https(w: World, host: str) -> tuple[int, str, str]:
    """code, answering backend, X-Forwarded-For it saw (passthrough: none)."""
    r = w.lab.curl(f"https://{host}/", "--cacert", str(w.files[host]), host=host, port=443)
    if r.code != 200:
        return r.code, "", ""
    body = r.json()
    return r.code, body["name"], body.get("headers", {}).get("x-forwarded-for", "")


async def test_termination_and_passthrough_share_one_ip_and_port(world: World) -> None:
    await world.haproxy.apply(config(world))
    assert https(world, "p.example")[:2] == (200, "passthrough")
    # Terminated behind the hop: the backend still sees the client's address.
    assert https(world, "a.example") == (200, "echo", CLIENT)
    # No SNI at all: terminated with the listener's first certificate.
    subject = world.lab.peer_certificate_subject(443, "unknown.example")
    assert "CN = a.example" in subject


async def test_a_new_certificate_is_added_without_a_reload(world: World) -> None:
    await world.haproxy.apply(config(world))
    # Before: c.example gets the listener's default certificate (a.example's).
    assert "CN = a.example" in world.lab.peer_certificate_subject(443, "c.example")
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    applied = await world.haproxy.apply(config(world, with_c=True))
    assert applied.error is None, applied.error
    assert not applied.change.reload, applied.change.reasons
    assert [type(a) for a in applied.change.actions] == [AddCertificate]
    assert "CN = c.example" in world.lab.peer_certificate_subject(443, "c.example")
    assert https(world, "c.example")[:2] == (200, "other")
    assert https(world, "a.example")[:2] == (200, "echo")  # the default stays
    assert (await world.haproxy.worker_pid(), world.haproxy.counters.reloads) == (pid, reloads)
    # Removing it is a (seamless) reload: HAProxy's crt-list has no safe in-place delete
    # of a certificate in use.
    applied = await world.haproxy.apply(config(world))
    assert applied.change.reload
    assert "CN = a.example" in world.lab.peer_certificate_subject(443, "c.example")


async def test_each_certificate_of_a_gateway_listener_answers_for_its_own_hostname(
    world: World,
) -> None:
    """A Gateway listener with two certificateRefs, translated and served: SNI a gets
    certificate a and SNI b certificate b (not the first one for both)."""
    certs = {n: cb.make_certificate(world.lab.work, f"{n}.acme.example") for n in ("a", "b")}
    refs = [{"name": n} for n in certs]
    https_listener = cb.listener("https", "HTTPS", 443, tls={"certificateRefs": refs})
    gw = cb.gateway("acme", "gw", [https_listener])
    hosts = [f"{n}.acme.example" for n in certs]
    route = cb.http_route("acme", "store", hosts, age=1)
    secrets = {
        cb.secret_key("acme", n): {"tls.crt": c, "tls.key": k} for n, (c, k) in certs.items()
    }
    world_l7 = L7World([cb.tenant("acme"), cb.tenant("bolt")], [gw, route], secrets)
    done = translate(world_l7, [], [ip_address(GATEWAY)])
    applied = await world.haproxy.apply(done.config)
    assert applied.error is None, applied.error
    for n in certs:
        subject = world.lab.peer_certificate_subject(443, f"{n}.acme.example")
        assert f"CN = {n}.acme.example" in subject, (n, subject)
