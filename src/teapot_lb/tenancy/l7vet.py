"""Vetting a tenant's Ingresses and Gateway API objects (pure): may the shared gateway
serve this for this tenant?

The same rules run in the admission webhook and at every reconcile of the gateway's
objects (an object written while the webhook was down is still refused). A refusal names
the object, the field and the rule (:class:`L7Rule`, the condition's and Event's reason).

Objects live in the tenant's namespace of the management cluster, mirrored there by the
tenant agent; their source (cluster, namespace, name in the tenant cluster) is in labels,
and what they reference (Secrets, Services) is mirrored under :func:`mirrored_name`.

Hostnames: a Tenant's `dnsDomains` entry `a.example` holds `a.example` and every name under
it; `*.a.example` holds every name under `a.example` but not `a.example` itself. A hostname
`*.s` (a wildcard) needs the whole of `s`: `*.a.example` is not within `b.example`, nor
within a tenant that holds only `x.a.example`. A hostname already served for another tenant
is refused to the newcomer (the older object by creationTimestamp, then name, keeps it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property

from pydantic import BaseModel

from teapot_lb.addresses import IPAddress
from teapot_lb.model.common import ObjectRef, creation_order, dump
from teapot_lb.model.gateway_api import (
    GATEWAY_GROUP,
    BackendRef,
    Gateway,
    HTTPPathModifier,
    HTTPRoute,
    HTTPRouteFilter,
    HTTPRouteRule,
    ListenerProtocol,
    MatchType,
    PathMatchType,
    Route,
    TLSMode,
    TLSRoute,
    route_backend_refs,
    route_hostnames,
)
from teapot_lb.model.ingress import INGRESS_CLASS, Ingress
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.tenancy import Tenant, TenantMode
from teapot_lb.tenancy.l7address import AddressRefusal, Wanted, is_dedicated, wanted_address
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY, certificate_problem
from teapot_lb.tenancy.refusal import Refusal
from teapot_lb.tenancy.request import LABEL_CLUSTER, request_name
from teapot_lb.tenancy.vet import tenant_of

L7Object = Ingress | Gateway | HTTPRoute | TLSRoute | Route
LABEL_SOURCE_NAMESPACE = "lb.teapot.io/source-namespace"
LABEL_SOURCE_NAME = "lb.teapot.io/source-name"
# The GatewayClass of the management cluster that mirrored Gateways are given.
GATEWAY_CLASS = "teapot"

# Limits on what one object may ask of the shared gateway.
MAX_OBJECT_BYTES = 64 * 1024
MAX_HOSTNAMES = 32
MAX_RULES = 64
MAX_PATHS = 128
MAX_LISTENERS = 32
# Ports shared by hostname: every tenant's HTTP on 80, HTTPS (terminated) and TLS
# passthrough both on 443 (the data plane reads the SNI: a passthrough route's names go
# through, the others are terminated). Any other (port, protocol) is the one tenant's,
# counted against its `quotas.ports`.
SHARED_PORTS = {ListenerProtocol.HTTP: 80, ListenerProtocol.HTTPS: 443, ListenerProtocol.TLS: 443}


class L7Rule(StrEnum):
    """The rule a refused object broke; the value is the condition's and Event's reason."""

    NO_TENANT = "NoTenant"
    AMBIGUOUS_TENANT = "AmbiguousTenant"
    MODE_NOT_ALLOWED = "ModeNotAllowed"  # the Tenant may not use the gateway
    HOSTNAME_NOT_ALLOWED = "HostnameNotAllowed"  # outside the tenant's DNS domains
    HOSTNAME_TAKEN = "HostnameTaken"  # served for another tenant already
    INVALID_HOSTNAME = "InvalidHostname"
    SECRET_NOT_ALLOWED = "SecretNotAllowed"  # another namespace's Secret, or not a Secret
    INVALID_CERTIFICATE = "InvalidCertificate"
    SNIPPET_NOT_ALLOWED = "SnippetNotAllowed"  # annotations that carry raw proxy config
    UNSAFE_VALUE = "UnsafeValue"  # a value that could break out of the rendered config
    NOT_SERVED = "NotServed"  # a feature the gateway does not serve
    # Gateway API's route reasons: a filter, match or field the gateway does not
    # implement; filters that cannot go together (RequestRedirect and URLRewrite).
    UNSUPPORTED_VALUE = "UnsupportedValue"
    INCOMPATIBLE_FILTERS = "IncompatibleFilters"
    # An HTTPRoute's backendRef that does not resolve (ResolvedRefs=False, the route
    # served, the reference's requests answered 500): Gateway API's reasons.
    BACKEND_NOT_FOUND = "BackendNotFound"
    REF_NOT_PERMITTED = "RefNotPermitted"  # another namespace's Service (no ReferenceGrant)
    INVALID_KIND = "InvalidKind"  # not a Service
    PORT_NOT_ALLOWED = "PortNotAllowed"
    PORT_TAKEN = "PortTaken"  # another tenant's port on the shared gateway
    QUOTA_EXCEEDED = "QuotaExceeded"
    BACKEND_NOT_ALLOWED = "BackendNotAllowed"  # not a Service of the same namespace
    OVERSIZED = "Oversized"
    # A dedicated gateway address (tenancy.l7address), Gateway API's Gateway reasons:
    # asked in a way not served (refused); not usable or not assigned (not programmed).
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    ADDRESS_NOT_USABLE = "AddressNotUsable"
    ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"


class L7Refusal(Refusal[L7Rule]):
    """Why an object is refused; its text names the rule too (`gateway --check` lists it)."""

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}]"


CertificateCheck = Callable[[bytes, bytes], str | None]


@dataclass(frozen=True)
class L7World:
    """What vetting reads: the Tenants, every gateway object of every tenant (for stolen
    hostnames and ports), and the mirrored Secrets by key (None: not known, as in a
    webhook without a Secret cache; certificates are then vetted at reconcile).
    Dedicated addresses (:mod:`.l7address`) also read the AddressPools by name and, per
    Tenant name, the addresses its TenantLoadBalancers hold."""

    tenants: Sequence[Tenant]
    objects: Sequence[L7Object] = ()
    secrets: Mapping[str, Mapping[str, bytes]] | None = None
    check_certificate: CertificateCheck = field(default=certificate_problem)
    pools: Mapping[str, AddressPool] = field(default_factory=dict)
    held: Mapping[str, frozenset[IPAddress]] = field(default_factory=dict)

    @cached_property
    def claims(self) -> _Claims:
        """Who serves which hostname and exclusive port, oldest first (built once)."""
        namespaces = {t.spec.namespace for t in self.tenants}
        claims = _Claims()
        for obj in self.objects:
            if not served_here(obj) or obj.metadata.namespace not in namespaces:
                continue
            entry = (creation_order(obj), obj.metadata.namespace or "", obj.ref)
            for _, host in claimed_hostnames(obj):
                if host:
                    claims.hosts.setdefault(host, []).append(entry)
            if isinstance(obj, Gateway):
                for port in exclusive_ports(obj):
                    claims.ports.setdefault(port, []).append(entry)
        for entries in (*claims.hosts.values(), *claims.ports.values()):
            entries.sort()
        return claims


_Claim = tuple[tuple[datetime, str, str], str, ObjectRef]


@dataclass
class _Claims:
    hosts: dict[str, list[_Claim]] = field(default_factory=dict)
    ports: dict[tuple[int, str], list[_Claim]] = field(default_factory=dict)


def _older_elsewhere(
    entries: list[_Claim], mine: tuple[datetime, str, str], namespace: str
) -> bool:
    """Whether an object of another namespace (tenant) claimed this before `mine`."""
    for order, ns, _ in entries:
        if order >= mine:
            return False
        if ns != namespace:
            return True
    return False


@dataclass(frozen=True)
class Source:
    """Where a mirrored object came from: tenant cluster, namespace, name there. An object
    written straight into the management namespace is its own source (cluster '')."""

    cluster: str
    namespace: str
    name: str


def source_of(obj: L7Object) -> Source:
    meta = obj.metadata
    labels = meta.labels
    cluster = labels.get(LABEL_CLUSTER, "")
    if not cluster:
        return Source("", meta.namespace or "default", meta.name)
    return Source(
        cluster,
        labels.get(LABEL_SOURCE_NAMESPACE, meta.namespace or "default"),
        labels.get(LABEL_SOURCE_NAME, meta.name),
    )


def mirrored_name(cluster: str, namespace: str, name: str) -> str:
    """An object's name in the tenant's management namespace (its source's own name when
    it was written there directly)."""
    return request_name(cluster, namespace, name) if cluster else name


def served_here(obj: L7Object) -> bool:
    """Whether the gateway serves the object at all: an Ingress of its class, a Gateway of
    its class; routes always (they are served through the Gateways they attach to)."""
    if isinstance(obj, Ingress):
        return obj.class_name == INGRESS_CLASS
    if isinstance(obj, Gateway):
        return obj.spec.gateway_class_name == GATEWAY_CLASS
    return True


# --------------------------------------------------------------------------- hostnames

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_HOSTNAME_RE = re.compile(rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$")


def domain_holds(domain: str, hostname: str) -> bool:
    """Whether a Tenant's DNS domain entry holds every name `hostname` can match."""
    domain = domain.lower().rstrip(".")
    strict = domain.startswith("*.")
    base = domain[2:] if strict else domain
    if hostname.startswith("*."):
        # Every name under `s`: held when `s` is the base or under it.
        s = hostname[2:]
        return s == base or s.endswith("." + base)
    if hostname == base:
        return not strict
    return hostname.endswith("." + base)


