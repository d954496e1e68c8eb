"""Real HAProxy (master-worker) driven by the gateway: Ingress and HTTPRoute semantics end to
end, SNI to two tenants' certificates, TLS passthrough, TCP, HTTP/2 by ALPN, PROXY v2, and
the runtime API: endpoint changes, drains and certificate rotation without a reload.

One HAProxy for the module; every test applies the whole config it needs (apply is
level-triggered), so the order of the tests does not matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from teapot_lb.gateway import runtime
from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Certificate,
    Endpoint,
    GatewayConfig,
    HeaderMatch,
    HeaderModifier,
    HeaderValue,
    HealthCheck,
    HTTPRoute,
    HTTPRule,
    Owner,
    PathMatch,
    PathType,
    Protocol,
    QueryParamMatch,
    Redirect,
    RouteMatch,
    StreamRoute,
    TLSRoute,
)
from teapot_lb.gateway.haproxy import HAProxy, Refused, send_all
from teapot_lb.gateway.plan import SetCertificate
from teapot_lb.lab.gateway_lab import (
    CLIENT,
    GatewayLab,
    gateway_lab,
    make_certificate,
    parse_curl,
    wait_served_by,
)
from teapot_lb.lab.wait import wait_for, wait_for_async

from .builders import INGRESS_DOC_TABLE, backend, ingress, listener

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]

ECHO = ("198.51.100.2", 8080)
ECHO2 = ("198.51.100.3", 8080)


@dataclass
class World:
    lab: GatewayLab
    haproxy: HAProxy
    certs: dict[str, str]  # hostname -> PEM
    cert_files: dict[str, Path]  # hostname -> certificate file (curl --cacert)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl", "openssl")
    work = tmp_path_factory.mktemp("gw")
    with gateway_lab(work) as lab:
        certs = work / "certs"
        p_cert, p_key, _ = make_certificate(certs, "p.example")
        lab.start_backends(
            "http:echo:198.51.100.2:8080",
            "http:echo2:198.51.100.3:8080",
            "http:tenant-b:198.51.100.4:8080",
            "proxyhttp:proxied:198.51.100.5:8080",
            f"tls:passthrough:198.51.100.6:8443:{p_cert}:{p_key}",
            "tcp:tcpecho:198.51.100.7:5000",
        )
        yield lab


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(lab: GatewayLab) -> AsyncIterator[World]:
    certs, files = {}, {}
    for host in ("a.example", "b.example"):
        cert, _key, pem = make_certificate(lab.work / "certs", host)
        certs[host], files[host] = pem, cert
    files["p.example"] = lab.work / "certs" / "p.example.crt"
    haproxy = HAProxy(lab.work / "haproxy", wrap=lab.gateway.exec_argv([]))
    w = World(lab, haproxy, certs, files)
    applied = await haproxy.apply(base_config(w))
    assert applied.error is None
    yield w
    await haproxy.stop()


def _rule_tag(name: str) -> HeaderModifier:
    return HeaderModifier(set=(HeaderValue(name="X-Rule", value=name),))


def _doc_routes() -> list[HTTPRoute]:
    """Each row of the Ingress docs table as its own Ingress on host case<N>.docs.example;
    path i of a row tags the request with X-Rule: b<i> (the echo backend shows it)."""
    routes = []
    for n, case in enumerate(INGRESS_DOC_TABLE):
        route = ingress(
            f"case{n}", f"case{n}.docs.example", [(t, v, "echo") for t, v in case.paths]
        )
        rules = tuple(
            r.model_copy(update={"request_headers": _rule_tag(f"b{i}")})
            for i, r in enumerate(route.rules)
        )
        routes.append(route.model_copy(update={"rules": rules}))
    return routes


def _matches_route() -> HTTPRoute:
    def rule(tag: str, **match: object) -> HTTPRule:
        return HTTPRule(
            matches=(RouteMatch.model_validate(match),),
            backends=(BackendRef(backend="echo"),),
            request_headers=_rule_tag(tag),
        )

    return HTTPRoute(
        owner=Owner(tenant="t1", kind="HTTPRoute", namespace="ns", name="matches"),
        listeners=("web",),
        hostnames=("*.route.example",),
        rules=(
            rule("header", headers=(HeaderMatch(name="X-Env", value="canary"),)),
            rule("query", query_params=(QueryParamMatch(name="v", value="2"),)),
            rule("method", method="POST"),
            rule("regex", path=PathMatch(type=PathType.REGULAR_EXPRESSION, value="/v[0-9]+/.*")),
            HTTPRule(
                matches=(RouteMatch(path=PathMatch(value="/old")),),
                redirect=Redirect(hostname="new.example", path="/new", status_code=301),
            ),
            HTTPRule(
                matches=(RouteMatch(path=PathMatch(value="/split")),),
                backends=(
                    BackendRef(backend="echo", weight=1),
                    BackendRef(backend="tenant-b", weight=1),
                ),
                response_headers=HeaderModifier(add=(HeaderValue(name="X-Split", value="yes"),)),
            ),
            rule("default"),
        ),
    )


DEAD = ("198.51.100.8", 8080)  # nothing listens there


def base_config(
    w: World,
    *,
    echo: tuple[tuple[str, int], ...] = (ECHO,),
    a_pem: str | None = None,
    checked: tuple[tuple[str, int], ...] = (ECHO, DEAD),
) -> GatewayConfig:
    tenant_a = Owner(tenant="a", kind="Ingress", namespace="shop", name="web")
    tenant_b = Owner(tenant="b", kind="Ingress", namespace="blog", name="web")
    return GatewayConfig(
        listeners=(
            listener("web", 80, Protocol.HTTP),
            listener("tls", 443, Protocol.HTTPS, certificates=("a", "b")),
            listener("pt", 8443, Protocol.TLS_PASSTHROUGH),
            listener("tcp", 5000, Protocol.TCP),
        ),
        certificates=(
            Certificate(
                name="a",
                hostnames=("a.example",),
                owner=tenant_a,
                cert_pem=a_pem or w.certs["a.example"],
                key_pem="",
            ),
            Certificate(
                name="b",
                hostnames=("b.example",),
                owner=tenant_b,
                cert_pem=w.certs["b.example"],
                key_pem="",
            ),
        ),
        backends=(
            Backend(
                name="echo",
                endpoints=tuple(Endpoint(address=a, port=p) for a, p in echo),
                owner=tenant_a,
            ),
            backend("tenant-b", ("198.51.100.4", 8080), owner=tenant_b),
            backend("proxied", ("198.51.100.5", 8080), proxy_protocol=True),
            backend("passthrough", ("198.51.100.6", 8443)),
            backend("tcpecho", ("198.51.100.7", 5000)),
            backend(
                "checked",
                *checked,
                health_check=HealthCheck(interval_ms=200, rise=1, fall=1, http_path="/healthz"),
            ),
        ),
        http_routes=(
            *_doc_routes(),
            _matches_route(),
            ingress("a", "a.example", [(PathType.PREFIX, "/", "echo")], ("web", "tls"), "a"),
            ingress("b", "b.example", [(PathType.PREFIX, "/", "tenant-b")], ("web", "tls"), "b"),
            ingress("p", "proxied.example", [(PathType.PREFIX, "/", "proxied")]),
            ingress("c", "checked.example", [(PathType.PREFIX, "/", "checked")]),
        ),
        tls_routes=(
            TLSRoute(
                listeners=("pt",),
                hostnames=("p.example",),
                backends=(BackendRef(backend="passthrough"),),
            ),
        ),
        tcp_routes=(StreamRoute(listeners=("tcp",), backends=(BackendRef(backend="tcpecho"),)),),
    )


async def _apply(w: World, cfg: GatewayConfig) -> None:
    applied = await w.haproxy.apply(cfg)
    assert applied.error is None, applied.error


# --- routing semantics -----------------------------------------------------------------------


async def test_every_pathtype_case_of_the_ingress_docs_through_haproxy(world: World) -> None:
    await _apply(world, base_config(world))
    wrong = []
    for n, case in enumerate(INGRESS_DOC_TABLE):
        r = world.lab.curl(
            f"http://case{n}.docs.example{case.request}", host=f"case{n}.docs.example"
        )
        got = r.json()["headers"].get("x-rule") if r.code == 200 else None
        expected = None if case.served_by is None else f"b{case.served_by}"
        if got != expected or (expected is None and r.code != 404):
            wrong.append((case.id, expected, got, r.code))
    assert wrong == []


async def test_httproute_matches_redirect_weights_and_header_modifiers(world: World) -> None:
    await _apply(world, base_config(world))
    lab = world.lab
    url, host = "http://x.y.route.example", "x.y.route.example"

    def tag(*args: str, path: str = "/") -> str | None:
        r = lab.curl(url + path, *args, host=host)
        return r.json()["headers"].get("x-rule") if r.code == 200 else f"status {r.code}"

    assert tag("-H", "X-Env: canary") == "header"
    assert tag(path="/?v=2") == "query"
    assert tag("-X", "POST") == "method"
    assert tag(path="/v2/items") == "regex"
    assert tag() == "default"
    redirect = lab.curl(url + "/old", "-D", "-", host=host)
    assert redirect.code == 301 and "location: http://new.example/new" in redirect.body.lower()
    seen = set()
    for _ in range(12):
        r = lab.curl(url + "/split", "-D", "-", host=host)
        seen.add(r.body.rsplit("\n", 1)[-1].split('"name": "')[1].split('"')[0])
        assert "x-split: yes" in r.body.lower()
    assert seen == {"echo", "tenant-b"}


async def test_forwarded_for_and_proxy_protocol_v2_carry_the_client_address(world: World) -> None:
    await _apply(world, base_config(world))
    echo = world.lab.curl("http://a.example/", host="a.example").json()
    assert echo["headers"]["x-forwarded-for"] == CLIENT
    proxied = world.lab.curl("http://proxied.example/", host="proxied.example").json()
    assert proxied["proxied_from"] == CLIENT


async def test_health_checks_take_a_dead_endpoint_out_and_metrics_count_it(world: World) -> None:
    await _apply(world, base_config(world))

    async def states() -> dict[str, str]:
        rows = await world.haproxy.stats()
        return {r.address: r.status for r in rows if r.proxy == "be_checked" and r.address}

    for _ in range(250):
        now = await states()
        if now.get("198.51.100.8:8080") == "DOWN" and now.get("198.51.100.2:8080") == "UP":
            break
        await asyncio.sleep(0.02)
    assert now["198.51.100.8:8080"] == "DOWN" and now["198.51.100.2:8080"] == "UP", now
    assert {world.lab.served_by("/", "checked.example") for _ in range(4)} == {"echo"}


async def test_an_endpoint_moved_into_a_checked_slot_takes_traffic_without_a_reload(
    world: World,
) -> None:
    await _apply(world, base_config(world))
    reloads = world.haproxy.counters.reloads
    applied = await world.haproxy.apply(base_config(world, checked=(ECHO, ECHO2)))
    assert not applied.change.reload and applied.error is None
    await wait_for_async(
        lambda: world.lab.served_by("/", "checked.example") == "echo2",
        within=10,
        what="the new endpoint of the health-checked backend served",
    )
    assert world.haproxy.counters.reloads == reloads


# --- TLS -------------------------------------------------------------------------------------


async def test_sni_picks_each_tenants_certificate_and_alpn_gives_http2(world: World) -> None:
    await _apply(world, base_config(world))
    lab = world.lab
    for host, name in (("a.example", "echo"), ("b.example", "tenant-b")):
        r = lab.curl(
            f"https://{host}/",
            "--cacert",
            str(world.cert_files[host]),
            "--http2",
            host=host,
            port=443,
        )
        assert (r.code, r.json()["name"], r.http_version) == (200, name, "2")
        assert r.json()["headers"]["x-forwarded-proto"] == "https"
        assert f"CN = {host}" in lab.peer_certificate_subject(443, host)
    h1 = lab.curl(
        "https://a.example/",
        "--cacert",
        str(world.cert_files["a.example"]),
        "--http1.1",
        host="a.example",
        port=443,
    )
    assert h1.http_version == "1.1"


async def test_tls_passthrough_reaches_the_backends_own_certificate(world: World) -> None:
    await _apply(world, base_config(world))
    r = world.lab.curl(
        "https://p.example:8443/",
        "--cacert",
        str(world.cert_files["p.example"]),
        host="p.example",
        port=8443,
    )
    assert (r.code, r.json()["name"]) == (200, "passthrough")


async def test_a_tcp_listener_forwards_to_its_backend(world: World) -> None:
    await _apply(world, base_config(world))
    assert world.lab.tcp_exchange("192.0.2.10", 5000, "hello") == "tcpecho hello"


# --- changes without reload ------------------------------------------------------------------


async def test_an_endpoint_change_takes_effect_without_a_reload(world: World) -> None:
    await _apply(world, base_config(world))
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    applied = await world.haproxy.apply(base_config(world, echo=(ECHO2,)))
    assert not applied.change.reload and applied.change.actions
    wait_served_by(world.lab, "/", "a.example", "echo2")
    assert world.lab.served_by("/", "a.example") == "echo2"
    assert (await world.haproxy.worker_pid(), world.haproxy.counters.reloads) == (pid, reloads)


async def test_a_runtime_only_change_writes_no_file_and_a_restart_reads_what_haproxy_held(
    world: World,
) -> None:
    await _apply(world, base_config(world))
    running = world.haproxy.running
    assert running is not None
    inodes = {p: os.stat(p).st_ino for p in (*running.files, *running.certificates)}
    applied = await world.haproxy.apply(base_config(world, echo=(ECHO2,)))
    assert not applied.change.reload
    now = world.haproxy.running
    assert now is not None
    assert all(os.stat(p).st_ino == inode for p, inode in inodes.items())  # (none written)
    assert _on_disk(now.files) != now.files  # (its slot's address: HAProxy has it, not the file)
    master = world.haproxy.master_pid
    assert master is not None
    os.kill(master, signal.SIGKILL)
    await wait_for_async(
        lambda: world.haproxy.master_pid not in (None, master), within=15, what="haproxy restarted"
    )
    # The restart read files written first: the same endpoint is served.
    written = {**now.files, **now.certificates}
    assert _on_disk(written) == written
    rewritten = {p for p, inode in inodes.items() if os.stat(p).st_ino != inode}
    assert rewritten == {str(world.haproxy.paths.config)}  # (only the file that differed)
    wait_served_by(world.lab, "/", "a.example", "echo2")


async def test_a_reload_after_runtime_only_changes_reads_what_haproxy_held(world: World) -> None:
    await _apply(world, base_config(world))
    assert not (await world.haproxy.apply(base_config(world, echo=(ECHO2,)))).change.reload
    pid = await world.haproxy.worker_pid()
    cfg = base_config(world, echo=(ECHO2,))
    paths = [(PathType.PREFIX, "/", "tenant-b"), (PathType.EXACT, "/x", "tenant-b")]
    extra = ingress("new", "new.example", paths)
    applied = await world.haproxy.apply(
        cfg.model_copy(update={"http_routes": (*cfg.http_routes, extra)})
    )
    assert applied.change.reload and await world.haproxy.worker_pid() != pid
    assert world.lab.served_by("/", "a.example") == "echo2"  # (not the file's old echo)
    assert world.lab.served_by("/", "new.example") == "tenant-b"


def _on_disk(paths: Iterable[str]) -> dict[str, str]:
    return {path: Path(path).read_text() for path in paths}


async def test_a_removed_endpoint_drains_its_request_in_flight(world: World) -> None:
    await _apply(world, base_config(world))
    slow = await _start(world.lab.curl_argv("http://a.example/slow/1500", host="a.example"))
    wait_for(lambda: _in_flight(world.lab) > 0, timeout=5, what="the slow request at echo")
    applied = await world.haproxy.apply(base_config(world, echo=(ECHO2,)))
    assert not applied.change.reload
    assert world.lab.served_by("/", "a.example") == "echo2"
    finished = parse_curl(await _output(slow))
    assert (finished.code, finished.json()["name"]) == (200, "echo")


async def _start(argv: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)


async def _output(proc: asyncio.subprocess.Process) -> str:
    out, _ = await asyncio.wait_for(proc.communicate(), 10)
    return out.decode()


def _in_flight(lab: GatewayLab) -> int:
    out = lab.backends.run(
        "ss", "-Htn", "state", "established", "sport", "= :8080", "src", "198.51.100.2"
    )
    return len(out.splitlines())


async def test_a_rotated_certificate_is_served_without_a_reload(world: World) -> None:
    await _apply(world, base_config(world))
    before = world.lab.peer_certificate_subject(443, "a.example")
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    _cert, _key, new_pem = make_certificate(world.lab.work / "certs", "a.example", tag="-2")
    applied = await world.haproxy.apply(base_config(world, a_pem=new_pem))
    assert [type(a) for a in applied.change.actions] == [SetCertificate]
    after = world.lab.peer_certificate_subject(443, "a.example")
    assert after != before and "CN = a.example" in after
    assert (await world.haproxy.worker_pid(), world.haproxy.counters.reloads) == (pid, reloads)


async def test_one_connection_answers_each_command_and_names_the_one_refused(
    world: World,
) -> None:
    await _apply(world, base_config(world))
    socket = world.haproxy.paths.admin_socket
    answered = await send_all(socket, [runtime.show_info(), runtime.show_info()])
    pid = str(await world.haproxy.worker_pid())
    assert [runtime.parse_info(a.text or "")["Pid"] for a in answered] == [pid, pid]
    refused = runtime.Command("set server be_no_such_backend/s1 state ready")
    with pytest.raises(Refused) as caught:
        await send_all(socket, [runtime.show_info(), refused, runtime.show_info()])
    assert str(caught.value).startswith(
        "HAProxy refused 'set server be_no_such_backend/s1 state ready': No such"
    )


async def test_a_runtime_change_haproxy_refuses_is_made_by_a_reload(world: World) -> None:
    await _apply(world, base_config(world))
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    # HAProxy holds one certificate transaction at a time: one left open on b's makes
    # the commit of a's rotation fail.
    socket, b_path = world.haproxy.paths.admin_socket, world.haproxy.paths.certificate("b")
    a_before, b_before = (
        world.lab.peer_certificate_subject(443, h) for h in ("a.example", "b.example")
    )
    pem = world.certs["b.example"]
    await send_all(socket, [runtime.Command(f"set ssl cert {b_path} <<\n{pem}", ("Trans",))])
    try:
        _cert, _key, new_pem = make_certificate(world.lab.work / "certs", "a.example", tag="-3")
        applied = await world.haproxy.apply(base_config(world, a_pem=new_pem))
    finally:
        with contextlib.suppress(Refused):  # (gone with the old worker when it reloaded)
            await send_all(socket, [runtime.Command(f"abort ssl cert {b_path}")])
    assert applied.error is None
    assert [type(a) for a in applied.change.actions] == [SetCertificate]
    assert world.haproxy.counters.reloads == reloads + 1
    assert await world.haproxy.worker_pid() != pid
    a_after = world.lab.peer_certificate_subject(443, "a.example")
    assert a_after != a_before and "CN = a.example" in a_after
    assert world.lab.peer_certificate_subject(443, "b.example") == b_before


# --- reloads, refusals, crashes --------------------------------------------------------------


async def test_a_new_route_reloads_seamlessly(world: World) -> None:
    await _apply(world, base_config(world))
    pid, reloads = await world.haproxy.worker_pid(), world.haproxy.counters.reloads
    slow = await _start(world.lab.curl_argv("http://a.example/slow/1000", host="a.example"))
    cfg = base_config(world)
    # (two paths: its rules are the frontend's lines; a host with one Prefix '/' path is
    # a map row, test_pool_haproxy.py)
    paths = [(PathType.PREFIX, "/", "tenant-b"), (PathType.EXACT, "/x", "tenant-b")]
    extra = ingress("new", "new.example", paths)
    applied = await world.haproxy.apply(
        cfg.model_copy(update={"http_routes": (*cfg.http_routes, extra)})
    )
    assert applied.change.reload
    assert world.haproxy.counters.reloads == reloads + 1
    assert await world.haproxy.worker_pid() != pid
    assert world.lab.served_by("/", "new.example") == "tenant-b"
    assert parse_curl(await _output(slow)).code == 200  # the old worker finished it


async def test_a_config_haproxy_refuses_is_not_installed_and_the_last_keeps_serving(
    world: World,
) -> None:
    await _apply(world, base_config(world))
    pid = await world.haproxy.worker_pid()
    cfg = base_config(world)
    bad = ingress("bad", "bad.example", [(PathType.REGULAR_EXPRESSION, "/(unclosed", "echo")])
    applied = await world.haproxy.apply(
        cfg.model_copy(update={"http_routes": (*cfg.http_routes, bad)})
    )
    assert applied.error is not None and "haproxy refused the configuration" in applied.error
    assert "regex" in applied.error  # HAProxy's own words on what is wrong
    assert await world.haproxy.worker_pid() == pid
    assert world.lab.served_by("/", "a.example") == "echo"


async def test_haproxy_killed_is_restarted_with_the_last_good_config(world: World) -> None:
    await _apply(world, base_config(world))
    master, worker = world.haproxy.master_pid, await world.haproxy.worker_pid()
    assert master is not None
    os.kill(master, signal.SIGKILL)
    await wait_for_async(
        lambda: (
            world.lab.served_by("/", "a.example") == "echo"
            and world.haproxy.master_pid not in (None, master)
        ),
        within=15,
        what="haproxy restarted and serving",
    )
    assert world.haproxy.daemon.unexpected_exits >= 1
    await wait_for_async(
        lambda: not Path(f"/proc/{worker}").exists(), within=5, what="the orphaned worker to exit"
    )
