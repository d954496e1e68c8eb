"""A route's own rules (HTTPRoute, TLSRoute): Gateway parents, Service backendRefs of its
own namespace, and for an HTTPRoute the matches and filters the gateway implements; every
field it does not implement is refused by name (Gateway API's UnsupportedValue)."""

from __future__ import annotations

from pydantic import BaseModel

from teapot_lb.model.gateway_api import (
    GATEWAY_GROUP,
    BackendRef,
    HTTPPathModifier,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteRule,
    MatchType,
    PathMatchType,
    Route,
    route_backend_refs,
)
from teapot_lb.tenancy.l7vet.hostnames import HOSTNAME_RE
from teapot_lb.tenancy.l7vet.refusal import L7Refusal, L7Rule
from teapot_lb.tenancy.l7vet.values import unsafe_path, unsafe_token, unsafe_value
from teapot_lb.tenancy.l7vet.world import L7Object, source_of

# field name); the gateway reads only that one of a filter.
_SERVED_FILTERS = {
    "RequestHeaderModifier": ("request_header_modifier", "requestHeaderModifier"),
    "ResponseHeaderModifier": ("response_header_modifier", "responseHeaderModifier"),
    "RequestRedirect": ("request_redirect", "requestRedirect"),
    "URLRewrite": ("url_rewrite", "urlRewrite"),
}
_PATH_MODIFIERS = {"ReplaceFullPath": "replaceFullPath", "ReplacePrefixMatch": "replacePrefixMatch"}


def _unsupported(where: str, message: str) -> L7Refusal:
    return L7Refusal(L7Rule.UNSUPPORTED_VALUE, where, message)


def _unserved_fields(part: object, where: str) -> list[L7Refusal]:
    """Every field of a route's spec that the gateway does not implement (kept by the
    views as extra fields): refused by name, never silently ignored. A filter of a type
    not served is refused as such, not field by field."""
    out: list[L7Refusal] = []
    if isinstance(part, list):
        for i, item in enumerate(part):
            out += _unserved_fields(item, f"{where}[{i}]")
        return out
    if not isinstance(part, BaseModel):
        return out
    if isinstance(part, HTTPRouteFilter) and part.type not in _SERVED_FILTERS:
        return out
    for key in sorted(part.model_extra or {}):
        out.append(_unsupported(f"{where}.{key}", f"{key} is not implemented by the gateway"))
    for name, info in type(part).model_fields.items():
        out += _unserved_fields(getattr(part, name), f"{where}.{info.alias or name}")
    return out


def _path_modifier_refusals(
    modifier: HTTPPathModifier | None, rule: HTTPRouteRule, where: str
) -> list[L7Refusal]:
    """Gateway API HTTPPathModifier: the field of its type, a safe path, and for
    ReplacePrefixMatch only PathPrefix matches (the spec: Accepted=False otherwise)."""
    if modifier is None:
        return []
    at = f"{where}.path"
    wanted = _PATH_MODIFIERS.get(modifier.type)
    if wanted is None:
        return [_unsupported(f"{at}.type", f"path modifier {modifier.type} is not implemented "
                             f"({', '.join(_PATH_MODIFIERS)})")]  # fmt: skip
    value = (
        modifier.replace_full_path if wanted == "replaceFullPath" else modifier.replace_prefix_match
    )
    if value is None:
        return [_unsupported(f"{at}.{wanted}", f"{modifier.type} needs {wanted}")]
    out: list[L7Refusal] = []
    if value != "" or wanted == "replaceFullPath":  # (an empty prefix replacement removes it)
        bad = unsafe_path(value, f"{at}.{wanted}")
        out += [bad] if bad else []
    if wanted == "replacePrefixMatch":
        for j, match in enumerate(rule.matches):
            if match.path is not None and match.path.type is not PathMatchType.PATH_PREFIX:
                out.append(
                    _unsupported(
                        f"{at}.type",
                        f"ReplacePrefixMatch is only compatible with a PathPrefix match; "
                        f"matches[{j}] is {match.path.type.value}",
                    )
                )
    return out