def hostname_refusal(hostname: str | None, tenant: Tenant, where: str) -> L7Refusal | None:
    if hostname is None or hostname in ("", "*"):
        return L7Refusal(
            L7Rule.HOSTNAME_NOT_ALLOWED,
            where,
            "no hostname would catch every hostname of the shared gateway; name one within "
            f"the DNS domains of Tenant {tenant.name}",
        )
    if len(hostname) > 253 or not _HOSTNAME_RE.match(hostname):
        return L7Refusal(
            L7Rule.INVALID_HOSTNAME,
            where,
            f"{hostname!r} is not a lowercase DNS name (a leading '*.' label is allowed)",
        )
    domains = tenant.spec.dns_domains
    if any(domain_holds(d, hostname) for d in domains):
        return None
    what = "the wildcard " if hostname.startswith("*.") else ""
    return L7Refusal(
        L7Rule.HOSTNAME_NOT_ALLOWED,
        where,
        f"{what}{hostname} is not within the DNS domains of Tenant {tenant.name} "
        f"({', '.join(domains) or 'none'})",
    )


def claimed_hostnames(obj: L7Object) -> list[tuple[str, str | None]]:
    """(field, hostname) of every hostname the object asks the gateway to serve."""
    if isinstance(obj, Ingress):
        out = obj.hostnames()
        if obj.spec.default_backend is not None:
            out.append(("spec.defaultBackend", None))
        return out
    if isinstance(obj, Gateway):
        return [
            (f"spec.listeners[{i}].hostname", listener.hostname)
            for i, listener in enumerate(obj.spec.listeners)
            if listener.hostname is not None
        ]
    return [(f"spec.hostnames[{i}]", h) for i, h in enumerate(route_hostnames(obj))]


