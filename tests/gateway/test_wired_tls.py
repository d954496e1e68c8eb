"""TLS through real HAProxy. Termination and passthrough on one IP:port: the SNI of a
passthrough route goes to its backend untouched, every other name is terminated with the
tenant's certificate behind an internal hop that keeps the client's address (PROXY v2); a
new certificate is added without a reload. TLS never mixes tenants (issue 34): a client
without SNI or with a name nobody is offered a certificate for sees the gateway's own
certificate, never a tenant's; a request whose Host did not choose the certificate of its
connection (another tenant's name, HTTP/1.1 or HTTP/2, a reused HTTP/2 connection) is
421 Misdirected Request (RFC 9110 section 15.5.20), never another tenant's backend; and
the shared listeners answer 404 with nothing served."""

from __future__ import annotations

import json
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
from teapot_lb.gateway.default_certificate import SUBJECT_CN, from_files
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.gateway.plan import (
    AddCertificate,
    AddMapEntry,
    DelMapEntry,
    RemoveCertificate,
    SetCertificate,
)
from teapot_lb.gateway.translate import translate
from teapot_lb.lab.gateway_lab import CLIENT, GATEWAY, GatewayLab, gateway_lab, make_certificate
from teapot_lb.tenancy.l7vet import L7World

from .builders import backend, ingress, listener
from .control import builders as cb

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

TENANT_A = Owner(tenant="a", kind="Ingress", namespace="shop", name="web")
TENANT_B = Owner(tenant="b", kind="Ingress", namespace="store", name="web")
GATEWAYS_OWN = f"CN = {SUBJECT_CN}"


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
    for host in ("a.example", "c.example", "b.example", "*.w.example"):
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


def two_tenants(w: World) -> GatewayConfig:
    """One HTTPS listener: tenant a's a.example (backend echo), tenant b's b.example and
    *.w.example (backend other), each with its own certificate; HTTP too."""
    names = {"a": "a.example", "b": "b.example", "w": "*.w.example"}
    owners = {"a": TENANT_A, "b": TENANT_B, "w": TENANT_B}
    return GatewayConfig(
        listeners=(
            listener("web", 80),
            listener("tls", 443, Protocol.HTTPS, certificates=("a", "b", "w")),
        ),
        certificates=tuple(
            Certificate(name=n, hostnames=(h,), owner=owners[n], cert_pem=w.pems[h], key_pem="")
            for n, h in names.items()
        ),
        backends=(
            backend("echo", ("198.51.100.2", 8080), owner=TENANT_A),
            backend("other", ("198.51.100.3", 8080), owner=TENANT_B),
        ),
        http_routes=(
            ingress("a", "a.example", [(PathType.PREFIX, "/", "echo")], ("web", "tls"), "a"),
            ingress("b", "b.example", [(PathType.PREFIX, "/", "other")], ("web", "tls"), "b"),
            ingress("w", "*.w.example", [(PathType.PREFIX, "/", "other")], ("tls",), "b"),
        ),
    )


def request(w: World, sni: str | None, host: str) -> tuple[int, str]:
    """An HTTP/1.1 request over TLS with `sni` (None: none) and Host `host`: its code and
    the backend that answered ('' when none did). Certificates are checked apart."""
    url = f"https://{sni}/" if sni else f"https://{GATEWAY}/"
    r = w.lab.curl(url, "-k", "-H", f"Host: {host}", host=sni, port=443)
    return r.code, r.json()["name"] if r.code == 200 else ""


def fingerprint(subject_and_fingerprint: str) -> str:
    return subject_and_fingerprint.rpartition("Fingerprint=")[2].strip()


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
    # A name no certificate is offered for: terminated with the gateway's own.
    assert GATEWAYS_OWN in world.lab.peer_certificate_subject(443, "unknown.example")


async def test_a_new_certificate_is_added_and_removed_without_a_reload(world: World) -> None:
    await world.haproxy.apply(config(world))
    # Before: c.example gets the gateway's own certificate, not a.example's.
    assert GATEWAYS_OWN in world.lab.peer_certificate_subject(443, "c.example")
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    applied = await world.haproxy.apply(config(world, with_c=True))
    assert applied.error is None, applied.error
    assert not applied.change.reload, applied.change.reasons
    # the certificate, then its name in the 421 check's map
    assert [type(a) for a in applied.change.actions] == [AddCertificate, AddMapEntry]
    assert "CN = c.example" in world.lab.peer_certificate_subject(443, "c.example")
    assert https(world, "c.example")[:2] == (200, "other")
    assert https(world, "a.example")[:2] == (200, "echo")
    # The check knows the new certificate: its connection is for its name only.
    assert request(world, "c.example", "a.example") == (421, "")
    assert request(world, "a.example", "c.example") == (421, "")
    assert (await world.haproxy.worker_pid(), world.haproxy.counters.reloads) == (pid, reloads)
    # Removing it: its name out of the map, then its crt-list line, then the certificate
    # (`del ssl cert`: no crt-list has it any more), no reload either.
    applied = await world.haproxy.apply(config(world))
    assert applied.error is None, applied.error
    assert not applied.change.reload, applied.change.reasons
    assert [type(a) for a in applied.change.actions] == [DelMapEntry, RemoveCertificate]
    assert GATEWAYS_OWN in world.lab.peer_certificate_subject(443, "c.example")
    assert https(world, "a.example")[:2] == (200, "echo")
    assert (await world.haproxy.worker_pid(), world.haproxy.counters.reloads) == (pid, reloads)


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


