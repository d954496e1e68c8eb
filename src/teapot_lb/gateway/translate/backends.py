"""A Service port of one source cluster as a backend: its endpoints from the mirrored
EndpointSlices (pod IPs or nodes at nodePorts, as the Tenant says), within the tenant's
networks only, and the active health check the slices ask for."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from ipaddress import ip_address

from pydantic import ValidationError

from teapot_lb.addresses import IPNetwork
from teapot_lb.gateway.config import Backend, Endpoint, HealthCheck, Owner, RouteKind
from teapot_lb.gateway.control.l7mirror import (
    ANNOTATION_HEALTH_CHECK,
    ANNOTATION_SERVICE_PORTS,
    LABEL_BACKENDS,
    MCS_SERVICE_NAME,
    MCS_SOURCE_CLUSTER,
)
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.tenancy import GatewayBackends, Tenant, parse_cidr
from teapot_lb.tenancy.l7vet import LABEL_SOURCE_NAMESPACE, L7Object, source_of

from .results import ObjectResult

SliceKey = tuple[object, str, str, str, str]
"""Whose endpoints a mirrored slice holds: its namespace, and (its labels) the source
cluster, the source namespace, the Service and the backends mode (pod IPs or nodes)."""


def slices_by_service(slices: Iterable[KubeObject]) -> dict[SliceKey, list[KubeObject]]:
    """The slices by whose endpoints they hold, in their order (one pass over a tenant's
    slices; each backend then looks its own up, not through every slice)."""
    out: dict[SliceKey, list[KubeObject]] = {}
    for eps in slices:
        meta = eps.get("metadata", {})
        labels = meta.get("labels") or {}
        key = (
            meta.get("namespace"),
            labels.get(MCS_SOURCE_CLUSTER, ""),
            labels.get(LABEL_SOURCE_NAMESPACE, ""),
            labels.get(MCS_SERVICE_NAME, ""),
            labels.get(LABEL_BACKENDS, ""),
        )
        out.setdefault(key, []).append(eps)
    return out


def slice_key(obj: L7Object, tenant: Tenant, service: str) -> SliceKey:
    """Whose slices Service `service` of `obj`'s source cluster is read from
    (:func:`slices_by_service`)."""
    source = source_of(obj)
    mode = tenant.spec.gateway_backends
    return (obj.metadata.namespace or "", source.cluster, source.namespace, service, mode.value)


def service_backend(
    name: str,
    obj: L7Object,
    tenant: Tenant,
    service: str,
    port: int | str,
    slices: Mapping[SliceKey, Sequence[KubeObject]],
    result: ObjectResult,
) -> tuple[Backend, bool]:
    """Backend `name`: Service `service`'s port `port` in `obj`'s source cluster, from the
    slices of `obj`'s namespace (`slices`: :func:`slices_by_service`); whether the Service
    and the port were found (when not, its requests are answered 500 by a route that says
    so). What is not served goes to `result`'s notes."""
    source = source_of(obj)
    namespace = obj.metadata.namespace or ""
    mode = tenant.spec.gateway_backends
    mine = slices.get(slice_key(obj, tenant, service), ())
    found = bool(mine)
    if not mine:
        result.notes.append(
            f"Service {source.namespace}/{service} has no synced endpoints "
            f"({mode.value}) from cluster {source.cluster or '(none)'}"
        )
    networks = allowed_networks(tenant, mode)
    endpoints: list[Endpoint] = []
    ports = [(eps, _endpoint_port(eps, port)) for eps in mine]
    if mine and all(target is None for _, target in ports):
        found = False
    for eps, target in ports:
        if target is None:
            result.notes.append(_no_port(eps, f"{source.namespace}/{service}", port))
            continue
        for e in eps.get("endpoints") or []:
            ready = (e.get("conditions") or {}).get("ready") is not False
            for text in e.get("addresses") or []:
                try:
                    address = ip_address(text)
                except ValueError:
                    continue
                if not any(address in net for net in networks):
                    result.notes.append(
                        f"endpoint {address} of Service {source.namespace}/{service} is "
                        f"outside the {_network_words(mode)} of Tenant {tenant.name}; "
                        "not served"
                    )
                    continue
                endpoints.append(Endpoint(address=address, port=target, ready=ready))
    backend = Backend(
        name=name,
        endpoints=tuple(sorted(endpoints, key=lambda e: (str(e.address), e.port))),
        health_check=_health_check(mine, f"Service {source.namespace}/{service}", result),
        owner=Owner(tenant=tenant.name, kind=RouteKind.SERVICE, namespace=namespace, name=service),
    )
    return backend, found


def allowed_networks(tenant: Tenant, mode: GatewayBackends) -> tuple[IPNetwork, ...]:
    """The networks `mode`'s endpoints must be in: the tenant's pod or node networks."""
    texts = (
        tenant.spec.pod_networks if mode is GatewayBackends.POD_IPS else tenant.spec.node_networks
    )
    return _networks(tuple(texts))


@lru_cache(maxsize=1024)
def _networks(texts: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    # (asked once per backend built: parsing a tenant's few networks each time added up)
    return tuple(parse_cidr(t) for t in texts)


def _network_words(mode: GatewayBackends) -> str:
    return "pod networks" if mode is GatewayBackends.POD_IPS else "node networks"


def _endpoint_port(eps: KubeObject, port: int | str) -> int | None:
    """The endpoints' port for a Service port given by number or name."""
    annotations = eps.get("metadata", {}).get("annotations") or {}
    try:
        service_ports = json.loads(annotations.get(ANNOTATION_SERVICE_PORTS, "[]"))
    except ValueError:
        service_ports = []
    name: str | None = port if isinstance(port, str) else None
    if isinstance(port, int):
        name = next((str(p.get("name", "")) for p in service_ports if p.get("port") == port), None)
        if name is None:
            return None
    for p in eps.get("ports") or []:
        if str(p.get("name") or "") == name and isinstance(p.get("port"), int):
            return int(p["port"])
    return None


def _no_port(eps: KubeObject, service: str, port: int | str) -> str:
    """Why a slice gives no endpoint for `port`: the Service has no such port, or (a port
    by number) the slice does not say the Service's ports, so none can be matched."""
    meta = eps.get("metadata", {})
    if isinstance(port, int) and ANNOTATION_SERVICE_PORTS not in (meta.get("annotations") or {}):
        return (
            f"EndpointSlice {meta.get('name', '')} of Service {service} has no"
            f" {ANNOTATION_SERVICE_PORTS} annotation (the Service's ports, as the tenant agent"
            f" writes it: a JSON list of name, port, protocol): Service port {port} cannot be"
            " matched to an endpoint port; no endpoints"
        )
    return f"Service {service} has no port {port}"


def _health_check(
    slices: Sequence[KubeObject], what: str, result: ObjectResult
) -> HealthCheck | None:
    """The active health check the slices ask for (the Octavia driver's annotation); a
    malformed one is reported and not used."""
    for eps in slices:
        text = (eps.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_HEALTH_CHECK)
        if not text:
            continue
        try:
            return HealthCheck.model_validate_json(text)
        except ValidationError as err:
            why = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(json)'}: {e['msg']}"
                            for e in err.errors())  # fmt: skip
            result.notes.append(f"{what}: annotation {ANNOTATION_HEALTH_CHECK} ignored: {why}")
            return None
    return None


__all__ = ["SliceKey", "allowed_networks", "service_backend", "slice_key", "slices_by_service"]