# --------------------------------------------------------------------------- the rules

_SNIPPET_PREFIXES = ("haproxy.org/", "haproxy.com/", "haproxy-ingress.github.io/")
_PATH_RE = re.compile(r"^/[A-Za-z0-9\-._~!$&()*+,;=:@%/]*$")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9!#$&*+\-.^_`|~]+$")  # RFC 9110 token (header names)
_VALUE_RE = re.compile(r"^[\x20-\x7e]*$")
_VALUE_FORBIDDEN = set("\"'\\%")


def _annotation_refusals(obj: L7Object) -> list[L7Refusal]:
    out = []
    for key in sorted(obj.metadata.annotations):
        lowered = key.lower()
        if "snippet" in lowered or lowered.startswith(_SNIPPET_PREFIXES):
            out.append(
                L7Refusal(
                    L7Rule.SNIPPET_NOT_ALLOWED,
                    f"metadata.annotations[{key}]",
                    "annotations carrying proxy configuration are not served; the gateway "
                    "renders its configuration from the spec only",
                )
            )
    return out


def _unsafe_path(value: str, where: str) -> L7Refusal | None:
    if _PATH_RE.match(value):
        return None
    return L7Refusal(
        L7Rule.UNSAFE_VALUE,
        where,
        f"path {value!r} must start with '/' and hold only URL path characters "
        "(no spaces, quotes, backslashes, '#' or control characters)",
    )


