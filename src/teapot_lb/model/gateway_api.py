"""Typed views of Gateway API (gateway.networking.k8s.io/v1, standard channel v1.6.1):
GatewayClass, Gateway, HTTPRoute, TLSRoute, TCPRoute, UDPRoute — the fields the Teapot
gateway serves; every other field is kept (``extra="allow"``, :class:`L7View`).

Cross-namespace references are not served (no ReferenceGrant): a reference into another
namespace is refused by :mod:`teapot_lb.tenancy.l7vet` with its reason.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from teapot_lb.model.common import Identified, ObjectMeta
from teapot_lb.model.ingress import L7View

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_API_VERSION = f"{GATEWAY_GROUP}/v1"


# ------------------------------------------------------------------ references


class ParentReference(L7View):
    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    namespace: str | None = None
    name: str = Field(min_length=1)
    section_name: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)


class BackendRef(L7View):
    group: str = ""
    kind: str = "Service"
    name: str = Field(min_length=1)
    namespace: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    weight: int = Field(default=1, ge=0, le=1000000)


class SecretObjectReference(L7View):
    group: str = ""
    kind: str = "Secret"
    name: str = Field(min_length=1)
    namespace: str | None = None


class RouteParentStatus(L7View):
    parent_ref: ParentReference
    controller_name: str
    conditions: list[dict[str, Any]] = []


class RouteStatus(L7View):
    parents: list[RouteParentStatus] = []


# ------------------------------------------------------------------ HTTPRoute


class PathMatchType(StrEnum):
    EXACT = "Exact"
    PATH_PREFIX = "PathPrefix"
    REGULAR_EXPRESSION = "RegularExpression"


class MatchType(StrEnum):
    EXACT = "Exact"
    REGULAR_EXPRESSION = "RegularExpression"


class HTTPPathMatch(L7View):
    type: PathMatchType = PathMatchType.PATH_PREFIX
    value: str = "/"


class HTTPHeaderMatch(L7View):
    type: MatchType = MatchType.EXACT
    name: str = Field(min_length=1)
    value: str


class HTTPRouteMatch(L7View):
    path: HTTPPathMatch | None = None
    headers: list[HTTPHeaderMatch] = []
    query_params: list[HTTPHeaderMatch] = []
    method: str | None = None


class HTTPHeader(L7View):
    name: str = Field(min_length=1)
    value: str


class HTTPHeaderFilter(L7View):
    set: list[HTTPHeader] = []
    add: list[HTTPHeader] = []
    remove: list[str] = []


class HTTPPathModifier(L7View):
    type: str
    replace_full_path: str | None = None
    replace_prefix_match: str | None = None


class HTTPRequestRedirectFilter(L7View):
    scheme: str | None = None
    hostname: str | None = None
    path: HTTPPathModifier | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    status_code: int = 302


class HTTPURLRewriteFilter(L7View):
    hostname: str | None = None
    path: HTTPPathModifier | None = None


class HTTPRouteFilterType(StrEnum):
    REQUEST_HEADER_MODIFIER = "RequestHeaderModifier"
    RESPONSE_HEADER_MODIFIER = "ResponseHeaderModifier"
    REQUEST_REDIRECT = "RequestRedirect"
    URL_REWRITE = "URLRewrite"
    REQUEST_MIRROR = "RequestMirror"
    CORS = "CORS"
    EXTENSION_REF = "ExtensionRef"


class HTTPRouteFilter(L7View):
    type: str
    request_header_modifier: HTTPHeaderFilter | None = None
    response_header_modifier: HTTPHeaderFilter | None = None
    request_redirect: HTTPRequestRedirectFilter | None = None
    url_rewrite: HTTPURLRewriteFilter | None = None
    extension_ref: dict[str, Any] | None = None


class HTTPBackendRef(BackendRef):
    filters: list[HTTPRouteFilter] = []


def _default_matches() -> list[HTTPRouteMatch]:
    return [HTTPRouteMatch(path=HTTPPathMatch())]


class HTTPRouteRule(L7View):
    name: str | None = None
    matches: list[HTTPRouteMatch] = Field(default_factory=_default_matches)
    filters: list[HTTPRouteFilter] = []
    backend_refs: list[HTTPBackendRef] = []


class HTTPRouteSpec(L7View):
    parent_refs: list[ParentReference] = []
    hostnames: list[str] = []
    rules: list[HTTPRouteRule] = Field(default_factory=lambda: [HTTPRouteRule()])


# ------------------------------------------------------------------ TLS, TCP, UDP routes


class StreamRouteRule(L7View):
    name: str | None = None
    backend_refs: list[BackendRef] = []


class TLSRouteSpec(L7View):
    parent_refs: list[ParentReference] = []
    hostnames: list[str] = []
    rules: list[StreamRouteRule] = []


class StreamRouteSpec(L7View):
    parent_refs: list[ParentReference] = []
    rules: list[StreamRouteRule] = []


class _Route(Identified, L7View):
    api_version: Literal["gateway.networking.k8s.io/v1"] = Field(
        default="gateway.networking.k8s.io/v1", alias="apiVersion"
    )
    metadata: ObjectMeta
    status: RouteStatus = Field(default_factory=RouteStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"


class HTTPRoute(_Route):
    kind: Literal["HTTPRoute"] = "HTTPRoute"
    spec: HTTPRouteSpec = Field(default_factory=HTTPRouteSpec)


class TLSRoute(_Route):
    kind: Literal["TLSRoute"] = "TLSRoute"
    spec: TLSRouteSpec = Field(default_factory=TLSRouteSpec)


class TCPRoute(_Route):
    kind: Literal["TCPRoute"] = "TCPRoute"
    spec: StreamRouteSpec = Field(default_factory=StreamRouteSpec)


class UDPRoute(_Route):
    kind: Literal["UDPRoute"] = "UDPRoute"
    spec: StreamRouteSpec = Field(default_factory=StreamRouteSpec)


Route = HTTPRoute | TLSRoute | TCPRoute | UDPRoute


def route_backend_refs(route: Route) -> list[tuple[str, BackendRef]]:
    """(field path, reference) of every backend a route names."""
    per_rule: list[list[BackendRef]]
    if isinstance(route, HTTPRoute):
        per_rule = [list(rule.backend_refs) for rule in route.spec.rules]
    else:
        per_rule = [list(rule.backend_refs) for rule in route.spec.rules]
    return [
        (f"spec.rules[{i}].backendRefs[{j}]", ref)
        for i, refs in enumerate(per_rule)
        for j, ref in enumerate(refs)
    ]


def route_hostnames(route: Route) -> list[str]:
    return list(route.spec.hostnames) if isinstance(route, HTTPRoute | TLSRoute) else []


# ------------------------------------------------------------------ GatewayClass, Gateway


class GatewayClassSpec(L7View):
    controller_name: str = Field(min_length=1)


class ConditionsOnly(L7View):
    conditions: list[dict[str, Any]] = []


class GatewayClass(Identified, L7View):
    namespaced: ClassVar[bool] = False

    api_version: Literal["gateway.networking.k8s.io/v1"] = Field(
        default="gateway.networking.k8s.io/v1", alias="apiVersion"
    )
    kind: Literal["GatewayClass"] = "GatewayClass"
    metadata: ObjectMeta
    spec: GatewayClassSpec
    status: ConditionsOnly = Field(default_factory=ConditionsOnly)


class ListenerProtocol(StrEnum):
    HTTP = "HTTP"
    HTTPS = "HTTPS"
    TLS = "TLS"
    TCP = "TCP"
    UDP = "UDP"


class TLSMode(StrEnum):
    TERMINATE = "Terminate"
    PASSTHROUGH = "Passthrough"


class GatewayTLSConfig(L7View):
    mode: TLSMode = TLSMode.TERMINATE
    certificate_refs: list[SecretObjectReference] = []


class RouteNamespaces(L7View):
    from_: str = Field(default="Same", alias="from")


class AllowedRoutes(L7View):
    namespaces: RouteNamespaces = Field(default_factory=RouteNamespaces)
    kinds: list[dict[str, Any]] = []


class Listener(L7View):
    name: str = Field(min_length=1)
    hostname: str | None = None
    port: int = Field(ge=1, le=65535)
    protocol: str
    tls: GatewayTLSConfig | None = None
    allowed_routes: AllowedRoutes = Field(default_factory=AllowedRoutes)


class GatewaySpec(L7View):
    gateway_class_name: str = Field(min_length=1)
    listeners: list[Listener] = []
    addresses: list[dict[str, Any]] = []


class ListenerStatus(L7View):
    name: str
    attached_routes: int = 0
    supported_kinds: list[dict[str, Any]] = []
    conditions: list[dict[str, Any]] = []


class GatewayStatus(L7View):
    addresses: list[dict[str, Any]] = []
    conditions: list[dict[str, Any]] = []
    listeners: list[ListenerStatus] = []


class Gateway(Identified, L7View):
    api_version: Literal["gateway.networking.k8s.io/v1"] = Field(
        default="gateway.networking.k8s.io/v1", alias="apiVersion"
    )
    kind: Literal["Gateway"] = "Gateway"
    metadata: ObjectMeta
    spec: GatewaySpec
    status: GatewayStatus = Field(default_factory=GatewayStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"


# Which route kinds a listener protocol takes.
ROUTE_KINDS_OF_PROTOCOL: dict[str, tuple[str, ...]] = {
    ListenerProtocol.HTTP: ("HTTPRoute",),
    ListenerProtocol.HTTPS: ("HTTPRoute",),
    ListenerProtocol.TLS: ("TLSRoute",),
    ListenerProtocol.TCP: ("TCPRoute",),
    ListenerProtocol.UDP: ("UDPRoute",),
}


__all__ = [
    "GATEWAY_API_VERSION",
    "GATEWAY_GROUP",
    "ROUTE_KINDS_OF_PROTOCOL",
    "BackendRef",
    "Gateway",
    "GatewayClass",
    "HTTPRoute",
    "HTTPRouteMatch",
    "HTTPRouteRule",
    "Listener",
    "ListenerProtocol",
    "ParentReference",
    "Route",
    "TCPRoute",
    "TLSMode",
    "TLSRoute",
    "UDPRoute",
    "route_backend_refs",
    "route_hostnames",
]
