"""The renderer and the plan: valid HAProxy configuration, what needs a reload and what
goes over the runtime API."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from needs import require_binary
from teapot_lb.gateway import default_certificate, explain, nginx, plan, render, runtime, slots
from teapot_lb.gateway.config import (
    Certificate,
    Endpoint,
    GatewayConfig,
    HeaderModifier,
    HeaderValue,
    HTTPRule,
    Protocol,
    Redirect,
    StreamRoute,
    TLSRoute,
)
from teapot_lb.gateway.haproxy import load_pems, relocated, with_certificate_names
from teapot_lb.gateway.plan import (
    AddCertificate,
    AddMapEntry,
    DelMapEntry,
    RemoveCertificate,
    ServerState,
    SetCertificate,
    SetServer,
)
from teapot_lb.lab.gateway_lab import make_certificate

from .builders import E, P, backend, ingress, listener

PATHS = render.Paths(Path("/run/gw-test"))


def _config(endpoints: tuple[tuple[str, int], ...] = (("198.51.100.2", 8080),)) -> GatewayConfig:
    route = ingress("web", "a.example", [(P, "/", "a"), (E, "/x'y %z", "a")], ("web", "tls"))
    rule = HTTPRule(
        backends=route.rules[0].backends,
        request_headers=HeaderModifier(set=(HeaderValue(name="X-Pct", value="100%"),)),
        redirect=None,
    )
    route = route.model_copy(update={"rules": (*route.rules, rule)})
    return GatewayConfig(
        listeners=(
            listener(),
            listener("tls", 443, Protocol.HTTPS, certificates=("a",)),
            listener("pt", 8443, Protocol.TLS_PASSTHROUGH),
            listener("tcp", 5432, Protocol.TCP),
        ),
        certificates=(Certificate(name="a", hostnames=("a.example",), cert_file="/x.pem"),),
        backends=(
            backend("a", *endpoints),
            backend("p", ("198.51.100.3", 443)),
            backend("db", ("198.51.100.4", 5432), proxy_protocol=True),
        ),
        http_routes=(route,),
        tls_routes=(
            TLSRoute(listeners=("pt",), hostnames=("*.p.example",), backends=({"backend": "p"},)),
        ),
        tcp_routes=(StreamRoute(listeners=("tcp",), backends=({"backend": "db"},)),),
    )


def _render(
    cfg: GatewayConfig, previous: render.Rendered | None = None, pems: dict[str, str] | None = None
) -> render.Rendered:
    if previous is None:
        return render.render(cfg, slots.assign(cfg), PATHS, pems or {"a": "PEM-1"})
    number = previous.change + 1
    table = slots.assign(cfg, previous.slots, number)
    pems = pems or {"a": "PEM-1"}
    return render.render(cfg, table, PATHS, pems, pool=previous.pool, change=number)


def test_the_rendered_configuration_is_accepted_by_haproxy(tmp_path: Path) -> None:
    require_binary("haproxy", "openssl")
    paths = render.Paths(tmp_path)
    cfg = _config()
    # real certificates are needed for -c: the gateway's own kind will do for both
    pems = {
        "a": default_certificate.generate(),
        render.DEFAULT_CERTIFICATE: default_certificate.generate(),
    }
    out = render.render(cfg, slots.assign(cfg), paths, pems)
    for path, text in {**out.files, **out.certificates}.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    check = subprocess.run(
        ["haproxy", "-c", "-f", str(paths.config)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("base", ["/run/gw-test", "/run/it's here"])
def test_a_rendering_moved_to_the_staging_directory_is_the_rendering_made_there(
    base: str,
) -> None:
    cfg, pems = _config(), {"a": "PEM-1", render.DEFAULT_CERTIFICATE: "PEM-0"}
    into, to = render.Paths(Path(base)), render.Paths(Path(base) / "staging")
    there = render.render(cfg, slots.assign(cfg), to, pems)
    moved = relocated(render.render(cfg, slots.assign(cfg), into, pems), into, to)
    assert (moved.files, moved.certificates) == (there.files, there.certificates)


def test_quotes_and_percent_signs_cannot_escape_their_word() -> None:
    text = _render(_config()).files[str(PATHS.config)]
    assert "{ path -m str '/x'\\''y %z' }" in text
    assert "set-header X-Pct '100%%'" in text


def test_an_endpoint_change_is_a_runtime_action_not_a_reload() -> None:
    old = _render(_config())
    new = _render(_config((("198.51.100.2", 8080), ("198.51.100.5", 8080))), old)
    change = plan.plan(old, new)
    assert not change.reload
    # (backend a is sent to by HTTP routes only, with no health check: a pool section's)
    assert change.actions == (SetServer("pool_0", "s2", ServerState.READY, "198.51.100.5", 8080),)
    gone = _render(_config((("198.51.100.5", 8080),)), new)
    assert plan.plan(new, gone).actions == (SetServer("pool_0", "s1", ServerState.MAINT),)


def test_a_not_ready_endpoint_is_put_in_maintenance_in_place() -> None:
    old = _render(_config())
    cfg = _config()
    be = cfg.backends[0]
    cfg = cfg.model_copy(
        update={
            "backends": (
                be.model_copy(
                    update={
                        "endpoints": (Endpoint(address="198.51.100.2", port=8080, ready=False),)
                    }
                ),
                *cfg.backends[1:],
            )
        }
    )
    assert plan.plan(old, _render(cfg, old)).actions == (
        SetServer("pool_0", "s1", ServerState.MAINT),
    )


def test_outgrowing_the_slots_is_a_reload_naming_the_backend() -> None:
    old = _render(_config())
    many = tuple(("198.51.100.2", 9000 + i) for i in range(5))
    change = plan.plan(old, _render(_config(many), old))
    assert change.reload
    assert change.reasons == ("backend pool_0 (a) changed",)


def test_a_new_route_is_a_reload_and_a_new_certificate_pem_is_not() -> None:
    old = _render(_config())
    cfg = _config()
    route = cfg.http_routes[0]
    redirect = HTTPRule(redirect=Redirect(scheme="https", status_code=301))
    cfg = cfg.model_copy(
        update={"http_routes": (route.model_copy(update={"rules": (*route.rules, redirect)}),)}
    )
    change = plan.plan(old, _render(cfg, old))
    assert change.reload and change.reasons == (
        "frontend fe_web changed",
        "frontend fe_tls changed",
    )
    rotated = plan.plan(old, _render(_config(), old, {"a": "PEM-2"}))
    assert rotated == plan.Change(
        False, (), (SetCertificate(str(PATHS.certificate("a")), "PEM-2"),)
    )


def test_slots_are_sticky_and_a_slot_freed_by_this_change_is_taken_last() -> None:
    cfg = _config((("198.51.100.2", 1), ("198.51.100.3", 1)))
    first = slots.assign(cfg)
    # .2 leaves, .9 comes: .9 takes a slot never used, not .2's (whose idle connections
    # to .2 HAProxy would keep using after `set server addr`).
    cfg2 = _config((("198.51.100.3", 1), ("198.51.100.9", 1)))
    second = slots.assign(cfg2, first, 1)
    assert [s.key for s in second["a"]] == [None, ("198.51.100.3", 1), ("198.51.100.9", 1), None]
    assert second["a"][0].freed == 1  # (freed by change 1)
    # .3 leaves, .10 comes: the last never-used slot. Then .9 leaves, .11 comes: the slot
    # empty the longest (.2's), not .3's (freed one change ago) nor .9's (freed now).
    third = slots.assign(_config((("198.51.100.9", 1), ("198.51.100.10", 1))), second, 2)
    assert [s.key for s in third["a"]] == [None, None, ("198.51.100.9", 1), ("198.51.100.10", 1)]
    fourth = slots.assign(_config((("198.51.100.10", 1), ("198.51.100.11", 1))), third, 3)
    assert [s.key for s in fourth["a"]] == [("198.51.100.11", 1), None, None, ("198.51.100.10", 1)]


def test_replacing_a_backends_only_endpoint_makes_the_new_server_ready_first() -> None:
    old = _render(_config((("198.51.100.2", 1),)))
    new = _render(_config((("198.51.100.9", 1),)), old)
    change = plan.plan(old, new)
    assert not change.reload
    states = [(a.server, a.state) for a in change.actions if isinstance(a, SetServer)]
    assert states == [("s2", ServerState.READY), ("s1", ServerState.MAINT)]


@pytest.mark.parametrize(
    ("action", "texts"),
    [
        (
            SetServer("be_a", "s2", ServerState.READY, "198.51.100.5", 80),
            ["set server be_a/s2 addr 198.51.100.5 port 80", "set server be_a/s2 state ready"],
        ),
        (SetServer("be_a", "s1", ServerState.MAINT), ["set server be_a/s1 state maint"]),
        (
            SetCertificate("/c.pem", "A\n\nB\n"),
            ["set ssl cert /c.pem <<\nA\nB\n", "commit ssl cert /c.pem"],
        ),
        (AddMapEntry("/m.map", "a.example", "pool_3"), ["add map /m.map a.example pool_3"]),
        (
            AddMapEntry("/m.map", "a.example", "pool_4", replace=True),
            ["set map /m.map a.example pool_4"],
        ),
        (DelMapEntry("/m.map", "a.example"), ["del map /m.map a.example"]),
        (
            RemoveCertificate("/c.pem", "/crt.list", unload=True),
            ["del ssl crt-list /crt.list /c.pem", "del ssl cert /c.pem"],
        ),
        (RemoveCertificate("/c.pem", "/crt.list", False), ["del ssl crt-list /crt.list /c.pem"]),
    ],
)
def test_runtime_commands_of_each_action(action: plan.RuntimeAction, texts: list[str]) -> None:
    assert [c.text for c in runtime.commands(action)] == texts


def test_show_stat_rows_carry_requests_errors_and_bytes() -> None:
    csv = (
        "# pxname,svname,status,bin,bout,stot,req_tot,hrsp_5xx,econ,eresp,addr,mode,\n"
        "be_a,s1,UP,10,20,3,7,1,,,198.51.100.2:80,http,\n"
        "be_db,BACKEND,UP,5,6,4,,,1,1,,tcp,\n"
    )
    rows = runtime.parse_stat(csv)
    assert (rows[0].requests, rows[0].errors, rows[0].bytes_out) == (7, 1, 20)
    assert (rows[1].requests, rows[1].errors) == (4, 2)


def _udp_config(*endpoints: tuple[str, int]) -> GatewayConfig:
    return GatewayConfig(
        listeners=(listener("dns", 5353, Protocol.UDP),),
        backends=(backend("udpecho", *endpoints),),
        udp_routes=(StreamRoute(listeners=("dns",), backends=({"backend": "udpecho"},)),),
    )


def test_the_rendered_stream_config_lists_ready_endpoints_with_their_weight() -> None:
    cfg = _udp_config(("198.51.100.2", 53), ("198.51.100.3", 53))
    text = nginx.render(cfg, nginx.NginxPaths(Path("/run/x")), None)
    assert "listen 192.0.2.10:5353 udp reuseport;" in text
    assert "server 198.51.100.2:53 weight=1;" in text
    assert "load_module" not in text
    empty = nginx.render(_udp_config(), nginx.NginxPaths(Path("/run/x")), None)
    assert "server 127.0.0.1:1 down;" in empty


@pytest.mark.parametrize(
    ("redirect", "listener_port", "expected"),
    [
        ({"scheme": "https"}, 80, "https://%[var(txn.host)]%[pathq]"),
        ({"scheme": "https"}, 8080, "https://%[var(txn.host)]%[pathq]"),
        ({}, 8080, "http://%[var(txn.host)]:8080%[pathq]"),
        ({}, 80, "http://%[var(txn.host)]%[pathq]"),
        ({"port": 8443, "scheme": "https"}, 80, "https://%[var(txn.host)]:8443%[pathq]"),
        ({"hostname": "new.example", "path": "/n%"}, 80, "http://new.example/n%%"),
    ],
)
def test_redirect_locations_follow_the_httproute_port_rules(
    redirect: dict[str, object], listener_port: int, expected: str
) -> None:
    where = listener("web", listener_port, Protocol.HTTP)
    assert render.location(Redirect.model_validate(redirect), where) == expected


def _tls_config(*certs: tuple[str, tuple[str, ...]]) -> GatewayConfig:
    """_config() whose HTTPS listener offers `certs` (name, hostnames), in that order."""
    cfg = _config()
    tls = cfg.listener("tls")
    assert tls is not None
    return cfg.model_copy(
        update={
            "listeners": tuple(
                x.model_copy(update={"certificates": tuple(n for n, _ in certs)})
                if x.name == "tls"
                else x
                for x in cfg.listeners
            ),
            "certificates": tuple(
                Certificate(name=n, hostnames=h, cert_file=f"/{n}.pem") for n, h in certs
            ),
        }
    )


PEMS = {"a": "PEM-A", "b": "PEM-B", render.DEFAULT_CERTIFICATE: "PEM-DEFAULT"}


def test_the_crt_list_starts_with_the_gateways_own_certificate_and_offers_each_name_once() -> None:
    cfg = _tls_config(("a", ("a.example", "*.w.example")), ("b", ("A.example", "b.example")))
    out = _render(cfg, pems=PEMS)
    crt_list = out.crt_lists[str(PATHS.crt_list("tls"))].splitlines()
    assert crt_list == [
        f"{PATHS.certificate('_default')} {render.DEFAULT_SNI}",
        f"{PATHS.certificate('a')} a.example *.w.example",
        f"{PATHS.certificate('b')} b.example",  # a.example is a's: HAProxy would pick either
    ]
    assert out.certificates[str(PATHS.certificate("_default"))] == "PEM-DEFAULT"
    assert out.certificate_maps == {
        str(PATHS.map("tls", "certs")): "a.example a\nb.example b\n",
        str(PATHS.map("tls", "certs-wild")): "w.example a\n",
    }


def test_only_https_frontends_compare_the_certificates_of_sni_and_host() -> None:
    text = _render(_tls_config(("a", ("a.example",))), pems=PEMS).files[str(PATHS.config)]
    frontends = dict(render.sections(text))
    tls, web = frontends["frontend fe_tls"], frontends["frontend fe_web"]
    certs = f"'{PATHS.map('tls', 'certs')}'"
    assert "set-var(txn.tls_other) bool(1) if !{ ssl_fc_sni,lower,strcmp(txn.host) eq 0 }" in tls
    differ = "if { var(txn.tls_other) -m found }"
    # the SNI's certificate once per connection, the Host's per request
    assert f"tcp-request session set-var(sess.sni_crt) ssl_fc_sni,lower,map_str({certs})\n" in tls
    assert f"set-var(txn.host_crt) var(txn.host),map_str({certs}) {differ}" in tls
    check = (
        f"421 {differ} {{ var(sess.sni_crt) -m found }}"
        " !{ var(sess.sni_crt),strcmp(txn.host_crt) eq 0 }"
    )
    assert check in tls
    assert (
        f"421 {differ} !{{ var(sess.sni_crt) -m found }} !{{ var(txn.host_crt) -m str -- - }}"
        in tls
    )
    # before any routing: a misdirected request is neither redirected nor routed
    assert tls.index(check) < tls.index("set-var(txn.vh)")
    assert "421" not in web and "ssl_fc_sni" not in web


def test_a_tenant_certificate_added_reordered_or_removed_needs_no_reload() -> None:
    old = _render(_tls_config(("a", ("a.example",))), pems=PEMS)
    both = _render(_tls_config(("a", ("a.example",)), ("b", ("*.b.example",))), old, PEMS)
    change = plan.plan(old, both)
    assert not change.reload, change.reasons
    assert change.actions == (
        AddCertificate(
            str(PATHS.certificate("b")),
            "PEM-B",
            str(PATHS.crt_list("tls")),
            f"{PATHS.certificate('b')} *.b.example",
        ),
        AddMapEntry(str(PATHS.map("tls", "certs-wild")), "b.example", "b"),
    )
    assert [c.text for c in runtime.commands(change.actions[1])] == [
        f"add map {PATHS.map('tls', 'certs-wild')} b.example b"
    ]
    # the default line stays first: the order of the tenants' lines changes nothing
    reordered = _render(_tls_config(("b", ("*.b.example",)), ("a", ("a.example",))), both, PEMS)
    assert plan.plan(both, reordered).empty
    gone = plan.plan(both, _render(_tls_config(("b", ("*.b.example",))), both, PEMS))
    # its names out of the 421 check's maps first, then its line, then the certificate
    assert gone == plan.Change(
        False,
        (),
        (
            DelMapEntry(str(PATHS.map("tls", "certs")), "a.example"),
            RemoveCertificate(str(PATHS.certificate("a")), str(PATHS.crt_list("tls")), True),
        ),
    )


def test_a_name_chooses_its_exact_certificate_else_its_parents_wildcard_else_the_gateways() -> None:
    cfg = _tls_config(("a", ("a.example", "*.w.example")), ("b", ("x.w.example",)))
    tls = cfg.listener("tls")
    assert tls is not None
    names = ["a.example", "A.EXAMPLE", "x.w.example", "y.w.example", "z.y.w.example", "w.example"]
    assert [render.chosen_certificate(cfg, tls, n) for n in names] == [
        "a", "a", "b", "a", None, None,
    ]  # fmt: skip
    assert "      TLS: certificate a (tenant -)" in explain.explain(cfg, "a.example")
    no_cert = _tls_config(("b", ("b.example",)))
    assert "      TLS: the gateway's own certificate (none is offered for this name)" in (
        explain.explain(no_cert, "a.example")
    )


def test_a_certificate_without_hostnames_is_offered_for_the_dns_names_in_it(
    tmp_path: Path,
) -> None:
    """The driver reads them from the PEM, so that the crt-list and the 421 check's maps
    say the same names (HAProxy alone would read them from the certificate)."""
    require_binary("openssl")
    cert, key, _ = make_certificate(tmp_path, "san.example")
    cfg = _tls_config(("s", ()))
    cfg = cfg.model_copy(
        update={"certificates": (Certificate(name="s", cert_file=str(cert), key_file=str(key)),)}
    )
    pems, errors = load_pems(cfg)
    assert errors == [] and set(pems) == {"s"}
    named = with_certificate_names(cfg, pems)
    assert named.certificate("s") == cfg.certificates[0].model_copy(
        update={"hostnames": ("san.example",)}
    )
    tls = named.listeners[1]
    assert render.certificate_maps(tls, PATHS, render.offers(named, tls, PATHS))[
        str(PATHS.map("tls", "certs"))
    ] == ("san.example s\n")
