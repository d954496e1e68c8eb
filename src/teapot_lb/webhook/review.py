"""AdmissionReview v1 for the lb.teapot.io kinds (pure: a decoded review in, a review out).

An object is admitted when it parses and when adding it to the objects that already
exist brings no problem about it (so an overlap with an existing pool is caught, but an
unrelated broken object does not block this change). Deletions are always admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from teapot_lb.model import GROUP, ApiObject, Problem, parse_object
from teapot_lb.validation import validate_change

ADMISSION_API_VERSION = "admission.k8s.io/v1"
# The gateway's kinds (Ingress, Gateway API): vetted by the `l7` check when one is given.
L7_GROUPS = frozenset({"networking.k8s.io", "gateway.networking.k8s.io"})
L7Check = Callable[[ApiObject], list[Problem]]


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 request."""


def _response(
    uid: str, allowed: bool, message: str = "", warnings: list[str] | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 422, "reason": "Invalid", "message": message}
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def denial_message(problems: Iterable[Problem]) -> str:
    """`Kind/ns/name: field: message` lines joined by `; ` (kubectl shows one line)."""
    return "; ".join(str(p) for p in problems)


def review(
    body: object,
    existing: Iterable[ApiObject],
    config_namespace: str | None = None,
    l7: L7Check | None = None,
) -> tuple[dict[str, Any], str, bool]:
    """The AdmissionReview answering `body`, the kind reviewed and whether it was allowed.

    With `config_namespace`, an object created elsewhere is admitted with a warning
    (kubectl prints it) that the controller will not read it. With `l7`, Ingresses and
    Gateway API objects are vetted by it (the gateway's rules). Raises BadReview when
    `body` is not an AdmissionReview request.
    """
    if not isinstance(body, Mapping) or body.get("kind") != "AdmissionReview":
        raise BadReview("expected an AdmissionReview")
    request = body.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        raise BadReview("the AdmissionReview has no request with a uid")
    uid = request["uid"]
    kind_info = request.get("kind") if isinstance(request.get("kind"), Mapping) else {}
    kind = str(kind_info.get("kind", "")) if isinstance(kind_info, Mapping) else ""
    group = str(kind_info.get("group", "")) if isinstance(kind_info, Mapping) else ""
    ours = group == GROUP or (l7 is not None and group in L7_GROUPS)
    if request.get("operation") not in ("CREATE", "UPDATE") or not ours:
        return _response(uid, True), kind, True
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        raise BadReview("a CREATE or UPDATE review needs the object")
    document = _with_identity(obj, request)
    old = request.get("oldObject") if request.get("operation") == "UPDATE" else None
    parsed, problems = parse_object(document, old=old if isinstance(old, Mapping) else None)
    if l7 is not None and group in L7_GROUPS:
        if _only_gateway_notes(obj, request.get("oldObject")):
            return _response(uid, True), kind, True
        if parsed is not None and not problems:
            problems = l7(parsed)
        if problems:
            return _response(uid, False, denial_message(problems)), kind, False
        return _response(uid, True), kind, True
    if parsed is not None and not problems:
        problems = validate_change(parsed, existing)
    if problems:
        return _response(uid, False, denial_message(problems)), kind, False
    namespace = document["metadata"].get("namespace")
    warnings = []
    if config_namespace and namespace != config_namespace:
        warnings.append(
            f"teapot-lb reads {kind} objects from namespace {config_namespace!r} only;"
            f" this one in {namespace!r} has no effect"
        )
    return _response(uid, True, warnings=warnings), kind, True


_GATEWAY_NOTES = "gateway.lb.teapot.io/"


def _only_gateway_notes(obj: Mapping[str, Any], old: object) -> bool:
    """An update that changes only the gateway's own annotations (the refusal it notes on
    an Ingress): admitted as it is, or the gateway could not tell a refused object why."""
    if not isinstance(old, Mapping):
        return False

    def content(body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        annotations = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if not k.startswith(_GATEWAY_NOTES)
        }
        rest = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        return {**rest, "labels": meta.get("labels") or {}, "annotations": annotations}

    return content(obj) == content(old)


def _with_identity(obj: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The object with the namespace and name the API server will give it (a create may
    leave the namespace to the URL, and the name to `generateName`)."""
    document = dict(obj)
    meta = dict(document.get("metadata") or {})
    if not meta.get("namespace") and request.get("namespace"):
        meta["namespace"] = request["namespace"]
    if not meta.get("name"):
        meta["name"] = request.get("name") or f"{meta.get('generateName', '')}(generated)"
    document["metadata"] = meta
    return document
