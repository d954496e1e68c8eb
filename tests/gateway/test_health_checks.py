"""Active health checks as Octavia's monitors ask for them (method, version, Host,
expected statuses, timeout, TLS), and the backends report the gateway serves at
/gateway/backends (server states and counters from `show stat`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from needs import require_binary
from teapot_lb.gateway import render, runtime, slots
from teapot_lb.gateway.config import (
    GatewayConfig,
    HealthCheck,
    HTTPRoute,
    Owner,
    PathType,
    RouteKind,
)
from teapot_lb.gateway.report import backends_report

from .builders import backend, ingress, listener

OWNER = Owner(tenant="acme", kind=RouteKind.SERVICE, namespace="tenant-acme", name="pool-1")
CHECK = HealthCheck(interval_ms=1000, timeout_ms=500, rise=1, fall=2, http_path="/health",
                    http_method="HEAD", http_version="HTTP/1.1", http_host="probe.acme.example",
                    expect_status="200,202-203", tls=True)  # fmt: skip


ENDPOINTS = (("198.51.100.2", 8080), ("198.51.100.3", 8080))


def _config(check: HealthCheck = CHECK) -> GatewayConfig:
    route: HTTPRoute = ingress("web", "a.example", [(PathType.PREFIX, "/", "a")])
    return GatewayConfig(
        listeners=(listener(),),
        backends=(backend("a", *ENDPOINTS, health_check=check, owner=OWNER),),
        http_routes=(route,),
    )


def _files(config: GatewayConfig, paths: render.Paths) -> dict[str, str]:
    return render.render(config, slots.assign(config), paths, {}).files


def _text(config: GatewayConfig, paths: render.Paths) -> str:
    return _files(config, paths)[str(paths.config)]


def test_an_octavia_shaped_check_renders_every_parameter_and_haproxy_accepts_it(
    tmp_path: Path,
) -> None:
    paths = render.Paths(tmp_path)
    text = _text(_config(), paths)
    for line in (
        "    timeout check 500",
        "    option httpchk",
        "    http-check send meth HEAD uri '/health' ver HTTP/1.1 hdr Host 'probe.acme.example'",
        "    http-check expect rstatus ^(200|202|203)$",
    ):
        assert line in text.splitlines(), line
    assert "check inter 1000 rise 1 fall 2 check-ssl verify none" in text
    require_binary("haproxy")
    for path, content in _files(_config(), paths).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    check = subprocess.run(["haproxy", "-c", "-f", str(paths.config)], capture_output=True,
                           text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_plain_get_check_keeps_its_one_line_form_and_any_2xx_or_3xx_passes() -> None:
    text = _text(_config(HealthCheck(http_path="/")), render.Paths(Path("/run/gw-test")))
    assert "    option httpchk GET '/'" in text.splitlines()
    assert "    http-check expect rstatus ^[23]" in text.splitlines()
    assert "timeout check" not in text and "check-ssl" not in text


def test_the_report_names_each_endpoints_state_and_the_backends_counters() -> None:
    csv = (
        "# pxname,svname,status,scur,stot,bin,bout,req_tot,hrsp_5xx,addr,mode,check_status,\n"
        "be_a,s1,UP,1,7,,,7,,198.51.100.2:8080,http,L7OK,\n"
        "be_a,s2,DOWN 1/2,0,3,,,3,,198.51.100.3:8080,http,L4CON,\n"
        "be_a,s3,MAINT,0,0,,,0,,127.0.0.1:1,http,,\n"
        "be_a,BACKEND,UP,1,10,300,4000,10,2,,http,,\n"
    )
    (state,) = backends_report(_config(), runtime.parse_stat(csv), 0.5).backends
    assert state.owner == OWNER and state.health_checked
    assert [(s.address, s.port, s.status, s.check) for s in state.servers] == [
        ("198.51.100.2", 8080, "UP", "L7OK"),
        ("198.51.100.3", 8080, "DOWN 1/2", "L4CON"),
    ]
    c = state.counters
    assert (c.bytes_in, c.bytes_out, c.current, c.sessions, c.errors) == (300, 4000, 1, 10, 2)


def test_a_gateway_without_a_configuration_reports_no_backends() -> None:
    assert backends_report(None, [], None).backends == ()
