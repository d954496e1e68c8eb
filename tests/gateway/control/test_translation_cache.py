"""Incremental translation (issue 37): with a TranslationCache, a sequence of changes to
tenants' objects, endpoints and certificates gives after each change exactly the
translation from scratch (config and every object's result), and translates again only
the tenants the change touches; what it decided again (`Translation.changed`) is all a
counter of results needs (the refused objects a Tenant's status counts).

acme and bolt both hold names under shop.example (acme: *.shop.example, bolt:
shop.example), so a hostname can be taken from one by the other; both have allocations
for dedicated addresses (pool shared-v4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teapot_lb.gateway.config import problems
from teapot_lb.gateway.control.l7refused import RefusedObjects, refused_of
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.gateway.translation_cache import TranslationCache
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS, held_addresses
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY
from teapot_lb.tenancy.l7vet import L7Object, L7World, vet_object
from tenancy.builders import pools

from . import builders
from .builders import gateway, http_route, ingress, listener, proxy_request, tenant

SHARED = ip_address("203.0.113.10")
TENANT_NAMES = ("acme", "bolt")
HOSTS = {
    "acme": ("www.acme.example", "a.shop.example", "b.shop.example", "api.acme.example"),
    "bolt": ("www.bolt.example", "a.shop.example", "b.shop.example", "shop.example"),
}
SERVICES = ("web", "api")
NAMES = ("one", "two", "three")
CERT_NAMES = ("www.acme.example", "a.shop.example", "www.bolt.example")


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    directory: Path = tmp_path_factory.mktemp("certs")
    return {cn: builders.make_certificate(directory, cn) for cn in CERT_NAMES}


def tenants(gone: set[str] | frozenset[str] = frozenset()) -> list[Any]:
    every = [tenant("acme"), tenant("bolt", dnsDomains=["bolt.example", "shop.example"])]
    return [t for t in every if t.name not in gone]


@dataclass
class Cloud:
    """What the management cluster holds now."""

    objects: dict[ObjectRef, L7Object] = field(default_factory=dict)
    requests: dict[ObjectRef, TenantLoadBalancer] = field(default_factory=dict)
    slices: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    secrets: dict[str, dict[str, bytes]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    """Tenants deleted (their objects stay, nobody's)."""

    def world(self) -> L7World:
        objects = list(self.objects.values())
        held = held_addresses(tenants(self.gone), self.requests.values())
        return L7World(tenants(self.gone), objects, dict(self.secrets), pools=pools(), held=held)


# ------------------------------------------------------------------ the changes


def _ingress(t: str, name: str, host: int, age: int, service: str, tls: str | None,
             own: bool) -> L7Object:  # fmt: skip
    hostname = HOSTS[t][host]
    return ingress(
        t, f"i-{name}", hostname, age=age,
        paths=[{"path": "/", "pathType": "Prefix", "backend": builders.backend(service)}],
        tls=[{"hosts": [hostname], "secretName": tls}] if tls else [],
        annotations={ANNOTATION_DEDICATED_ADDRESS: "true"} if own else None,
    )  # fmt: skip


def _route(t: str, name: str, host: int, age: int, service: str) -> L7Object:
    rules = [{"backendRefs": [{"name": service, "port": 80}]}]
    return http_route(t, f"r-{name}", [HOSTS[t][host]], age=age, rules=rules)


def _gateway(t: str, age: int, tls: str | None, tcp: int | None, own: bool) -> L7Object:
    listeners = [listener("http", "HTTP", 80)]
    if tls:
        refs = {"mode": "Terminate", "certificateRefs": [{"name": tls}]}
        listeners.append(listener("https", "HTTPS", 443, tls=refs))
    if tcp:
        listeners.append(listener("db", "TCP", tcp))
    addresses = [{"type": "IPAddress", "value": "198.51.100.3"}] if own and t == "acme" else None
    return gateway(t, "gw", listeners, age=age, addresses=addresses)


def _request(t: str, name: str, age: int, address: str, udp: bool, ready: bool) -> Any:
    """A Gateway-mode TenantLoadBalancer (provider proxy) holding `address` (its
    tenant's, the other's dedicated one, or the gateway's own)."""
    ports = [{"protocol": "UDP" if udp else "TCP", "port": 5432, "nodePort": 30432}]
    return proxy_request(t, f"lb-{name}", [address], age=age, ports=ports, ready=ready)


tenant_names = st.sampled_from(TENANT_NAMES)
ages = st.integers(0, 5)
services = st.sampled_from(SERVICES)
secret_names = st.sampled_from((None, "tls-a", "tls-b"))

put_object = st.one_of(
    st.builds(_ingress, tenant_names, st.sampled_from(NAMES), st.integers(0, 3), ages,
              services, secret_names, st.booleans()),
    st.builds(_route, tenant_names, st.sampled_from(NAMES), st.integers(0, 3), ages, services),
    st.builds(_gateway, tenant_names, ages, secret_names, st.sampled_from((None, 5432, 6379)),
              st.booleans()),
)  # fmt: skip
changes = st.one_of(
    st.tuples(st.just("put"), put_object),
    st.tuples(st.just("delete"), st.integers(0, 20)),
    st.tuples(st.just("endpoints"), tenant_names, services,
              st.lists(st.sampled_from(("192.0.2.11", "192.0.2.12", "192.0.2.71")),
                       max_size=2, unique=True)),
    st.tuples(st.just("secret"), tenant_names, st.sampled_from(("tls-a", "tls-b")),
              st.sampled_from((None, *CERT_NAMES))),
    st.tuples(st.just("tenant"), tenant_names, st.booleans()),
    st.tuples(st.just("request"),
              st.builds(_request, tenant_names, st.sampled_from(NAMES), ages,
                        st.sampled_from(("198.51.100.3", "198.51.100.5", "198.51.100.20",
                                         str(SHARED))),
                        st.booleans(), st.booleans())),
    st.tuples(st.just("unrequest"), st.integers(0, 5)),
)  # fmt: skip


def apply(cloud: Cloud, change: tuple[Any, ...], pems: dict[str, tuple[bytes, bytes]]) -> None:
    match change:
        case ("put", obj):
            cloud.objects[obj.ref] = obj
        case ("delete", i):
            if cloud.objects:
                del cloud.objects[sorted(cloud.objects)[i % len(cloud.objects)]]
        case ("endpoints", t, service, addresses):
            if addresses:
                cloud.slices[t, service] = builders.mirrored_slice(t, service, addresses)
            else:
                cloud.slices.pop((t, service), None)
        case ("secret", t, name, cn):
            key = builders.secret_key(t, name)
            if cn is None:
                cloud.secrets.pop(key, None)
            else:
                cert, private = pems[cn]
                cloud.secrets[key] = {CERT_KEY: cert, KEY_KEY: private}
        case ("request", request):
            cloud.requests[request.ref] = request
        case ("unrequest", i):
            if cloud.requests:
                del cloud.requests[sorted(cloud.requests)[i % len(cloud.requests)]]
        case ("tenant", t, present):
            (cloud.gone.discard if present else cloud.gone.add)(t)


# ------------------------------------------------------------------ the properties


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(changes, min_size=1, max_size=12))
def test_changes_applied_incrementally_translate_as_from_scratch(
    pems: dict[str, tuple[bytes, bytes]], steps: list[tuple[Any, ...]]
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    for change in steps:
        apply(cloud, change, pems)
        world = cloud.world()
        requests = list(cloud.requests.values())
        kept = cache.translate(world, list(cloud.slices.values()), [SHARED], requests)
        fresh = translate(world, list(cloud.slices.values()), [SHARED], requests)
        assert kept.config == fresh.config, change
        assert kept.results == fresh.results, change
        assert kept.load_balancers == fresh.load_balancers, change
        assert problems(kept.config) == [], change
        placed = {(r.address, r.tenant) for r in fresh.results.values() if r.address}
        assert kept.placed == fresh.placed == placed, change
        # The tenant's vetting against its own objects and its rivals' is vetting
        # against everything.
        for ref, result in kept.results.items():
            rules = [r for r in result.refusals if not r.rule.value.startswith("Address")]
            assert rules == vet_object(cloud.objects[ref], world)


def test_a_tenants_certificates_changing_under_the_merge_it_keeps_translate_as_from_scratch(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    # The merge is kept and only the changed tenant's pieces replaced: its certificates
    # offered on the shared HTTPS listener (with the other tenant's) must follow, while
    # its listeners stay the same.
    cloud, cache = Cloud(), TranslationCache()
    one = _ingress("acme", "one", 0, 1, "web", "tls-a", False)
    steps: list[tuple[Any, ...]] = [
        ("put", one),
        ("secret", "acme", "tls-a", "www.acme.example"),
        ("put", _ingress("bolt", "one", 0, 1, "web", "tls-a", False)),
        ("secret", "bolt", "tls-a", "www.bolt.example"),
        ("put", _ingress("acme", "two", 1, 2, "api", "tls-b", False)),
        ("secret", "acme", "tls-b", "a.shop.example"),
        ("secret", "acme", "tls-a", None),
        ("secret", "acme", "tls-a", "www.acme.example"),
        ("endpoints", "acme", "web", ["192.0.2.11"]),
        ("gone", one.ref),
    ]
    handed: list[tuple[Translation, Translation]] = []
    for change in steps:
        if change[0] == "gone":
            del cloud.objects[change[1]]
        else:
            apply(cloud, change, pems)
        world = cloud.world()
        kept = cache.translate(world, list(cloud.slices.values()), [SHARED])
        fresh = translate(world, list(cloud.slices.values()), [SHARED])
        assert (kept.config, kept.results) == (fresh.config, fresh.results), change
        handed.append((kept, fresh))
    assert cache.rebuilt == {"tenant-acme"}
    # A translation handed out stays as it was while the kept merge changes.
    for kept, fresh in handed:
        assert (kept.config, kept.results) == (fresh.config, fresh.results)


def test_a_change_in_one_tenant_translates_that_tenant_only(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    for t in TENANT_NAMES:
        apply(cloud, ("put", _ingress(t, "one", 0, 1, "web", None, False)), pems)
        apply(cloud, ("endpoints", t, "web", ["192.0.2.11"]), pems)
    cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])
    assert cache.rebuilt == {"tenant-acme", "tenant-bolt"}

    apply(cloud, ("endpoints", "bolt", "web", ["192.0.2.71"]), pems)
    cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])
    assert (cache.vetted, cache.rebuilt) == (set(), {"tenant-bolt"})  # endpoints: not vetted

    apply(cloud, ("put", _ingress("acme", "two", 1, 2, "web", None, False)), pems)
    cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])
    assert cache.rebuilt == {"tenant-acme"}

    cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])
    assert (cache.vetted, cache.rebuilt) == (set(), set())