def _filter_refusals(flt: HTTPRouteFilter, rule: HTTPRouteRule, where: str) -> list[L7Refusal]:
    if flt.type not in _SERVED_FILTERS:
        return [_unsupported(f"{where}.type", f"filter {flt.type} is not implemented "
                             f"({', '.join(sorted(_SERVED_FILTERS))})")]  # fmt: skip
    out: list[L7Refusal] = []
    for attr, name in (
        ("request_header_modifier", "requestHeaderModifier"),
        ("response_header_modifier", "responseHeaderModifier"),
    ):
        modifier = getattr(flt, attr)
        if modifier is None:
            continue
        for op in ("set", "add"):
            for m, header in enumerate(getattr(modifier, op)):
                at = f"{where}.{name}.{op}[{m}]"
                for bad in (
                    unsafe_token(header.name, f"{at}.name"),
                    unsafe_value(header.value, f"{at}.value"),
                ):
                    out += [bad] if bad else []
        for m, header_name in enumerate(modifier.remove):
            bad = unsafe_token(header_name, f"{where}.{name}.remove[{m}]")
            out += [bad] if bad else []
    redirect = flt.request_redirect
    if redirect is not None:
        at = f"{where}.requestRedirect"
        if redirect.scheme not in (None, "http", "https"):
            out.append(L7Refusal(L7Rule.UNSAFE_VALUE, f"{at}.scheme", "scheme http or https"))
        if redirect.hostname is not None and not HOSTNAME_RE.match(redirect.hostname):
            out.append(
                L7Refusal(
                    L7Rule.UNSAFE_VALUE,
                    f"{at}.hostname",
                    f"{redirect.hostname!r} is not a DNS name",
                )
            )
        out += _path_modifier_refusals(redirect.path, rule, at)
        if redirect.status_code not in (301, 302, 303, 307, 308):
            out.append(
                _unsupported(
                    f"{at}.statusCode",
                    f"status {redirect.status_code}: 301, 302, 303, 307 or 308",
                )
            )
    rewrite = flt.url_rewrite
    if rewrite is not None:
        at = f"{where}.urlRewrite"
        host = rewrite.hostname
        if host is not None and (host.startswith("*.") or not HOSTNAME_RE.match(host)):
            out.append(
                L7Refusal(L7Rule.UNSAFE_VALUE, f"{at}.hostname", f"{host!r} is not a DNS name")
            )
        out += _path_modifier_refusals(rewrite.path, rule, at)
    attr, field_name = _SERVED_FILTERS[flt.type]
    if getattr(flt, attr) is None:
        out.append(_unsupported(f"{where}.{field_name}", f"a {flt.type} filter needs {field_name}"))
    for other_attr, other in _SERVED_FILTERS.values():
        if other_attr != attr and getattr(flt, other_attr) is not None:
            out.append(
                _unsupported(f"{where}.{other}", f"a {flt.type} filter has no field {other}")
            )
    return out


