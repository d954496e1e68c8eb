"""Without Kubernetes: a manifest directory of Tenants and the tenants' (mirrored) objects
is translated into the gateway config with the same vetting, and `teapot-lb validate`
reports a refused object with its file."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path
from typing import Any

import yaml

from model.gateway_api_cases import http_route
from teapot_lb.gateway.control.l7standalone import translate_directory
from teapot_lb.model.common import dump
from teapot_lb.model.manifest import load
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


def test_check_names_every_part_not_served_not_only_refused_objects(tmp_path: Path) -> None:
    """Issue 34, 4 and 7(a): `--check` says what status alone would (nowhere to read it
    without Kubernetes): a hostname-less route no listener takes, an Ingress rule without
    host left out, an unimplemented filter, a backendRef that does not exist."""
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway as command

    from .builders import gateway, http_route, listener

    root = manifests(tmp_path)
    mixed = ingress_body("acme", "mixed", "www.acme.example", age=1)
    mixed["spec"]["rules"].append({"http": mixed["spec"]["rules"][0]["http"]})
    gw = gateway("acme", "gw", [listener("http", "HTTP", 80)], age=1)
    everything = http_route("acme", "everything", [], age=2)
    mirrored = {"backendRef": {"name": "web", "port": 80}}
    mirror = http_route("acme", "mirror", ["m.acme.example"], age=3, rules=[{
        "filters": [{"type": "RequestMirror", "requestMirror": mirrored}],
        "backendRefs": [{"name": "web", "port": 80}]}])  # fmt: skip
    gone = http_route("acme", "gone", ["g.acme.example"], age=4,
                      rules=[{"backendRefs": [{"name": "nonexistent", "port": 80}]}])  # fmt: skip
    write(root, "more.yaml", mixed, *(dump(o) for o in (gw, everything, mirror, gone)))
    checked = CliRunner().invoke(
        command, ["--manifests", str(root), "--address", "203.0.113.10", "--check"]
    )
    assert checked.exit_code == 1
    lines = checked.output.splitlines()

    def line(*words: str) -> str:
        found = [x for x in lines if all(w in x for w in words)]
        assert found, (words, checked.output)
        return found[0]

    assert "not served: spec.rules[1].host" in line("mixed", "[HostnameNotAllowed]")
    assert "parentRefs[gw]" in line("everything", "[HostnameNotAllowed]")
    assert "spec.rules[0].filters[0].type" in line("mirror", "refused", "[UnsupportedValue]")
    assert "spec.rules[0].backendRefs[0]" in line("gone", "[BackendNotFound]")


def test_objects_without_creation_time_keep_the_order_they_were_first_seen_in(
    tmp_path: Path,
) -> None:
    """Issue 34, 9: as standalone Services, manifests without creationTimestamp get the
    time first seen (kept in the state directory): the Ingress that named a hostname
    first keeps it, whatever the names, also after a restart."""
    from datetime import UTC, datetime, timedelta

    from teapot_lb.standalone.first_seen import FirstSeen

    root, state = tmp_path / "m", tmp_path / "state"
    root.mkdir()
    for name in ("acme", "bolt"):
        body = tenant_body(name, dnsDomains=["apps.example"], modes=["Route", "Gateway"])
        write(root, f"tenant-{name}.yaml", body)
    first = ingress_body("bolt", "first", "www.apps.example")
    second = ingress_body("acme", "second", "www.apps.example")
    for body in (first, second):
        del body["metadata"]["creationTimestamp"]
    write(root, "bolt.yaml", first)
    address = [ip_address("203.0.113.10")]
    t0 = datetime(2026, 12, 6, tzinfo=UTC)
    translate_directory(root, address, FirstSeen(state), t0)
    write(root, "acme.yaml", second)

    def refused(seen: FirstSeen | None, now: datetime) -> list[str]:
        result, _ = translate_directory(root, address, seen, now)
        return [r.tenant for r in result.results.values() if r.refusals]

    # bolt's was seen first: acme's (the older by name order alone) is the newcomer.
    assert refused(FirstSeen(state), t0 + timedelta(minutes=1)) == ["acme"]
    assert refused(FirstSeen(state), t0 + timedelta(minutes=2)) == ["acme"]  # a restart
    # Without the record, both are seen now: the namespace then decides (acme first).
    assert refused(None, t0) == ["bolt"]


def test_validate_names_an_ingress_rule_without_host_it_leaves_out(tmp_path: Path) -> None:
    root = manifests(tmp_path)
    mixed = ingress_body("acme", "mixed", "www.acme.example", age=1)
    mixed["spec"]["rules"].append({"http": mixed["spec"]["rules"][0]["http"]})
    write(root, "mixed.yaml", mixed)
    found = [p for p in validate_manifest(load([root])) if p.name.endswith("mixed")]
    assert [(p.field, "[HostnameNotAllowed]" in p.message) for p in found] == [
        ("spec.rules[1].host", True)
    ]


def test_a_dedicated_address_in_the_manifests_is_vetted_against_the_allocation(
    tmp_path: Path,
) -> None:
    """Issue 34, 7(b) without Kubernetes: a Gateway's address of its tenant's allocation
    (the AddressPools of the directory) is served there with its hostname-less route; an
    Ingress naming an address a TenantLoadBalancer of the directory holds, and a Gateway
    naming another tenant's, are `--check` lines with Gateway API's reason."""
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway as command
    from teapot_lb.tenancy.l7address import ANNOTATION_DEDICATED_ADDRESS
    from tenancy.builders import pool_body, tlb_body

    from .builders import gateway, http_route, listener

    root = manifests(tmp_path)
    held = tlb_body("acme", "lb")
    held["status"] = {"addresses": ["198.51.100.3"]}
    write(root, "pools.yaml", pool_body("shared-v4", ["198.51.100.0/26"]),
          pool_body("shared-v6", ["2001:db8:100::/120"]), held)  # fmt: skip
    own = gateway("acme", "own", [listener("http", "HTTP", 80)], age=1,
                  addresses=[{"type": "IPAddress", "value": "198.51.100.5"}])  # fmt: skip
    everything = http_route("acme", "everything", [], age=2, gateway_name="own")
    taken = ingress_body("acme", "taken", "taken.acme.example", age=3,
                         annotations={ANNOTATION_DEDICATED_ADDRESS: "198.51.100.3"})  # fmt: skip
    bolts = gateway("acme", "bolts", [listener("http", "HTTP", 80)], age=4,
                    addresses=[{"type": "IPAddress", "value": "198.51.100.20"}])  # fmt: skip
    write(root, "dedicated.yaml", taken, *(dump(o) for o in (own, everything, bolts)))

    result, problems = translate_directory(root, [ip_address("203.0.113.10")])
    assert problems == []
    (served,) = [r for r in result.config.http_routes if r.owner.name.endswith("everything")]
    assert served.hostnames == ()
    addresses = {str(x.address) for x in result.config.listeners if x.name in served.listeners}
    assert addresses == {"198.51.100.5"}

    checked = CliRunner().invoke(
        command, ["--manifests", str(root), "--address", "203.0.113.10", "--check"]
    )
    assert checked.exit_code == 1
    lines = checked.output.splitlines()
    (taken_line,) = [x for x in lines if "taken" in x and "[AddressNotUsable]" in x]
    assert "held by a TenantLoadBalancer of Tenant acme" in taken_line
    (bolts_line,) = [x for x in lines if "bolts" in x and "[AddressNotUsable]" in x]
    assert "spec.addresses[0].value" in bolts_line and "outside the allocation" in bolts_line
    assert not [x for x in lines if "everything" in x]


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


def test_check_names_a_gateway_mode_request_port_not_served(tmp_path: Path) -> None:
    """Issue 38: a TenantLoadBalancer of provider proxy in the directory is served like
    the manager left it (its status's addresses); what is not served is a `--check` line
    with the field and the reason."""
    from click.testing import CliRunner

    from teapot_lb.cli.gateway import gateway as command
    from tenancy.builders import pool_body, tlb_body

    root = manifests(tmp_path)
    request = tlb_body("acme", "web", mode="Gateway", ports=[
        {"protocol": "TCP", "port": 80, "nodePort": 30080},
        {"protocol": "SCTP", "port": 9, "nodePort": 30009},
    ])  # fmt: skip
    request["status"] = {"addresses": ["198.51.100.5"]}
    write(root, "pools.yaml", pool_body("shared-v4", ["198.51.100.0/26"]))
    write(root, "request.yaml", request)
    result, _ = translate_directory(root, [ip_address("203.0.113.10")])
    (served,) = result.load_balancers.values()
    assert served.served == ["198.51.100.5:80/TCP"]
    checked = CliRunner().invoke(
        command, ["--manifests", str(root), "--address", "203.0.113.10", "--check"]
    )
    assert checked.exit_code == 1
    assert (
        "TenantLoadBalancer/tenant-acme/web: not served: spec.ports[1].protocol: SCTP is not "
        "served by the shared gateway (TCP and UDP only); use provider route "
        "[UnsupportedProtocol]"
    ) in checked.output
