"""Incremental rendering (issue 37): `render.render(..., previous)` reuses the parts of the
previous rendering whose inputs did not change (an HTTP frontend, a backend section), and
for any sequence of changes gives exactly the rendering made from scratch: the same files,
structure, certificates, crt-lists and maps, so the same plan (reload or runtime actions).

The configs are built the way the translation hands them over: the routes, backends and
certificates a change does not touch are the same objects as before (a reused part), and a
change may also give an equal copy (a tenant built again with nothing different).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teapot_lb.gateway import plan, render, slots
from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Certificate,
    GatewayConfig,
    HTTPRoute,
    PathType,
    Protocol,
    TLSRoute,
)

from .builders import backend, ingress, listener

PATHS = render.Paths(Path("/run/gw-incremental"))
HOSTS = ("www.acme.example", "api.acme.example", "*.shop.example", "shop.example", None)
BACKENDS = ("web", "api", "db")
CERTS = ("acme", "shop")
CERT_HOSTS = {"acme": ("www.acme.example", "api.acme.example"), "shop": ("*.shop.example",)}
ADDRESSES = ("198.51.100.2", "198.51.100.3", "198.51.100.4")


@dataclass
class Cloud:
    """What the gateway is handed, part by part (unchanged parts keep their objects)."""

    routes: dict[str, HTTPRoute] = field(default_factory=dict)
    backends: dict[str, Backend] = field(
        default_factory=lambda: {b: backend(b, (ADDRESSES[0], 8080)) for b in BACKENDS}
    )
    certificates: dict[str, Certificate] = field(default_factory=dict)
    pems: dict[str, str] = field(default_factory=lambda: {render.DEFAULT_CERTIFICATE: "own"})
    passthrough: TLSRoute | None = None
    dedicated: bool = False
    h2: bool = True

    def config(self) -> GatewayConfig:
        listeners = [
            listener("web", 80),
            listener(
                "tls",
                443,
                Protocol.HTTPS,
                certificates=tuple(sorted(self.certificates)),
                alpn=("h2", "http/1.1") if self.h2 else ("http/1.1",),
            ),
        ]
        if self.passthrough is not None:
            listeners.append(listener("pass", 443, Protocol.TLS_PASSTHROUGH))
        if self.dedicated:
            listeners.append(listener("own", 80, address="198.51.100.9"))
        return GatewayConfig(
            listeners=tuple(listeners),
            certificates=tuple(self.certificates[n] for n in sorted(self.certificates)),
            backends=tuple(self.backends[n] for n in sorted(self.backends)),
            http_routes=tuple(self.routes[n] for n in sorted(self.routes)),
            tls_routes=(self.passthrough,) if self.passthrough is not None else (),
        )


def _route(name: str, host: int, path: str, to: str, https: bool, own: bool) -> HTTPRoute:
    listeners = ("web", "tls") if https else ("web",)
    if own:
        listeners += ("own",)
    kind = PathType.EXACT if path.endswith("x") else PathType.PREFIX
    return ingress(name, HOSTS[host], [(kind, path, to)], listeners=listeners)


def apply(cloud: Cloud, change: tuple[Any, ...]) -> None:
    match change:
        case ("route", name, route):
            cloud.routes[name] = route
        case ("delete", name):
            cloud.routes.pop(name, None)
        case ("copy", name):  # built again, nothing different
            if name in cloud.routes:
                cloud.routes[name] = cloud.routes[name].model_copy(deep=True)
        case ("endpoints", name, addresses):
            eps = [(a, 8080) for a in addresses]
            cloud.backends[name] = backend(name, *eps)
        case ("certificate", name, present):
            if present:
                cloud.certificates[name] = Certificate(
                    name=name, hostnames=CERT_HOSTS[name], cert_pem="c", key_pem="k"
                )
                cloud.pems.setdefault(name, f"{name} 0")
            else:
                cloud.certificates.pop(name, None)
        case ("rotate", name, serial):
            cloud.pems[name] = f"{name} {serial}"
        case ("passthrough", on):
            cloud.passthrough = (
                TLSRoute(
                    listeners=("pass",),
                    hostnames=("db.shop.example",),
                    backends=(BackendRef(backend="db"),),
                )
                if on
                else None
            )
        case ("h2", on):
            cloud.h2 = on
        case ("dedicated", on):
            cloud.dedicated = on
            if not on:  # its routes go with it (the translation builds them again)
                for name, route in list(cloud.routes.items()):
                    if "own" in route.listeners:
                        kept = tuple(x for x in route.listeners if x != "own")
                        cloud.routes[name] = route.model_copy(update={"listeners": kept})


names = st.sampled_from(("one", "two", "three", "four"))
changes = st.one_of(
    st.tuples(
        st.just("route"),
        names,
        st.builds(
            _route,
            names,
            st.integers(0, len(HOSTS) - 1),
            st.sampled_from(("/", "/a", "/a/b", "/ax")),
            st.sampled_from(("web", "api")),
            st.booleans(),
            st.booleans(),
        ),
    ),
    st.tuples(st.just("delete"), names),
    st.tuples(st.just("copy"), names),
    st.tuples(
        st.just("endpoints"),
        st.sampled_from(BACKENDS),
        st.lists(st.sampled_from(ADDRESSES), max_size=3, unique=True),
    ),
    st.tuples(st.just("certificate"), st.sampled_from(CERTS), st.booleans()),
    st.tuples(
        st.just("rotate"), st.sampled_from((*CERTS, render.DEFAULT_CERTIFICATE)), st.integers(1, 3)
    ),
    st.tuples(st.just("passthrough"), st.booleans()),
    st.tuples(st.just("dedicated"), st.booleans()),
    st.tuples(st.just("h2"), st.booleans()),
)


def _same(a: render.Rendered, b: render.Rendered) -> None:
    assert a.files == b.files
    assert a.structure == b.structure
    assert a.slots == b.slots
    assert a.certificates == b.certificates
    assert a.crt_lists == b.crt_lists
    assert a.certificate_maps == b.certificate_maps
    assert a.route_maps == b.route_maps
    assert a.pool == b.pool
    assert a.servers == b.servers


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(changes, min_size=1, max_size=15))
def test_changes_rendered_incrementally_render_as_from_scratch(
    steps: list[tuple[Any, ...]],
) -> None:
    cloud = Cloud()
    cloud.routes["zero"] = _route("zero", 0, "/", "web", True, False)
    table = slots.assign(cloud.config())
    running = render.render(cloud.config(), table, PATHS, cloud.pems)
    for change in steps:
        apply(cloud, change)
        config = cloud.config()
        number = running.change + 1
        # The slots of the backends that are the same objects kept as they are (by
        # identity), as slots assigned again from the last table say.
        table = slots.assign(config, running.slots, number, running.backends)
        again = slots.assign(config, running.slots, number)
        assert table == again
        # (every other change with the crt-lists HAProxy holds: a certificate's new names
        # in a line of their own, the offers kept from the last rendering's lines)
        held = running.crt_lists if number % 2 else None
        incremental = render.render(
            config, table, PATHS, cloud.pems, running, running.pool, held, number
        )
        scratch = render.render(config, again, PATHS, cloud.pems, None, running.pool, held, number)
        _same(incremental, scratch)
        assert plan.plan(running, incremental) == plan.plan(running, scratch)
        running = incremental


def test_an_endpoint_change_reuses_every_frontend_and_every_other_backend() -> None:
    cloud = Cloud()
    cloud.routes["zero"] = _route("zero", 0, "/", "web", True, False)
    cloud.routes["one"] = _route("one", 1, "/a", "api", True, False)
    before = render.render(cloud.config(), slots.assign(cloud.config()), PATHS, cloud.pems)
    apply(cloud, ("endpoints", "api", [ADDRESSES[1]]))
    config = cloud.config()
    table = slots.assign(config, before.slots)
    after = render.render(config, table, PATHS, cloud.pems, before, before.pool)
    assert before.parts is not None and after.parts is not None
    for name, frontend in after.parts.frontends.items():
        assert frontend.made is before.parts.frontends[name].made  # (not rendered again)
    ids = after.pool.ids()
    assert after.parts.backends[ids["web"]] is before.parts.backends[ids["web"]]
    assert after.parts.backends[ids["api"]] is not before.parts.backends[ids["api"]]
    change = plan.plan(before, after)
    assert not change.reload and change.actions


def test_a_route_change_renders_the_frontends_again() -> None:
    cloud = Cloud()
    cloud.routes["zero"] = _route("zero", 0, "/", "web", True, False)
    before = render.render(cloud.config(), slots.assign(cloud.config()), PATHS, cloud.pems)
    apply(cloud, ("route", "one", _route("one", 1, "/", "api", False, False)))
    config = cloud.config()
    table = slots.assign(config, before.slots)
    after = render.render(config, table, PATHS, cloud.pems, before, before.pool)
    assert after.parts is not None and before.parts is not None
    assert after.parts.frontends["web"] is not before.parts.frontends["web"]
    assert "api.acme.example" in after.files[str(PATHS.map("web", "fast"))]