def test_an_endpoints_only_change_builds_that_services_backend_only(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    apply(cloud, ("put", _ingress("acme", "one", 0, 1, "web", None, False)), pems)
    apply(cloud, ("put", _gateway("acme", 0, None, None, False)), pems)
    apply(cloud, ("put", _route("acme", "two", 3, 2, "api")), pems)
    apply(cloud, ("endpoints", "acme", "web", ["192.0.2.11"]), pems)
    apply(cloud, ("endpoints", "acme", "api", ["192.0.2.11"]), pems)
    before = translate_kept(cache, cloud)

    apply(cloud, ("endpoints", "acme", "web", ["192.0.2.11", "192.0.2.12"]), pems)
    after = translate_kept(cache, cloud)
    assert cache.endpoints_only == {"tenant-acme"}
    assert after.config == translate(cloud.world(), list(cloud.slices.values()), [SHARED]).config
    # The routes and the other Service's backend are the same objects (the render's
    # comparison is an identity check), the results too.
    routes = zip(after.config.http_routes, before.config.http_routes, strict=True)
    assert len(after.config.http_routes) == 2 and all(a is b for a, b in routes)
    backends = zip(after.config.backends, before.config.backends, strict=True)
    changed = [a for a, b in backends if a is not b]
    assert [b.owner.name for b in changed] == ["web"]
    assert all(after.results[ref] is r for ref, r in before.results.items())


def test_an_endpoints_change_that_changes_more_than_a_backend_builds_the_tenant_again(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    apply(cloud, ("put", _gateway("acme", 0, None, None, False)), pems)
    apply(cloud, ("put", _route("acme", "two", 3, 2, "api")), pems)
    apply(cloud, ("endpoints", "acme", "api", ["192.0.2.11"]), pems)
    assert translate_kept(cache, cloud).config.http_routes  # the route is served

    for change in (
        ("endpoints", "acme", "api", ["192.0.2.71"]),  # outside its networks: noted
        ("endpoints", "acme", "api", []),  # the Service gone: its requests answered 500
    ):
        apply(cloud, change, pems)
        kept = translate_kept(cache, cloud)
        assert (cache.rebuilt, cache.endpoints_only) == ({"tenant-acme"}, set()), change
        fresh = translate(cloud.world(), list(cloud.slices.values()), [SHARED])
        assert (kept.config, kept.results) == (fresh.config, fresh.results), change


def test_a_hostname_another_tenant_claims_vets_both_tenants_again(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    apply(cloud, ("put", _ingress("acme", "one", 1, 1, "web", None, False)), pems)  # a.shop
    apply(cloud, ("put", _ingress("bolt", "one", 0, 2, "web", None, False)), pems)
    cache.translate(cloud.world(), [], [SHARED])

    older = _ingress("bolt", "one", 1, 0, "web", None, False)  # a.shop.example, older
    apply(cloud, ("put", older), pems)
    kept = cache.translate(cloud.world(), [], [SHARED])
    assert cache.vetted == {"tenant-acme", "tenant-bolt"}
    taken = kept.results[_ingress("acme", "one", 1, 1, "web", None, False).ref]
    assert [r.rule.value for r in taken.refusals] == ["HostnameTaken"]


def by_namespace(results: dict[ObjectRef, Any]) -> dict[str, dict[ObjectRef, Any]]:
    out: dict[str, dict[ObjectRef, Any]] = {}
    for ref, result in results.items():
        out.setdefault(ref.namespace or "", {})[ref] = result
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(changes, min_size=1, max_size=12))
def test_what_a_translation_changed_is_every_namespace_whose_results_changed(
    pems: dict[str, tuple[bytes, bytes]], steps: list[tuple[Any, ...]]
) -> None:
    cloud, cache = Cloud(), TranslationCache()
    held: dict[str, dict[ObjectRef, Any]] = {}  # the results as the changes left them
    for change in steps:
        apply(cloud, change, pems)
        kept = cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])
        for namespace, results in kept.changed.items():
            held[namespace] = dict(results)
        fresh = by_namespace(
            translate(cloud.world(), list(cloud.slices.values()), [SHARED]).results
        )
        assert {ns: r for ns, r in held.items() if r} == fresh, change


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(changes, min_size=1, max_size=12))
def test_refused_objects_counted_per_change_equal_the_count_from_scratch(
    pems: dict[str, tuple[bytes, bytes]], steps: list[tuple[Any, ...]]
) -> None:
    cloud, cache, refused = Cloud(), TranslationCache(), RefusedObjects()
    for change in steps:
        apply(cloud, change, pems)
        before = refused.by_tenant()
        moved = refused.update(translate_kept(cache, cloud).changed)
        fresh = refused_of(translate(cloud.world(), list(cloud.slices.values()), [SHARED]).results)
        assert refused.by_tenant() == fresh, change
        assert moved == {t for t in {*before, *fresh} if before.get(t) != fresh.get(t)}, change