async def test_without_sni_or_with_a_name_nobody_serves_the_gateways_own_certificate_is_shown(
    world: World,
) -> None:
    applied = await world.haproxy.apply(two_tenants(world))
    assert applied.error is None, applied.error
    tenants = {
        fingerprint(world.lab.peer_certificate_subject(443, sni))
        for sni in ("a.example", "b.example", "x.w.example")
    }
    assert len(tenants) == 3
    # no SNI; a name nobody serves; a name inside tenant b's wildcard's domain that the
    # wildcard does not cover (two labels); the wildcard's own parent name
    for sni in (None, "unknown.example", "y.x.w.example", "w.example"):
        seen = world.lab.peer_certificate_subject(443, sni)
        assert GATEWAYS_OWN in seen, (sni, seen)
        assert fingerprint(seen) not in tenants, (sni, seen)


@pytest.mark.parametrize(
    ("sni", "host", "expected"),
    [
        ("a.example", "a.example:443", (200, "echo")),
        ("b.example", "b.example", (200, "other")),
        ("x.w.example", "y.w.example", (200, "other")),  # one wildcard certificate: both
        ("b.example", "a.example", (421, "")),  # tenant b's certificate, tenant a's name
        ("x.w.example", "a.example", (421, "")),
        ("a.example", "b.example", (421, "")),
        ("a.example", "x.w.example", (421, "")),
        ("x.w.example", "b.example", (421, "")),  # same tenant, another certificate
        ("x.w.example", "z.y.w.example", (421, "")),  # the wildcard covers one label
        (None, "a.example", (421, "")),  # no SNI: the gateway's certificate, a's name
        ("unknown.example", "b.example", (421, "")),
        (None, "nobody.example", (404, "")),  # the gateway's certificate, nobody's name
        ("unknown.example", "unknown.example", (404, "")),
    ],
)
async def test_a_request_whose_host_did_not_choose_the_connections_certificate_is_misdirected(
    world: World, sni: str | None, host: str, expected: tuple[int, str]
) -> None:
    await world.haproxy.apply(two_tenants(world))
    assert request(world, sni, host) == expected


async def test_http2_streams_on_one_connection_are_each_checked_against_its_certificate(
    world: World,
) -> None:
    """HTTP/2 reuses a connection for other names (RFC 9113 section 9.1.1): each stream's
    :authority must have chosen the connection's certificate."""
    await world.haproxy.apply(two_tenants(world))

    def answers(sni: str | None, *authorities: str) -> list[tuple[int, str]]:
        out = []
        for a in world.lab.h2(443, sni, *authorities):
            name = json.loads(a["body"])["name"] if a["status"] == 200 else ""
            out.append((a["status"], name))
        return out

    assert answers("b.example", "b.example", "a.example", "b.example") == [
        (200, "other"), (421, ""), (200, "other"),
    ]  # fmt: skip
    assert answers("x.w.example", "y.w.example", "a.example", "b.example") == [
        (200, "other"), (421, ""), (421, ""),
    ]  # fmt: skip
    assert answers("a.example", "a.example", "x.w.example") == [(200, "echo"), (421, "")]
    assert answers(None, "a.example", "nobody.example") == [(421, ""), (404, "")]


async def test_with_nothing_served_the_shared_listeners_answer_404(world: World) -> None:
    """A gateway whose tenants serve nothing yet still binds 80 and 443 (issue 34, 8)."""
    nothing = translate(L7World([cb.tenant("acme")], [], {}), [], [ip_address(GATEWAY)])
    assert nothing.config.http_routes == ()
    applied = await world.haproxy.apply(nothing.config)
    assert applied.error is None, applied.error
    plain = world.lab.curl("http://nobody.example/", host="nobody.example", port=80)
    assert plain.code == 404
    assert request(world, "nobody.example", "nobody.example") == (404, "")
    assert GATEWAYS_OWN in world.lab.peer_certificate_subject(443, "nobody.example")


async def test_the_operators_certificate_is_the_default_and_rotates_without_a_reload(
    world: World,
) -> None:
    certs = world.lab.work / "operator"
    first = make_certificate(certs, "gw1.operator.example")
    second = make_certificate(certs, "gw2.operator.example")
    cfg = two_tenants(world)
    applied = await world.haproxy.apply(
        cfg.model_copy(update={"default_certificate": from_files(first[0], first[1])})
    )
    assert applied.error is None, applied.error
    for sni in (None, "unknown.example"):
        assert "CN = gw1.operator.example" in world.lab.peer_certificate_subject(443, sni)
    assert request(world, None, "a.example") == (421, "")
    reloads = world.haproxy.counters.reloads
    applied = await world.haproxy.apply(
        cfg.model_copy(update={"default_certificate": from_files(second[0], second[1])})
    )
    assert not applied.change.reload, applied.change.reasons
    assert [type(a) for a in applied.change.actions] == [SetCertificate]
    assert "CN = gw2.operator.example" in world.lab.peer_certificate_subject(443, None)
    assert "CN = a.example" in world.lab.peer_certificate_subject(443, "a.example")
    assert world.haproxy.counters.reloads == reloads
