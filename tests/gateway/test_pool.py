"""The backend pool and the plan (issue 37): a simple virtual host (an exact host whose one
Prefix '/' rule sends to one backend) added, removed or sent elsewhere is runtime actions
only: its backend takes a spare pool section (`set server`), its host a fast map row
(`add map`, `set map`, `del map`), its certificate the crt-list's runtime path. Anything
else structural reloads, with its reason; a pool with no spare left grows, one reload.

The property test replays changes through the plan against a model of HAProxy's runtime
state: after runtime-only applies, HAProxy holds what the files on disk say, and those
files are what a rendering from scratch (the same config and sticky state) writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck as Health
from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.gateway import plan, pool, render, slots
from teapot_lb.gateway.config import (
    Backend,
    Certificate,
    GatewayConfig,
    HealthCheck,
    HTTPRoute,
    Protocol,
)
from teapot_lb.gateway.haproxy import named_by_backend
from teapot_lb.gateway.plan import (
    AddCertificate,
    AddMapEntry,
    DelMapEntry,
    RemoveCertificate,
    ServerState,
    SetCertificate,
    SetServer,
)
from teapot_lb.gateway.runtime import StatRow

from .builders import E, P, backend, ingress, listener

PATHS = render.Paths(Path("/run/gw-pool"))
FAST = str(PATHS.map("web", "fast"))
FAST_TLS = str(PATHS.map("tls", "fast"))
PEMS = {render.DEFAULT_CERTIFICATE: "own", "www": "PEM-www", "a": "PEM-a"}
ADDRESSES = ("198.51.100.2", "198.51.100.3", "198.51.100.4")

# The gateway before each test's change: a simple host (www) and one with two paths (shop).
BASE_ROUTES = (
    ingress("www", "www.example", [(P, "/", "www")], ("web", "tls")),
    ingress("shop", "shop.example", [(P, "/", "shop"), (E, "/cart", "shop")], ("web", "tls")),
)
BASE_BACKENDS = (backend("www", (ADDRESSES[0], 80)), backend("shop", (ADDRESSES[1], 80)))


def simple(name: str) -> HTTPRoute:
    """An Ingress of the simple shape: host <name>.example, Prefix '/', to backend <name>."""
    return ingress(name, f"{name}.example", [(P, "/", name)], ("web", "tls"))


def config(
    routes: tuple[HTTPRoute, ...] = (),
    backends: tuple[Backend, ...] = (),
    certificates: tuple[str, ...] = ("www",),
) -> GatewayConfig:
    """The base config with more routes, backends, and the TLS listener's certificates
    (certificate <name> covers <name>.example)."""
    return GatewayConfig(
        listeners=(
            listener("web", 80),
            listener("tls", 443, Protocol.HTTPS, certificates=certificates),
        ),
        certificates=tuple(
            Certificate(name=c, hostnames=(f"{c}.example",), cert_file="/x.pem")
            for c in certificates
        ),
        backends=(*BASE_BACKENDS, *backends),
        http_routes=(*BASE_ROUTES, *routes),
    )


def rendered(cfg: GatewayConfig, running: render.Rendered | None = None) -> render.Rendered:
    """The next rendering, as the HAProxy driver makes it (sticky slots, pool, crt-lists)."""
    return plan.step(cfg, running, PATHS, PEMS)[0]


def test_a_new_simple_host_to_a_new_backend_is_servers_set_then_its_map_rows() -> None:
    old = rendered(config())
    new = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)), old)
    change = plan.plan(old, new)
    section = new.pool.ids()["a"]
    assert not change.reload
    assert change.actions == (
        SetServer(section, "s1", ServerState.READY, ADDRESSES[2], 8080),
        AddMapEntry(FAST_TLS, "a.example", section),
        AddMapEntry(FAST, "a.example", section),
    )
    assert section in old.servers and section not in old.pool.ids().values()  # a spare


def test_a_new_simple_tls_host_loads_its_certificate_before_it_is_routed() -> None:
    old = rendered(config())
    cfg = config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),), ("www", "a"))
    change = plan.plan(old, rendered(cfg, old))
    assert not change.reload
    assert [type(a).__name__ for a in change.actions] == [
        "SetServer", "AddCertificate", "AddMapEntry", "AddMapEntry", "AddMapEntry",
    ]  # fmt: skip
    added = change.actions[1]
    assert isinstance(added, AddCertificate) and added.line.endswith(" a.example")
    assert change.actions[2] == AddMapEntry(str(PATHS.map("tls", "certs")), "a.example", "a")


def test_a_removed_simple_host_is_unrouted_then_its_section_goes_back_to_the_spares() -> None:
    with_a = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)))
    section = with_a.pool.ids()["a"]
    without = rendered(config(), with_a)
    change = plan.plan(with_a, without)
    assert not change.reload
    assert change.actions == (
        DelMapEntry(FAST_TLS, "a.example"),
        DelMapEntry(FAST, "a.example"),
        SetServer(section, "s1", ServerState.MAINT),
    )
    index = int(section.removeprefix(pool.POOL_PREFIX))
    assert without.pool.sections[index].backend is None


def test_a_simple_host_sent_to_another_backend_is_its_map_rows_replaced() -> None:
    cfg = config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),))
    old = rendered(cfg)
    moved = ingress("a", "a.example", [(P, "/", "www")], ("web", "tls"))
    change = plan.plan(old, rendered(config((moved,)), old))
    www = old.pool.ids()["www"]
    assert not change.reload
    assert change.actions == (
        AddMapEntry(FAST_TLS, "a.example", www, replace=True),
        AddMapEntry(FAST, "a.example", www, replace=True),
        SetServer(old.pool.ids()["a"], "s1", ServerState.MAINT),
    )


def test_a_simple_host_added_or_removed_renders_no_frontend_again() -> None:
    old = rendered(config())
    with_a = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)), old)
    without = rendered(config(), with_a)
    assert old.parts is not None and with_a.parts is not None and without.parts is not None
    for name in ("web", "tls"):
        lines = old.parts.frontends[name].made.lines
        assert with_a.parts.frontends[name].made.lines is lines
        assert without.parts.frontends[name].made.lines is lines
    assert "a.example" in with_a.route_maps[FAST] and "a.example" not in without.route_maps[FAST]


def test_a_change_leaves_the_slots_of_every_section_it_did_not_touch_as_they_were() -> None:
    # (an empty slot holds the change that freed it, not a count that moves each change:
    # the slots of the backends and spares a change does not touch stay the same objects,
    # and neither the renderer nor the plan looks at them again)
    old = rendered(config())
    new = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)), old)
    taken = new.pool.ids()["a"]
    assert new.change == old.change + 1
    for section, held in old.servers.items():
        if section != taken:
            assert new.servers[section] is held, section
    assert new.slots["www"] is old.slots["www"]
    assert new.servers[taken] is not old.servers[taken]


def test_a_host_with_two_paths_reloads_naming_the_frontends() -> None:
    old = rendered(config())
    two = ingress("b", "b.example", [(P, "/", "b"), (E, "/x", "b")], ("web", "tls"))
    change = plan.plan(old, rendered(config((two,), (backend("b", (ADDRESSES[2], 80)),)), old))
    assert change.reload
    assert change.reasons == ("frontend fe_web changed", "frontend fe_tls changed")


def test_a_backend_with_a_health_check_has_its_own_section_and_its_addition_reloads() -> None:
    old = rendered(config())
    checked = backend("a", (ADDRESSES[2], 80), health_check=HealthCheck(http_path="/healthz"))
    new = rendered(config((simple("a"),), (checked,)), old)
    change = plan.plan(old, new)
    assert "a" not in new.pool.ids()
    assert change.reload and change.reasons == ("backend be_a added",)


def test_the_pool_with_no_spare_left_grows_in_one_reload_and_the_next_addition_needs_none() -> None:
    old = rendered(config())
    spares = len(old.pool.sections) - old.pool.used
    assert spares >= pool.POOL_STEP
    names = [f"n{i}" for i in range(spares + 1)]
    routes = tuple(simple(n) for n in names)
    backends = tuple(backend(n, (ADDRESSES[0], 9000 + i)) for i, n in enumerate(names))
    grown = rendered(config(routes, backends), old)
    change = plan.plan(old, grown)
    size = pool.pool_size(old.pool.used + len(names))
    assert change.reload
    assert change.reasons == (
        f"backend pool grown from {len(old.pool.sections)} to {size} sections",
    )
    more = rendered(
        config((*routes, simple("a")), (*backends, backend("a", (ADDRESSES[2], 1)))), grown
    )
    assert not plan.plan(grown, more).reload


def test_a_section_freed_by_a_change_is_not_taken_by_a_backend_added_in_the_same_change() -> None:
    with_a = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)))
    with_c = rendered(config((simple("c"),), (backend("c", (ADDRESSES[2], 8080)),)), with_a)
    # (the servers of a's section may still hold idle connections to a's endpoints)
    assert with_c.pool.ids()["c"] != with_a.pool.ids()["a"]
    assert not plan.plan(with_a, with_c).reload


def test_a_backend_keeps_its_section_while_others_come_and_go() -> None:
    first = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 1)),)))
    routes = (simple("a"), simple("b"))
    second = rendered(
        config(routes, (backend("a", (ADDRESSES[2], 1)), backend("b", (ADDRESSES[1], 1)))), first
    )
    third = rendered(config((simple("b"),), (backend("b", (ADDRESSES[1], 1)),)), second)
    assert first.pool.ids()["a"] == second.pool.ids()["a"]
    assert second.pool.ids()["b"] == third.pool.ids()["b"]
    assert first.pool.ids()["www"] == third.pool.ids()["www"]


def test_a_host_added_under_a_certificate_already_offered_is_a_line_of_its_own() -> None:
    # (a tenant's certificate is offered for the names its routes ask for only)
    def shared(*names: str) -> GatewayConfig:
        cfg = config(
            tuple(simple(n) for n in names), tuple(backend(n, (ADDRESSES[0], 1)) for n in names)
        )
        cert = Certificate(
            name="www",
            hostnames=("www.example", *(f"{n}.example" for n in names)),
            cert_file="/x.pem",
        )
        return cfg.model_copy(update={"certificates": (cert,)})

    old = rendered(shared("a"))
    new, change = plan.step(shared("a", "b"), old, PATHS, PEMS)
    www = str(PATHS.certificate("www"))
    assert not change.reload
    assert (
        AddCertificate(www, "PEM-www", str(PATHS.crt_list("tls")), f"{www} b.example", True)
        in change.actions
    )
    assert new.crt_lists[str(PATHS.crt_list("tls"))].splitlines()[1:] == [
        f"{www} www.example a.example", f"{www} b.example",
    ]  # fmt: skip
    # A name taken away from a certificate with two lines: HAProxy cannot be told which
    # line to delete (it numbers those added at run time its own way): a reload, after
    # which the certificate has one line again.
    gone, change = plan.step(shared("a"), new, PATHS, PEMS)
    assert change.reload and change.reasons == (f"crt-list {PATHS.crt_list('tls')} changed",)
    assert gone.crt_lists == old.crt_lists
    # A reload for another reason (a host with two paths) makes its lines one again.
    two = ingress("c", "c.example", [(P, "/", "www"), (E, "/x", "www")], ("web", "tls"))
    more = shared("a", "b")
    more = more.model_copy(update={"http_routes": (*more.http_routes, two)})
    again, change = plan.step(more, new, PATHS, PEMS)
    assert change.reload
    assert again.crt_lists[str(PATHS.crt_list("tls"))].splitlines()[1:] == [
        f"{www} www.example a.example b.example"
    ]


def test_a_new_backend_takes_a_spare_with_slots_enough_for_its_endpoints() -> None:
    small = pool.Section(None, (slots.Slot(None),) * 4)
    large = pool.Section(None, (slots.Slot(None),) * 8)
    three = backend("a", *((ADDRESSES[i], 80) for i in range(3)))
    placed, table = pool.place([three], {}, pool.Pool((small, large)))
    assert [s.backend for s in placed.sections] == [None, "a"]
    assert len(table["a"]) == 8


def test_stats_of_a_pool_section_are_its_backends_and_a_spares_are_left_out() -> None:
    r = rendered(config((simple("a"),), (backend("a", (ADDRESSES[2], 8080)),)))
    section = r.pool.ids()["a"]
    spare = next(pool.pool_id(i) for i, s in enumerate(r.pool.sections) if s.backend is None)
    rows = [StatRow(p, "BACKEND", "UP", 1, 0, 0, 0, "") for p in (section, spare, "be_db")]
    assert [row.proxy for row in named_by_backend(rows, r.pool)] == ["be_a", "be_db"]


# --- the property: runtime-only applies leave HAProxy as the files say ---------------------


def runtime_state(r: render.Rendered) -> dict[str, Any]:
    """What HAProxy serves once it has read `r`'s files: map rows, each server's endpoint
    (in maintenance: none that gets traffic) and the crt-lists' lines."""
    maps = {p: dict(line.split(" ", 1) for line in text.splitlines())
            for p, text in (*r.route_maps.items(), *r.certificate_maps.items())}  # fmt: skip
    servers: dict[tuple[str, str], tuple[Any, ...]] = {}
    for section, held in r.servers.items():
        for i, slot in enumerate(held):
            e = slot.endpoint
            ready = e is not None and e.ready
            key = (str(e.address), e.port) if e is not None else None
            servers[(section, render.server_name(i))] = (key, ready)
    crt = {p: set(text.splitlines()) for p, text in r.crt_lists.items()}
    return {"maps": maps, "servers": servers, "crt": crt}