def _unsafe_token(value: str, where: str) -> L7Refusal | None:
    if _TOKEN_RE.match(value):
        return None
    return L7Refusal(L7Rule.UNSAFE_VALUE, where, f"{value!r} is not an HTTP token")


def _unsafe_value(value: str, where: str) -> L7Refusal | None:
    if _VALUE_RE.match(value) and not _VALUE_FORBIDDEN & set(value):
        return None
    return L7Refusal(
        L7Rule.UNSAFE_VALUE,
        where,
        f"{value!r} may hold only printable ASCII without quotes, backslashes or '%'",
    )


def _size_refusals(obj: L7Object) -> list[L7Refusal]:
    out = []
    size = len(json.dumps(dump(obj), separators=(",", ":")))
    if size > MAX_OBJECT_BYTES:
        out.append(
            L7Refusal(
                L7Rule.OVERSIZED,
                "",
                f"the object is {size} bytes; the gateway serves at most {MAX_OBJECT_BYTES}",
            )
        )
    counts: list[tuple[str, int, int]] = [("hostnames", len(claimed_hostnames(obj)), MAX_HOSTNAMES)]
    if isinstance(obj, Ingress):
        counts.append(("spec.rules", len(obj.spec.rules), MAX_RULES))
        counts.append(("paths", len(obj.backends()), MAX_PATHS))
    elif isinstance(obj, Gateway):
        counts.append(("spec.listeners", len(obj.spec.listeners), MAX_LISTENERS))
    else:
        counts.append(("spec.rules", len(obj.spec.rules), MAX_RULES))
        if isinstance(obj, HTTPRoute):
            matches = sum(len(r.matches) for r in obj.spec.rules)
            counts.append(("matches", matches, MAX_PATHS))
    for what, count, limit in counts:
        if count > limit:
            out.append(
                L7Refusal(L7Rule.OVERSIZED, what, f"{count} {what} in one object; at most {limit}")
            )
    return out


def _secret_refusals(
    obj: L7Object, where: str, name: str, world: L7World, source: Source
) -> list[L7Refusal]:
    """A referenced Secret of the object's own namespace: its certificate, when known."""
    if world.secrets is None:
        return []
    key = f"{obj.metadata.namespace}/{mirrored_name(source.cluster, source.namespace, name)}"
    data = world.secrets.get(key)
    if data is None:
        return []  # not synced (yet): the reconcile reports it as an unresolved reference
    why = world.check_certificate(data.get(CERT_KEY, b""), data.get(KEY_KEY, b""))
    if why is None:
        return []
    return [L7Refusal(L7Rule.INVALID_CERTIFICATE, where, f"Secret {name}: {why}")]


