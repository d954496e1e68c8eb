"""`teapot-lb gateway`: check, explain, and the running command (a config file re-read on
change, metrics per tenant and route, readiness, clean stop)."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from needs import require_binary, require_root
from teapot_lb.cli import main
from teapot_lb.gateway.config import GatewayConfig, Owner, PathType, Protocol
from teapot_lb.gateway.source import dump_config, parse_config
from teapot_lb.lab.gateway_lab import GatewayLab, gateway_lab, make_certificate
from teapot_lb.lab.kubeplane import free_port
from teapot_lb.lab.wait import wait_for

from .builders import backend, ingress, listener

TENANT = Owner(tenant="acme", kind="Ingress", namespace="shop", name="web")


def _config(endpoint: tuple[str, int] = ("198.51.100.2", 8080)) -> GatewayConfig:
    route = ingress("web", "shop.example", [(PathType.PREFIX, "/", "shop")], tenant="acme")
    return GatewayConfig(
        listeners=(listener("web", 80, Protocol.HTTP),),
        backends=(backend("shop", endpoint, owner=TENANT),),
        http_routes=(route,),
    )


def test_a_dumped_config_reads_back_equal() -> None:
    cfg = _config()
    assert parse_config(dump_config(cfg), "f") == (cfg, [])


def test_check_names_the_field_of_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "gw.yaml"
    bad.write_text("listeners:\n- {name: web, address: 192.0.2.10, port: 99999, protocol: HTTP}\n")
    result = CliRunner().invoke(main, ["gateway", "--config", str(bad), "--check"])
    assert result.exit_code == 1
    assert "listeners[0].port: Input should be less than or equal to 65535" in result.output


def test_explain_says_which_tenant_route_and_endpoints_serve_a_host(tmp_path: Path) -> None:
    path = tmp_path / "gw.json"
    path.write_text(dump_config(_config()))
    result = CliRunner().invoke(
        main, ["gateway", "--config", str(path), "--explain", "shop.example/cart"]
    )
    assert result.exit_code == 0, result.output
    assert "tenant acme, Ingress ns/web rule 0" in result.output
    assert "backend shop (weight 1): 198.51.100.2:8080" in result.output


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayLab]:
    require_root()
    require_binary("haproxy", "curl")
    with gateway_lab(tmp_path_factory.mktemp("gwcmd"), "gwcmd") as lab:
        lab.start_backends("http:one:198.51.100.2:8080", "http:two:198.51.100.3:8080")
        yield lab


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@pytest.mark.root
@pytest.mark.daemon
def test_the_command_serves_the_file_follows_its_changes_and_reports_metrics(
    lab: GatewayLab,
) -> None:
    config = lab.work / "gateway.json"
    config.write_text(dump_config(_config()))
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "teapot-lb"), "gateway", "--config", str(config),
         "--state-dir", str(lab.work / "state"), "--netns", lab.gateway.ns,
         "--metrics-addr", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get(base + "/readyz")[0] == 200, timeout=15, what="gateway ready")
        assert lab.served_by("/", "shop.example") == "one"
        staged = lab.work / "gateway.json.new"
        staged.write_text(dump_config(_config(("198.51.100.3", 8080))))
        staged.replace(config)  # as an operator (or a ConfigMap mount) replaces it
        wait_for(
            lambda: lab.served_by("/", "shop.example") == "two",
            timeout=15,
            what="the changed endpoint served",
        )
        line = (
            'teapot_lb_gateway_requests_total{backend="shop",kind="Ingress",'
            'namespace="shop",route="web",tenant="acme"}'
        )
        wait_for(
            lambda: line in _get(base + "/metrics")[1],
            timeout=15,
            what="per-tenant request counter",
        )
        text = _get(base + "/metrics")[1]
        assert "teapot_lb_gateway_reloads_total 0.0" in text
        # Two runtime actions, no reload: the old endpoint's slot to maintenance, the new
        # endpoint into a slot never used.
        assert "teapot_lb_gateway_runtime_actions_total 2.0" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    # No HAProxy of this gateway is left (its command lines name the state dir; other
    # HAProxy processes of the host are not ours to count).
    state = str(lab.work / "state")
    assert subprocess.run(["pgrep", "-f", "--", state], capture_output=True).stdout == b""


def test_an_empty_file_is_refused_not_served_as_nothing() -> None:
    config, found = parse_config("  \n", "gw.yaml")
    assert config is None and found == ["gw.yaml: empty (to serve nothing, write {})"]


def test_metrics_label_each_backend_with_its_owner_and_count_endpoints_up(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from teapot_lb.gateway import metrics
    from teapot_lb.gateway.runtime import parse_stat
    from teapot_lb.gateway.service import Gateway, StatsSnapshot

    gw = Gateway(tmp_path)
    gw.config = _config()
    gw.stats = StatsSnapshot(parse_stat(
        "# pxname,svname,status,bin,bout,stot,req_tot,hrsp_5xx,econ,eresp,addr,mode,\n"
        "fe_web,FRONTEND,OPEN,1,2,3,9,0,,,,http,\n"
        "be_shop,s1,UP,0,0,0,5,0,,,198.51.100.2:8080,http,\n"
        "be_shop,s2,MAINT,0,0,0,0,0,,,127.0.0.1:1,http,\n"
        "be_shop,BACKEND,UP,100,200,0,7,2,,,,http,\n"
    ))  # fmt: skip
    registry = CollectorRegistry()
    metrics.register(registry, gw)
    text = generate_latest(registry).decode()
    labels = 'backend="shop",kind="Ingress",namespace="shop",route="web",tenant="acme"'
    assert f"teapot_lb_gateway_requests_total{{{labels}}} 7.0" in text
    assert f"teapot_lb_gateway_errors_total{{{labels}}} 2.0" in text
    assert f"teapot_lb_gateway_sent_bytes_total{{{labels}}} 200.0" in text
    assert f"teapot_lb_gateway_endpoints_up{{{labels}}} 1.0" in text
    assert 'teapot_lb_gateway_listener_requests_total{listener="web"} 9.0' in text


def test_the_example_in_docs_gateway_md_is_a_valid_config() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "gateway.md").read_text()
    section = doc.split("## The gateway config", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    config, found = parse_config(example, "docs/gateway.md")
    assert found == [] and config is not None
    assert config.http_routes[0].owner.tenant == "a"


def test_an_unusable_default_certificate_is_refused_before_the_gateway_starts(
    tmp_path: Path,
) -> None:
    cert, _key, _ = make_certificate(tmp_path, "gw.operator.example")
    _, other_key, _ = make_certificate(tmp_path, "other.operator.example")
    args = ["gateway", "--manifests", str(tmp_path), "--address", "192.0.2.10", "--check"]
    wrong = [*args, "--default-certificate", str(cert), "--default-key", str(other_key)]
    result = CliRunner().invoke(main, wrong)
    assert result.exit_code == 2
    assert f"{other_key} is not the key of the certificate in {cert}" in result.output
    with_config = ["gateway", "--config", str(cert), "--default-certificate", str(cert)]
    result = CliRunner().invoke(main, with_config)
    assert result.exit_code == 2 and "the config file sets defaultCertificate" in result.output