def served(state: dict[str, Any]) -> dict[str, Any]:
    """The state as traffic sees it: a server in maintenance gets none, whatever its
    address."""
    servers = {k: (key if ready else None, ready) for k, (key, ready) in state["servers"].items()}
    return {**state, "servers": servers}


def run(state: dict[str, Any], actions: tuple[plan.RuntimeAction, ...]) -> dict[str, Any]:
    """HAProxy's runtime API, as a model: each action on the state."""
    maps = {p: dict(rows) for p, rows in state["maps"].items()}
    servers = dict(state["servers"])
    crt = {p: set(lines) for p, lines in state["crt"].items()}
    for a in actions:
        if isinstance(a, SetServer):
            key, _ = servers[(a.backend, a.server)]
            if a.address is not None:
                key = (a.address, a.port)
            servers[(a.backend, a.server)] = (key, a.state is ServerState.READY)
        elif isinstance(a, AddMapEntry):
            assert a.replace == (a.key in maps[a.path])  # (`add map` would add a second row)
            maps[a.path][a.key] = a.value
        elif isinstance(a, DelMapEntry):
            del maps[a.path][a.key]
        elif isinstance(a, AddCertificate):
            crt[a.crt_list].add(a.line)
        elif isinstance(a, RemoveCertificate):
            crt[a.crt_list] = {x for x in crt[a.crt_list] if x.split()[0] != a.path}
        else:
            assert isinstance(a, SetCertificate)
    return {"maps": maps, "servers": servers, "crt": crt}


