"""Without Kubernetes: a manifest directory of Tenants and the tenants' (mirrored) objects
is translated into the gateway config with the same vetting, and `teapot-lb validate`
reports a refused object with its file."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path
from typing import Any

import yaml

from model.gateway_api_cases import http_route
from teapot_lb.model.manifest import load
from teapot_lb.tenancy.l7standalone import translate_directory
from teapot_lb.validation import validate_manifest
from tenancy.builders import tenant_body

from .builders import DOMAINS, ingress_body, mirrored_slice


def write(directory: Path, name: str, *docs: dict[str, Any]) -> None:
    (directory / name).write_text(yaml.safe_dump_all(docs))


def manifests(tmp_path: Path) -> Path:
    for name in ("acme", "bolt"):
        body = tenant_body(
            name, dnsDomains=[*DOMAINS[name], "apps.example"], modes=["Route", "Gateway"]
        )
        write(tmp_path, f"tenant-{name}.yaml", body)
    write(tmp_path, "acme.yaml", ingress_body("acme", "shop", "www.apps.example", age=0),
          mirrored_slice("acme", "web", ["192.0.2.11"]))  # fmt: skip
    write(tmp_path, "bolt.yaml", ingress_body("bolt", "steal", "www.apps.example", age=5))
    return tmp_path


def test_a_directory_becomes_the_gateway_config_without_the_theft(tmp_path: Path) -> None:
    result, problems = translate_directory(manifests(tmp_path), [ip_address("203.0.113.10")])
    assert problems == []
    (route,) = result.config.http_routes
    assert route.owner.tenant == "acme" and route.hostnames == ("www.apps.example",)
    (backend,) = result.config.backends
    assert [str(e.address) for e in backend.endpoints] == ["192.0.2.11"]
    refused = [r for r in result.results.values() if r.refusals]
    assert [(r.tenant, r.refusals[0].rule.value) for r in refused] == [("bolt", "HostnameTaken")]


def test_validate_reports_the_refused_object_with_its_file(tmp_path: Path) -> None:
    found = validate_manifest(load([manifests(tmp_path)]))
    # (The Tenants' allocations name pools this directory does not hold: reported too.)
    (problem,) = [p for p in found if p.kind != "Tenant"]
    assert problem.kind == "Ingress" and problem.namespace == "tenant-bolt"
    assert problem.field == "spec.rules[0].host" and "[HostnameTaken]" in problem.message
    assert problem.source is not None and "bolt.yaml" in problem.source


def test_the_gateway_command_explains_a_hostname_and_checks_a_directory(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway

    root = manifests(tmp_path)
    args = ["--manifests", str(root), "--address", "203.0.113.10"]
    runner = CliRunner()
    shown = runner.invoke(gateway, [*args, "--explain", "www.apps.example/cart"])
    assert shown.exit_code == 0, shown.output
    # The tenant and route that win (acme's, the older), and the backend's endpoint.
    assert "tenant acme" in shown.output and "192.0.2.11" in shown.output
    checked = runner.invoke(gateway, [*args, "--check"])
    assert checked.exit_code == 1
    assert "steal" in checked.output and "HostnameTaken" in checked.output
    assert f"{root}: 1 problem(s)" in checked.output


def test_check_refuses_a_route_the_upstream_crd_refuses_with_its_rule_and_field(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway

    root = manifests(tmp_path)
    route = http_route({"backendRefs": [{"name": "web"}]}, hostnames=["www.acme.example"])
    route["metadata"] |= {"name": "portless", "namespace": "tenant-acme"}
    write(root, "route.yaml", route)
    translation, problems = translate_directory(root, [ip_address("203.0.113.10")])
    assert [(p.name, p.field, p.message) for p in problems] == [
        ("portless", "spec.rules[0].backendRefs[0]", "Must have port for Service reference")
    ]
    assert not any(r.name == "portless" for r in translation.results)
    checked = CliRunner().invoke(gateway, ["--manifests", str(root), "--address",
                                           "203.0.113.10", "--check"])  # fmt: skip
    assert checked.exit_code == 1
    assert (
        "HTTPRoute/tenant-acme/portless: spec.rules[0].backendRefs[0]: Must have port for"
        " Service reference" in checked.output
    )


def test_check_reports_an_endpoint_slice_without_the_service_ports_annotation(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway

    root = manifests(tmp_path)
    bare = mirrored_slice("acme", "web", ["192.0.2.11"])
    del bare["metadata"]["annotations"]
    write(root, "acme.yaml", ingress_body("acme", "shop", "www.apps.example", age=0), bare)
    translation, _ = translate_directory(root, [ip_address("203.0.113.10")])
    (backend,) = translation.config.backends
    assert backend.endpoints == ()
    checked = CliRunner().invoke(gateway, ["--manifests", str(root), "--address",
                                           "203.0.113.10", "--check"])  # fmt: skip
    assert checked.exit_code == 1
    (line,) = [x for x in checked.output.splitlines() if "not served as written" in x]
    assert line.startswith("Ingress/tenant-acme/")
    assert "has no lb.teapot.io/service-ports annotation" in line and "Service port 80" in line
