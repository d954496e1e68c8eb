"""A tenant's dedicated gateway address through real HAProxy (issue 34, 7(b)).

acme has three dedicated addresses of its allocation (pool `gw`, 192.0.2.32/29): on
192.0.2.33 an Ingress with a hosted rule, a rule without host for /app and a
defaultBackend, and a TLS certificate; on 192.0.2.34 an Ingress with only a rule without
host for /app; on 192.0.2.35 a Gateway with an HTTPRoute without hostnames. bolt is on the
shared address 192.0.2.10 with its own hostname, and acme has one more Ingress there whose
defaultBackend is left out.

    client 192.0.2.20 ── lan ── gateway 192.0.2.10 (shared), .33, .34, .35 (acme's)
                                backends: acme web .2, other .3; bolt .9 (198.51.100.x)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway.config import problems
from teapot_lb.gateway.default_certificate import SUBJECT_CN
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.lab.gateway_lab import GATEWAY, GatewayLab, gateway_lab, make_certificate
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.pool import AddressPool
from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS
from teapot_lb.tenancy.l7vet import L7World
from tenancy.builders import parsed, pool_body

from .control import builders
from .control.builders import backend, gateway, http_route, ingress, listener, tenant

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

WEB, OTHER, BOLT = "198.51.100.2", "198.51.100.3", "198.51.100.9"
OWN, STRICT, GW = "192.0.2.33", "192.0.2.34", "192.0.2.35"


def _tenant(name: str, nodes: str, cidr: str) -> Any:
    return tenant(
        name,
        nodeNetworks=[nodes],
        allocations=[{"addressPool": "gw", "cidrs": [cidr]}],
    )


def _host_less(path: str = "/app", service: str = "web") -> dict[str, Any]:
    return {"http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend(service)}]}}


def _translation(lab: GatewayLab) -> Translation:
    cert, key, _ = make_certificate(lab.work / "tls", "www.acme.example")
    secrets = {
        builders.secret_key("acme", "a-tls"): {
            "tls.crt": cert.read_bytes(),
            "tls.key": key.read_bytes(),
        }
    }
    pool = parsed(pool_body("gw", ["192.0.2.32/28"]))
    assert isinstance(pool, AddressPool)
    body = builders.ingress_body(
        "acme", "own", "www.acme.example",
        annotations={ANNOTATION_DEDICATED_ADDRESS: OWN},
        defaultBackend=backend("other"),
        tls=[{"hosts": ["www.acme.example"], "secretName": "a-tls"}],
    )  # fmt: skip
    body["spec"]["rules"].append(_host_less())
    own = parsed(body)
    assert isinstance(own, Ingress)
    strict = ingress(
        "acme", "strict", None, age=1,
        annotations={ANNOTATION_DEDICATED_ADDRESS: STRICT}, paths=_host_less()["http"]["paths"],
    )  # fmt: skip
    shared = ingress(
        "acme", "shared", "shared.acme.example", age=2,
        paths=_host_less("/only")["http"]["paths"], defaultBackend=backend("other"),
    )  # fmt: skip
    bolt = ingress("bolt", "web", "www.bolt.example", age=3)
    own_gw = gateway("acme", "gw", [listener("http", "HTTP", 80)], age=4,
                     addresses=[{"type": "IPAddress", "value": GW}])  # fmt: skip
    every_host = http_route("acme", "every-host", [], age=5, rules=[
        {"matches": [{"path": {"type": "PathPrefix", "value": "/other"}}],
         "backendRefs": [{"name": "other", "port": 80}]},
        {"backendRefs": [{"name": "web", "port": 80}]},
    ])  # fmt: skip
    tenants = [
        _tenant("acme", "198.51.100.0/29", "192.0.2.32/29"),
        _tenant("bolt", "198.51.100.8/29", "192.0.2.40/29"),
    ]
    slices = [
        builders.mirrored_slice("acme", "web", [WEB], port=8080),
        builders.mirrored_slice("acme", "other", [OTHER], port=8080),
        builders.mirrored_slice("bolt", "web", [BOLT], port=8080),
    ]
    objects = [own, strict, shared, bolt, own_gw, every_host]
    world = L7World(tenants, objects, secrets, pools={"gw": pool})
    return translate(world, slices, [ip_address(GATEWAY)])


@dataclass
class World:
    lab: GatewayLab
    translation: Translation

    def answer(self, address: str, host: str, path: str = "/") -> str | int:
        """The backend that answers Host `host` sent to `address` (else the status code)."""
        r = self.lab.curl(f"http://{address}{path}", "-H", f"Host: {host}")
        return str(r.json()["name"]) if r.code == 200 else r.code


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    with gateway_lab(tmp_path_factory.mktemp("gwded"), "gwded") as lab:
        for address in (OWN, STRICT, GW):
            lab.gateway.add_address("eth0", f"{address}/32")
        lab.start_backends(f"http:web:{WEB}:8080", f"http:other:{OTHER}:8080",
                           f"http:bolt:{BOLT}:8080")  # fmt: skip
        yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(lab: GatewayLab) -> AsyncIterator[World]:
    translation = _translation(lab)
    assert problems(translation.config) == []
    haproxy = HAProxy(lab.work / "haproxy", wrap=lab.gateway.exec_argv([]))
    applied = await haproxy.apply(translation.config)
    assert applied.error is None, applied.error
    yield World(lab, translation)
    await haproxy.stop()


async def test_a_dedicated_address_serves_host_less_rules_and_the_default_backend(
    world: World,
) -> None:
    """The Ingress documentation's rules on the tenant's own address: the hosted rule for
    its host, the rule without host for every host, the defaultBackend for the rest (its
    own host's unlisted paths too)."""
    assert world.answer(OWN, "www.acme.example", "/") == "web"
    assert world.answer(OWN, "anything.example", "/app/x") == "web"
    assert world.answer(OWN, "anything.example", "/") == "other"
    assert world.answer(OWN, OWN, "/") == "other"
    assert world.answer(STRICT, "anything.example", "/app") == "web"


async def test_a_gateway_with_its_address_serves_an_httproute_without_hostnames(
    world: World,
) -> None:
    """Gateway API: a route without hostnames takes every hostname of its listener, on the
    Gateway's own address (bolt's hostname there included: it is acme's address)."""
    assert world.answer(GW, "anything.example", "/") == "web"
    assert world.answer(GW, "anything.example", "/other/x") == "other"
    assert world.answer(GW, "www.bolt.example", "/") == "web"
    assert world.answer(GATEWAY, "anything.example", "/") == 404


async def test_another_tenants_host_on_the_dedicated_address_never_reaches_its_backend(
    world: World,
) -> None:
    """bolt's hostname sent to acme's addresses is acme's to answer: its defaultBackend,
    or 404 where it has none; never bolt's backend (bolt is served on the shared one)."""
    assert world.answer(OWN, "www.bolt.example", "/") == "other"
    assert world.answer(STRICT, "www.bolt.example", "/") == 404
    assert world.answer(GATEWAY, "www.bolt.example", "/") == "bolt"


async def test_the_shared_address_still_refuses_host_less_parts(world: World) -> None:
    """On the shared address acme's defaultBackend is left out (said in its result), and
    acme's dedicated Ingresses are not served there at all."""
    assert world.answer(GATEWAY, "shared.acme.example", "/only") == "web"
    assert world.answer(GATEWAY, "shared.acme.example", "/") == 404  # no default there
    assert world.answer(GATEWAY, "anything.example", "/app") == 404
    assert world.answer(GATEWAY, "www.acme.example", "/") == 404
    shared = next(r for r in world.translation.results.values() if r.obj.name.endswith("shared"))
    assert [(r.rule.value, r.field) for r in shared.dropped] == [
        ("HostnameNotAllowed", "spec.defaultBackend")
    ]


def _subject(world: World, address: str, servername: str | None) -> str:
    sni = f"-servername {servername}" if servername else "-noservername"
    return world.lab.client.run(
        "sh", "-c",
        f"openssl s_client -connect {address}:443 {sni} </dev/null 2>/dev/null"
        " | openssl x509 -noout -subject",
    )  # fmt: skip


def _https(world: World, sni: str | None, host: str, path: str = "/") -> str | int:
    """The backend that answers Host `host` over TLS with `sni` (None: none) on acme's
    address (else the status code)."""
    target = f"https://{sni}{path}" if sni else f"https://{OWN}{path}"
    resolve = ["--resolve", f"{sni}:443:{OWN}"] if sni else []
    r = world.lab.curl(target, "-k", *resolve, "-H", f"Host: {host}")
    return str(r.json()["name"]) if r.code == 200 else r.code


async def test_the_dedicated_https_listener_defaults_to_the_gateways_own_certificate(
    world: World,
) -> None:
    """As on every HTTPS listener: a client without SNI, or with a name no certificate
    there covers, is shown the gateway's own certificate, never the tenant's; the tenant's
    is offered for its name."""
    assert f"CN = {SUBJECT_CN}" in _subject(world, OWN, None)
    assert f"CN = {SUBJECT_CN}" in _subject(world, OWN, "anything.example")
    assert "CN = www.acme.example" in _subject(world, OWN, "www.acme.example")


async def test_the_dedicated_https_listener_answers_421_for_a_host_its_sni_did_not_choose(
    world: World,
) -> None:
    """RFC 9110 section 15.5.20 there too: a Host the SNI's certificate does not cover is
    misdirected, before the rule without host could take it; without SNI, a Host with a
    certificate of its own is misdirected, one without is served by the rules."""
    assert _https(world, "www.acme.example", "www.acme.example") == "web"
    assert _https(world, "www.acme.example", "anything.example", "/app") == 421
    assert _https(world, None, "www.acme.example") == 421
    assert _https(world, None, "anything.example", "/app") == "web"
