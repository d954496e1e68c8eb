"""The upstream Gateway API CRDs' validation (schema and CEL rules), from the vendored
CRDs, as a kube-apiserver applies it: tests/realapi/test_gateway_api_crds.py checks the
same cases against a real one."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from model.gateway_api_cases import CASES, GW, Case, http_route
from teapot_lb.model.crd_schema import _BUILT_IN, CrdSchema, _is_ip
from teapot_lb.model.gateway_api_schema import (
    CRD_FILES,
    crd_text,
    transition_rules,
    unevaluable_rules,
    upstream_problems,
)
from teapot_lb.model.manifest import parse_object

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "gateway-api"


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_the_vendored_crds_are_the_upstream_files_unchanged(kind: str) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"no upstream copy to compare with ({SHARED} is absent)")
    assert crd_text(kind) == (SHARED / CRD_FILES[kind]).read_text(encoding="utf-8")


def test_the_vendored_crds_ship_with_their_licence() -> None:
    from importlib import resources

    licence = resources.files("teapot_lb.model").joinpath("gateway_api_crds", "LICENSE")
    assert "Apache License" in licence.read_text(encoding="utf-8")


def test_every_rule_of_the_vendored_crds_can_be_evaluated() -> None:
    assert unevaluable_rules() == []


def test_the_only_transition_rule_is_the_gateway_class_controller_name() -> None:
    assert transition_rules() == ["GatewayClass spec.controllerName: self == oldSelf"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_manifest_gets_the_verdict_of_the_upstream_crds(case: Case) -> None:
    body = copy.deepcopy(case.body)
    body["metadata"]["namespace"] = "tenant-a"
    problems = upstream_problems(body)
    if case.refused_with is None:
        assert problems == []
    else:
        assert problems, f"{case.name}: accepted"
        assert any(case.refused_with in p.message for p in problems), problems


def test_a_refusal_names_the_object_and_the_field_of_the_rule() -> None:
    body = http_route(
        {
            "matches": [{"path": {"type": "Exact", "value": "/x"}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/y"}
                    },
                }
            ],
        }
    )
    body["metadata"]["namespace"] = "tenant-a"
    obj, problems = parse_object(body)
    assert obj is None
    [problem] = problems
    assert (problem.kind, problem.namespace, problem.name, problem.field) == (
        "HTTPRoute",
        "tenant-a",
        "r",
        "spec.rules[0]",
    )
    assert problem.message.startswith("When using RequestRedirect filter with path.replace")


def test_status_is_not_validated_as_the_status_subresource_is_not_written_on_create() -> None:
    body = http_route()
    body["status"] = {"parents": "not a list"}
    assert upstream_problems(body) == []


def test_fields_the_schema_does_not_know_are_pruned_before_the_rules_run() -> None:
    body = http_route({"backendRefs": [{"name": "web", "port": 80, "colour": "blue"}]})
    assert upstream_problems(body) == []


def test_a_gateway_class_controller_cannot_change_on_update_but_is_free_on_create() -> None:
    def gateway_class(controller: str) -> dict[str, object]:
        return {
            "apiVersion": GW,
            "kind": "GatewayClass",
            "metadata": {"name": "teapot"},
            "spec": {"controllerName": controller},
        }

    assert upstream_problems(gateway_class("lb.teapot.io/gateway")) == []
    changed = upstream_problems(
        gateway_class("example.com/other"), old=gateway_class("lb.teapot.io/gateway")
    )
    assert [(p.field, p.message) for p in changed] == [
        ("spec.controllerName", "Value is immutable")
    ]
    same = gateway_class("lb.teapot.io/gateway")
    assert upstream_problems(same, old=same) == []


@pytest.mark.parametrize(("text", "ip"), [
    ("192.0.2.1", True), ("2001:db8::1", True), ("192.0.2.01", False),
    ("::ffff:192.0.2.1", False), ("fe80::1%eth0", False), ("www.example.com", False),
])  # fmt: skip
def test_is_ip_is_the_kubernetes_library_function(text: str, ip: bool) -> None:
    assert _is_ip(text) is ip


def _crd(*rules: dict[str, str]) -> dict[str, object]:
    """A one-field CRD whose `spec` carries `rules`."""
    spec = {"type": "object", "properties": {"url": {"type": "string"}},
            "x-kubernetes-validations": list(rules)}  # fmt: skip
    version = {"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}
    return {"spec": {"names": {"kind": "Thing"}, "versions": [version]}}


def test_a_rule_naming_a_function_we_lack_is_reported_and_not_taken_for_a_verdict() -> None:
    schema = CrdSchema.of(_crd({"rule": "isURL(self.url)", "message": "must be a URL"}), "v1")
    assert schema.unevaluable() == ["Thing spec: 'isURL(self.url)' (no function isURL)"]
    assert schema.check({"spec": {"url": "not a url"}}) == []


def test_a_rule_that_fails_to_evaluate_refuses_with_the_error_and_its_message() -> None:
    schema = CrdSchema.of(_crd({"rule": "self.url.size() > 1", "message": "url is short"}), "v1")
    [error] = schema.check({"spec": {}})
    assert error.path == "spec"
    assert error.message.endswith("evaluating rule: url is short")


def test_validate_warns_of_an_unevaluable_rule(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from teapot_lb.cli import validate as command

    monkeypatch.setattr(command, "unevaluable_rules", lambda: ["Thing spec: 'isURL(...)'"])
    body = http_route()
    body["metadata"]["namespace"] = "tenant-a"
    (tmp_path / "route.yaml").write_text(yaml.safe_dump(body))
    result = CliRunner().invoke(command.validate, [str(tmp_path / "route.yaml")])
    assert "warning: Gateway API CRD rule not evaluated: Thing spec: 'isURL(...)'" in (
        result.output
    )


CALLS = {
    "size": "size([1])", "matches": "'a'.matches('a')", "contains": "'a'.contains('a')",
    "startsWith": "'a'.startsWith('a')", "endsWith": "'a'.endsWith('a')",
    "duration": "duration('1s')", "timestamp": "timestamp('2026-01-01T00:00:00Z')",
    "int": "int('1')", "uint": "uint(1)", "double": "double(1)", "string": "string(1)",
    "bytes": "bytes('a')", "type": "type(1)", "dyn": "dyn(1)",
}  # fmt: skip


@pytest.mark.parametrize("function", sorted(_BUILT_IN))
def test_each_function_taken_for_built_in_is_evaluated_by_the_library(function: str) -> None:
    call = CALLS[function]
    schema = CrdSchema.of(_crd({"rule": f"{call} == {call}", "message": "no"}), "v1")
    assert schema.unevaluable() == []
    assert schema.check({"spec": {}}) == []