def test_a_deleted_tenants_refused_objects_are_no_longer_counted(
    pems: dict[str, tuple[bytes, bytes]],
) -> None:
    cloud, cache, refused = Cloud(), TranslationCache(), RefusedObjects()
    apply(cloud, ("put", _ingress("acme", "one", 1, 0, "web", None, False)), pems)  # a.shop
    apply(cloud, ("put", _ingress("bolt", "one", 1, 1, "web", None, False)), pems)  # taken
    assert refused.update(translate_kept(cache, cloud).changed) == {"bolt"}
    assert refused.of("bolt") == {str(_ingress("bolt", "one", 1, 1, "web", None, False).ref)}

    apply(cloud, ("tenant", "bolt", False), pems)
    kept = translate_kept(cache, cloud)
    assert kept.changed["tenant-bolt"] == {}  # nobody's now: no result
    assert refused.update(kept.changed) == {"bolt"}
    assert refused.by_tenant() == {}

    apply(cloud, ("endpoints", "acme", "web", ["192.0.2.11"]), pems)
    kept = translate_kept(cache, cloud)
    assert set(kept.changed) == {"tenant-acme"}  # the change's namespace only
    assert refused.update(kept.changed) == set()


def translate_kept(cache: TranslationCache, cloud: Cloud) -> Translation:
    return cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED])


def test_a_request_change_translates_its_tenant_only(pems: dict[str, tuple[bytes, bytes]]) -> None:
    cloud, cache = Cloud(), TranslationCache()
    for t in TENANT_NAMES:
        apply(cloud, ("put", _ingress(t, "one", 0, 1, "web", None, False)), pems)

    def translate_kept() -> Translation:
        requests = list(cloud.requests.values())
        return cache.translate(cloud.world(), list(cloud.slices.values()), [SHARED], requests)

    translate_kept()
    apply(cloud, ("request", _request("bolt", "one", 1, "198.51.100.20", False, True)), pems)
    kept = translate_kept()
    assert cache.rebuilt == {"tenant-bolt"}
    (result,) = kept.load_balancers.values()
    assert result.served == ["198.51.100.20:5432/TCP"]
    translate_kept()
    assert (cache.vetted, cache.rebuilt) == (set(), set())
    apply(cloud, ("unrequest", 0), pems)
    assert translate_kept().load_balancers == {} and cache.rebuilt == {"tenant-bolt"}