def _ingress_refusals(obj: Ingress, world: L7World, source: Source) -> list[L7Refusal]:
    out: list[L7Refusal] = []
    for where, backend in obj.backends():
        if backend.resource is not None:
            out.append(
                L7Refusal(
                    L7Rule.BACKEND_NOT_ALLOWED,
                    f"{where}.resource",
                    "only Service backends are served",
                )
            )
    for i, rule in enumerate(obj.spec.rules):
        for j, path in enumerate(rule.http.paths if rule.http else []):
            if path.path is not None:
                bad = _unsafe_path(path.path, f"spec.rules[{i}].http.paths[{j}].path")
                out += [bad] if bad else []
    for i, tls in enumerate(obj.spec.tls):
        if not tls.secret_name:
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"spec.tls[{i}].secretName",
                    "a TLS entry needs its Secret (the gateway has no default certificate "
                    "for tenants)",
                )
            )
            continue
        out += _secret_refusals(obj, f"spec.tls[{i}].secretName", tls.secret_name, world, source)
    return out


def _listener_refusals(obj: Gateway, world: L7World, source: Source) -> list[L7Refusal]:
    out: list[L7Refusal] = []
    for i, listener in enumerate(obj.spec.listeners):
        where = f"spec.listeners[{i}]"
        protocols = [p.value for p in ListenerProtocol]
        if listener.protocol not in protocols:
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.protocol",
                    f"protocol {listener.protocol} is not served ({', '.join(protocols)})",
                )
            )
            continue
        protocol = ListenerProtocol(listener.protocol)
        shared = SHARED_PORTS.get(protocol)
        if shared is not None and listener.port != shared:
            out.append(
                L7Refusal(
                    L7Rule.PORT_NOT_ALLOWED,
                    f"{where}.port",
                    f"{protocol.value} is served on the shared port {shared}, not {listener.port}",
                )
            )
        tls = listener.tls
        if protocol is ListenerProtocol.HTTPS and (tls is None or tls.mode is TLSMode.PASSTHROUGH):
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.tls",
                    "HTTPS terminates TLS: it needs tls.mode Terminate and a certificate",
                )
            )
        if protocol is ListenerProtocol.TLS and (tls is None or tls.mode is TLSMode.TERMINATE):
            out.append(
                L7Refusal(
                    L7Rule.NOT_SERVED,
                    f"{where}.tls.mode",
                    "TLS listeners pass TLS through by SNI (tls.mode Passthrough)",
                )
            )
        for j, ref in enumerate(tls.certificate_refs if tls else []):
            ref_where = f"{where}.tls.certificateRefs[{j}]"
            if ref.group or ref.kind != "Secret":
                out.append(
                    L7Refusal(
                        L7Rule.SECRET_NOT_ALLOWED,
                        ref_where,
                        f"{ref.kind} {ref.name}: only Secrets hold certificates",
                    )
                )
            elif ref.namespace not in (None, source.namespace):
                out.append(
                    L7Refusal(
                        L7Rule.SECRET_NOT_ALLOWED,
                        f"{ref_where}.namespace",
                        f"Secret {ref.namespace}/{ref.name} is in another namespace; only "
                        f"Secrets of namespace {source.namespace} are served",
                    )
                )
            else:
                out += _secret_refusals(obj, ref_where, ref.name, world, source)
    return out


# The filter types served, each with the field that holds its configuration (attribute,
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
        bad = _unsafe_path(value, f"{at}.{wanted}")
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
                    _unsafe_token(header.name, f"{at}.name"),
                    _unsafe_value(header.value, f"{at}.value"),
                ):
                    out += [bad] if bad else []
        for m, header_name in enumerate(modifier.remove):
            bad = _unsafe_token(header_name, f"{where}.{name}.remove[{m}]")
            out += [bad] if bad else []
    redirect = flt.request_redirect
    if redirect is not None:
        at = f"{where}.requestRedirect"
        if redirect.scheme not in (None, "http", "https"):
            out.append(L7Refusal(L7Rule.UNSAFE_VALUE, f"{at}.scheme", "scheme http or https"))
        if redirect.hostname is not None and not _HOSTNAME_RE.match(redirect.hostname):
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
        if host is not None and (host.startswith("*.") or not _HOSTNAME_RE.match(host)):
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
                    bad = _unsafe_path(match.path.value, f"{where}.path.value")
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
                        _unsafe_token(entry.name, f"{at}.name"),
                        _unsafe_value(entry.value, f"{at}.value"),
                    ):
                        out += [bad] if bad else []
            if match.method is not None:
                bad = _unsafe_token(match.method, f"{where}.method")
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