NAMES = ("a", "b", "c", "d")
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(NAMES), st.sampled_from(("own", "www", "shop"))),
        st.tuples(st.just("remove"), st.sampled_from(NAMES)),
        st.tuples(
            st.just("endpoints"),
            st.sampled_from(NAMES),
            st.lists(st.sampled_from(ADDRESSES), min_size=0, max_size=3, unique=True),
        ),
        st.tuples(st.just("certificate"), st.sampled_from(NAMES), st.booleans()),
        st.tuples(st.just("two paths"), st.sampled_from(NAMES)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[Health.too_slow])
@given(changes=steps)
def test_runtime_only_applies_leave_haproxy_as_a_rendering_from_scratch_says(
    changes: list[tuple[Any, ...]],
) -> None:
    hosts: dict[str, tuple[str, bool]] = {}  # name -> (backend, two paths)
    endpoints: dict[str, tuple[str, ...]] = {n: (ADDRESSES[0],) for n in NAMES}
    certs: set[str] = set()

    def cfg() -> GatewayConfig:
        routes = []
        for name, (to, two) in sorted(hosts.items()):
            paths = [(P, "/", to), *([(E, "/x", to)] if two else [])]
            routes.append(ingress(name, f"{name}.example", paths, ("web", "tls")))
        own = sorted({to for to, _ in hosts.values()} & set(NAMES))
        bes = tuple(backend(n, *((a, 80) for a in endpoints[n])) for n in own)
        return config(tuple(routes), bes, ("www", *sorted(certs)))

    running = rendered(cfg())
    haproxy = runtime_state(running)
    for change in changes:
        kind, name = change[0], change[1]
        to = name if kind == "add" and change[2] == "own" else (change[2] if kind == "add" else "")
        # A simple host new to the gateway, to a backend whose endpoints fit a spare's slots:
        reload_free = kind == "add" and name not in hosts and len(endpoints.get(to, ())) <= 2
        if kind == "add":
            hosts[name] = (to, False)
        elif kind == "remove":
            hosts.pop(name, None)
        elif kind == "endpoints":
            endpoints[name] = tuple(change[2])
        elif kind == "certificate":
            (certs.add if change[2] else certs.discard)(name)
        elif name in hosts:
            hosts[name] = (hosts[name][0], True)
        config_now = cfg()
        new, step = plan.step(config_now, running, PATHS, PEMS)
        assert not (reload_free and step.reload), step.reasons
        # (a reload reads the files)
        haproxy = runtime_state(new) if step.reload else run(haproxy, step.actions)
        assert served(haproxy) == served(runtime_state(new))
        table = slots.assign(config_now, running.slots, new.change)  # (every backend's again)
        held = None if step.reload else running.crt_lists
        scratch = render.render(
            config_now, table, PATHS, PEMS, None, running.pool, held, new.change
        )
        assert new.files == scratch.files and new.structure == scratch.structure
        running = new
