"""The upstream Gateway API CRDs' own validation, from the vendored CRDs (package data
`gateway_api_crds/`, unchanged, with their licence): what a kube-apiserver with those CRDs
installed refuses, refused the same way in standalone mode, `teapot-lb validate` and the
webhook (:func:`teapot_lb.model.manifest.parse_object` calls :func:`upstream_problems`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from teapot_lb.model.crd_schema import CrdSchema, FieldError
from teapot_lb.model.gateway_api import GATEWAY_GROUP
from teapot_lb.model.problem import Problem

# The kinds the gateway reads, and their vendored CRD.
CRD_FILES = {
    "GatewayClass": "gateway.networking.k8s.io_gatewayclasses.yaml",
    "Gateway": "gateway.networking.k8s.io_gateways.yaml",
    "HTTPRoute": "gateway.networking.k8s.io_httproutes.yaml",
    "TLSRoute": "gateway.networking.k8s.io_tlsroutes.yaml",
    "TCPRoute": "gateway.networking.k8s.io_tcproutes.yaml",
    "UDPRoute": "gateway.networking.k8s.io_udproutes.yaml",
}
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_text(kind: str) -> str:
    """The vendored CRD file of `kind`, as shipped."""
    folder = resources.files("teapot_lb.model").joinpath("gateway_api_crds")
    return folder.joinpath(CRD_FILES[kind]).read_text(encoding="utf-8")


@functools.cache
def schema_of(kind: str, version: str) -> CrdSchema:
    """The compiled schema of `kind` at `version` (compiled once, on first use)."""
    return CrdSchema.of(yaml.load(crd_text(kind), Loader=_Loader), version)


def upstream_problems(
    body: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[Problem]:
    """What the upstream CRD of `body`'s kind refuses of it (none for other kinds):
    each refused field with the CRD's own message, as the API server says it."""
    api_version, kind = str(body.get("apiVersion", "")), str(body.get("kind", ""))
    group, _, version = api_version.rpartition("/")
    if group != GATEWAY_GROUP or kind not in CRD_FILES:
        return []
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = str(meta.get("name") or "<unnamed>"), meta.get("namespace")
    try:
        schema = schema_of(kind, version)
    except KeyError:
        return []  # a version the CRD does not serve: the model refuses its apiVersion
    if old is None:
        errors = _create_errors(kind, version, json.dumps(body, sort_keys=True, default=str))
    else:
        errors = tuple(schema.check(body, old))
    return [
        Problem(kind, name, namespace if isinstance(namespace, str) else None, e.path, e.message)
        for e in errors
    ]


@functools.lru_cache(maxsize=2048)
def _create_errors(kind: str, version: str, text: str) -> tuple[FieldError, ...]:
    """The errors of a create, by the object's text: standalone mode parses every
    manifest again on each change of its directory, and a rule costs 10 - 100 µs."""
    return tuple(schema_of(kind, version).check(json.loads(text)))


def unevaluable_rules() -> list[str]:
    """The vendored CRDs' rules that cannot be evaluated here (empty when all can), each
    `Kind field: rule (why)`: reported by `validate`, the gateway's start and `--check`."""
    return [line for kind in CRD_FILES for line in schema_of(kind, "v1").unevaluable()]


def transition_rules() -> list[str]:
    """`Kind field: rule` of the rules that compare with the old object (`oldSelf`): they
    run on updates in the webhook, never on a create or on manifests."""
    return [
        f"{kind} {path}: {rule.source}"
        for kind in CRD_FILES
        for path, rule in schema_of(kind, "v1").rules()
        if rule.transition
    ]