def _route_refusals(obj: Route) -> list[L7Refusal]:
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


# --------------------------------------------------------------------------- across objects


def _tenant_of_object(obj: L7Object, tenants: Sequence[Tenant]) -> Tenant | L7Refusal:
    owner = tenant_of(obj.metadata.namespace or "default", tenants)
    if isinstance(owner, Refusal):
        return L7Refusal(L7Rule(owner.rule.value), owner.field, owner.message)
    return owner


def _theft_refusals(obj: L7Object, tenant: Tenant, world: L7World) -> list[L7Refusal]:
    """Hostnames (and exclusive ports) served for another tenant by an older object."""
    mine = creation_order(obj)
    namespace = tenant.spec.namespace
    claims = world.claims
    out = []
    for where, host in claimed_hostnames(obj):
        # A name outside the tenant's domains is refused as such: whether another tenant
        # serves it is none of this tenant's business.
        if (
            host
            and _older_elsewhere(claims.hosts.get(host, []), mine, namespace)
            and hostname_refusal(host, tenant, where) is None
        ):
            out.append(
                L7Refusal(
                    L7Rule.HOSTNAME_TAKEN,
                    where,
                    f"{host} is already served by the gateway for another tenant "
                    "(the first object to name a hostname keeps it)",
                )
            )
    if isinstance(obj, Gateway):
        exclusive = exclusive_ports(obj)
        for i, listener in enumerate(obj.spec.listeners):
            key = (listener.port, listener.protocol)
            if key in exclusive and _older_elsewhere(claims.ports.get(key, []), mine, namespace):
                out.append(
                    L7Refusal(
                        L7Rule.PORT_TAKEN,
                        f"spec.listeners[{i}].port",
                        f"port {listener.port}/{listener.protocol} of the shared gateway is "
                        "another tenant's",
                    )
                )
    return out


def exclusive_ports(gateway: Gateway) -> list[tuple[int, str]]:
    """The (port, protocol) of the Gateway's listeners that take a port of their own."""
    return [
        (listener.port, listener.protocol)
        for listener in gateway.spec.listeners
        if listener.protocol in (ListenerProtocol.TCP, ListenerProtocol.UDP)
    ]


def _quota_refusals(obj: Gateway, tenant: Tenant, world: L7World) -> list[L7Refusal]:
    limit = tenant.spec.quotas.ports
    if limit is None:
        return []
    mine = creation_order(obj)
    held: set[tuple[int, str]] = set()
    for other in world.objects:
        if (
            isinstance(other, Gateway)
            and other.ref != obj.ref
            and other.metadata.namespace == tenant.spec.namespace
            and served_here(other)
            and creation_order(other) < mine
        ):
            held.update(exclusive_ports(other))
    out = []
    count = len(held)
    for i, listener in enumerate(obj.spec.listeners):
        key = (listener.port, listener.protocol)
        if key not in exclusive_ports(obj) or key in held:
            continue
        held.add(key)
        count += 1
        if count > limit:
            out.append(
                L7Refusal(
                    L7Rule.QUOTA_EXCEEDED,
                    f"spec.listeners[{i}].port",
                    f"quota of {limit} ports of Tenant {tenant.name} reached "
                    f"({limit} held by older Gateways or listeners)",
                )
            )
    return out