def _http_route_refusals(obj: HTTPRoute) -> list[L7Refusal]:
    out: list[L7Refusal] = _unserved_fields(obj.spec, "spec")
    for i, rule in enumerate(obj.spec.rules):
        for j, match in enumerate(rule.matches):
            where = f"spec.rules[{i}].matches[{j}]"
            if match.path is not None:
                if match.path.type is PathMatchType.REGULAR_EXPRESSION:
                    out.append(
                        _unsupported(
                            f"{where}.path.type",
                            "RegularExpression path matches are not implemented",
                        )
                    )
                else:
                    bad = unsafe_path(match.path.value, f"{where}.path.value")
                    out += [bad] if bad else []
            for kind, entries in (("headers", match.headers), ("queryParams", match.query_params)):
                for k, entry in enumerate(entries):
                    at = f"{where}.{kind}[{k}]"
                    if entry.type is MatchType.REGULAR_EXPRESSION:
                        out.append(
                            _unsupported(
                                f"{at}.type", "RegularExpression matches are not implemented"
                            )
                        )
                    for bad in (
                        unsafe_token(entry.name, f"{at}.name"),
                        unsafe_value(entry.value, f"{at}.value"),
                    ):
                        out += [bad] if bad else []
            if match.method is not None:
                bad = unsafe_token(match.method, f"{where}.method")
                out += [bad] if bad else []
        for k, flt in enumerate(rule.filters):
            out += _filter_refusals(flt, rule, f"spec.rules[{i}].filters[{k}]")
        types = [f.type for f in rule.filters]
        for repeated in sorted({t for t in types if types.count(t) > 1 and t in _SERVED_FILTERS}):
            out.append(
                L7Refusal(
                    L7Rule.INCOMPATIBLE_FILTERS,
                    f"spec.rules[{i}].filters",
                    f"{repeated} is given more than once (once per rule)",
                )
            )
        if "RequestRedirect" in types and "URLRewrite" in types:
            out.append(
                L7Refusal(
                    L7Rule.INCOMPATIBLE_FILTERS,
                    f"spec.rules[{i}].filters",
                    "RequestRedirect and URLRewrite cannot be used together",
                )
            )
        for k, backend in enumerate(rule.backend_refs):
            if backend.filters:
                out.append(
                    _unsupported(
                        f"spec.rules[{i}].backendRefs[{k}].filters",
                        "filters on a backendRef are not implemented; put them on the rule",
                    )
                )
    return out


def _backend_ref_refusal(obj: Route, where: str, ref: BackendRef) -> L7Refusal | None:
    """A backendRef the gateway never follows: not a Service, or another namespace's."""
    if ref.group or ref.kind != "Service":
        return L7Refusal(L7Rule.INVALID_KIND, where, f"{ref.kind} {ref.name}: only Services")
    if ref.namespace not in (None, source_of(obj).namespace):
        return L7Refusal(
            L7Rule.REF_NOT_PERMITTED,
            f"{where}.namespace",
            f"Service {ref.namespace}/{ref.name} is in another namespace; a route reaches "
            "only the Services of its own namespace",
        )
    return None


def unresolved_backend_refs(obj: L7Object) -> dict[str, L7Refusal]:
    """An HTTPRoute's backendRefs that are never followed, by their field path
    (`spec.rules[i].backendRefs[j]`): Gateway API keeps the route and answers their
    requests 500, with ResolvedRefs=False (RefNotPermitted, InvalidKind)."""
    if not isinstance(obj, HTTPRoute):
        return {}
    out = {}
    for where, ref in route_backend_refs(obj):
        bad = _backend_ref_refusal(obj, where, ref)
        if bad is not None:
            out[where] = bad
    return out


def route_refusals(obj: Route) -> list[L7Refusal]:
    out: list[L7Refusal] = []
    for i, parent in enumerate(obj.spec.parent_refs):
        if parent.group != GATEWAY_GROUP or parent.kind != "Gateway":
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"spec.parentRefs[{i}]",
                    f"{parent.kind} parents are not served (only Gateways)",
                )
            )
    for where, ref in route_backend_refs(obj):
        bad = _backend_ref_refusal(obj, where, ref)
        if bad is not None and not isinstance(obj, HTTPRoute):
            # (an HTTPRoute is served without it: unresolved_backend_refs)
            out.append(L7Refusal(L7Rule.BACKEND_NOT_ALLOWED, bad.field, bad.message))
        elif bad is None and ref.port is None:
            out.append(L7Refusal(L7Rule.NOT_SERVED, f"{where}.port", "a Service needs a port"))
    if isinstance(obj, HTTPRoute):
        out += _http_route_refusals(obj)
    else:
        out += _unserved_fields(obj.spec, "spec")
    return out