def vet_object(obj: L7Object, world: L7World) -> list[L7Refusal]:
    """Every rule `obj` breaks (empty: the gateway may serve it). Objects outside every
    tenant's namespace and Ingresses or Gateways of other classes are not the gateway's
    and are never refused here."""
    if not served_here(obj):
        return []
    owner = _tenant_of_object(obj, world.tenants)
    if isinstance(owner, L7Refusal):
        if owner.rule is L7Rule.NO_TENANT:
            return []
        return [owner]
    tenant = owner
    out: list[L7Refusal] = []
    if TenantMode.GATEWAY not in tenant.spec.modes:
        out.append(
            L7Refusal(
                L7Rule.MODE_NOT_ALLOWED,
                "",
                f"Tenant {tenant.name} may not use the shared gateway (mode Gateway)",
            )
        )
    out += _size_refusals(obj)
    if any(r.rule is L7Rule.OVERSIZED for r in out):
        return out  # nothing more is read of an oversized object
    out += _annotation_refusals(obj)
    hostless = set(_hostless_parts(obj))
    dedicated = False
    if isinstance(obj, Ingress | Gateway):
        want = wanted_address(obj, tenant)
        if isinstance(want, AddressRefusal):
            out.append(L7Refusal(L7Rule.UNSUPPORTED_ADDRESS, want.field, want.message))
        dedicated = isinstance(want, Wanted)
    for where, host in claimed_hostnames(obj):
        if where in hostless or (dedicated and not host):
            continue  # left out, the rest served (unserved_parts); or its own address
        bad = hostname_refusal(host, tenant, where)
        out += [bad] if bad else []
    source = source_of(obj)
    if isinstance(obj, Ingress):
        out += _ingress_refusals(obj, world, source)
    elif isinstance(obj, Gateway):
        out += _listener_refusals(obj, world, source)
        out += _quota_refusals(obj, tenant, world)
    else:
        out += _route_refusals(obj)
    out += _theft_refusals(obj, tenant, world)
    return out


def _hostless_parts(obj: L7Object) -> list[str]:
    """The fields of an Ingress's parts without a host (rules, the defaultBackend) when it
    has rules with one too: those are served and these left out. (An Ingress with no host
    at all serves nothing on the shared addresses: it is refused as a whole.)"""
    if not isinstance(obj, Ingress):
        return []
    rules = [(f"spec.rules[{i}].host", r.host) for i, r in enumerate(obj.spec.rules)]
    if not any(host for _, host in rules):
        return []
    out = [where for where, host in rules if not host]
    return out + (["spec.defaultBackend"] if obj.spec.default_backend is not None else [])


def unserved_parts(obj: L7Object, world: L7World) -> list[L7Refusal]:
    """The parts of an object the gateway leaves out while it serves the rest: an
    Ingress's rules without host and its defaultBackend, which on the shared addresses
    would catch every hostname (status, an Event and `gateway --check` say so)."""
    owner = _tenant_of_object(obj, world.tenants)
    if not served_here(obj) or isinstance(owner, L7Refusal) or is_dedicated(obj, owner):
        return []
    return [
        L7Refusal(
            L7Rule.HOSTNAME_NOT_ALLOWED,
            where,
            "without a host it would catch every hostname of the shared gateway: not "
            f"served (the Ingress's rules with a host are); name a host within the DNS "
            f"domains of Tenant {owner.name}",
        )
        for where in _hostless_parts(obj)
    ]


def vet_all(world: L7World) -> dict[ObjectRef, list[L7Refusal]]:
    """Every object of the world vetted (empty lists for the admitted)."""
    return {obj.ref: vet_object(obj, world) for obj in world.objects}


def problems_of(obj: L7Object, refusals: Iterable[L7Refusal]) -> list[Problem]:
    return [r.problem(obj.ref) for r in refusals]


__all__ = [
    "GATEWAY_CLASS",
    "LABEL_SOURCE_NAME",
    "LABEL_SOURCE_NAMESPACE",
    "L7Object",
    "L7Refusal",
    "L7Rule",
    "L7World",
    "Source",
    "domain_holds",
    "exclusive_ports",
    "mirrored_name",
    "problems_of",
    "served_here",
    "source_of",
    "unresolved_backend_refs",
    "unserved_parts",
    "vet_all",
    "vet_object",
]
