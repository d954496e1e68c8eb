"""What a reader keeps of an object: a projection applied where objects enter its cache.

A speaker plans from a handful of fields of each Service and EndpointSlice, yet a parsed
object carries every field we type (ports, selectors, families, every annotation and
label, each endpoint's addresses and target). At 100,000 Services that is most of the
speaker's memory (issue 19). :func:`speaker_projection` keeps exactly what the speaker
reads and drops the rest before the object is stored, so the full object is never kept:

* a Service: its name, namespace and uid (Events name it), the annotations the speaker
  reads (:data:`SPEAKER_ANNOTATIONS`), ``spec.type``, ``spec.loadBalancerClass`` and
  ``spec.externalTrafficPolicy`` (which Services it handles, and how), and the ``ip`` of
  each ``status.loadBalancer.ingress`` entry (what it announces);
* an EndpointSlice: its name, namespace and Service (the ``kubernetes.io/service-name``
  label), and per endpoint its node and its ``ready`` condition (which nodes have a ready
  endpoint: ``externalTrafficPolicy: Local``).

Projected objects are still the same models, so the planner reads them as it reads full
ones; their parts that are equal across objects (a spec, an endpoint, an empty map) are
shared, and the strings they keep are copies (:func:`~teapot_lb.kube.detach.detached`),
so a projected object holds nothing of the API response it was parsed from. Every other
kind is kept as it is. A projection must keep what its reader reads:
``tests/cluster/test_projection.py`` checks that what the speaker decides from projected
objects equals what it decides from the full ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from teapot_lb.kube.detach import detached
from teapot_lb.model import EndpointSlice, Service
from teapot_lb.model.common import ObjectMeta
from teapot_lb.model.kinds import ApiObject
from teapot_lb.model.service import (
    ANNOTATION_VRIDS,
    SERVICE_NAME_LABEL,
    Endpoint,
    EndpointConditions,
    LoadBalancerIngress,
    LoadBalancerStatus,
    ServiceSpec,
    ServiceStatus,
)

# A projection: an object as it came in → what the cache keeps of it (a Secret's data, which
# is not a model, passes through every projection unchanged).
Projection = Callable[[ApiObject], ApiObject]

# The Service annotations the speaker reads (VIP mode's virtual router IDs).
SPEAKER_ANNOTATIONS: Final = (ANNOTATION_VRIDS,)
# Bound on the tables of shared parts (specs, endpoints): past it, parts are not shared.
_SHARED_MAX: Final = 65536

_EMPTY: Final[dict[str, str]] = {}
_specs: dict[tuple[Any, ...], ServiceSpec] = {}
_endpoints: dict[tuple[str | None, bool | None], Endpoint] = {}


def speaker_projection(obj: ApiObject) -> ApiObject:
    """What the speaker keeps of `obj` (see the module's docstring)."""
    if isinstance(obj, Service):
        return project_service(obj)
    if isinstance(obj, EndpointSlice):
        return project_slice(obj)
    return obj


def project_service(svc: Service) -> Service:
    meta = svc.metadata
    spec = svc.spec
    ingress = [
        LoadBalancerIngress.model_construct(ip=detached(entry.ip))
        for entry in svc.status.load_balancer.ingress
        if entry.ip
    ]
    status = ServiceStatus.model_construct(
        load_balancer=LoadBalancerStatus.model_construct(ingress=ingress)
    )
    return Service.model_construct(
        metadata=_meta(meta, _kept(meta.annotations, SPEAKER_ANNOTATIONS)),
        spec=_shared_spec(spec.type, spec.load_balancer_class, spec.external_traffic_policy),
        status=status,
    )


def project_slice(eps: EndpointSlice) -> EndpointSlice:
    meta = eps.metadata
    return EndpointSlice.model_construct(
        metadata=_meta(meta, _EMPTY, _kept(meta.labels, (SERVICE_NAME_LABEL,))),
        address_type=detached(eps.address_type),
        endpoints=[_shared_endpoint(e.node_name, e.conditions.ready) for e in eps.endpoints],
        ports=[],
    )


def _kept(mapping: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, str]:
    kept = {k: detached(mapping[k]) for k in keys if k in mapping}
    return kept or _EMPTY


def _meta(
    meta: ObjectMeta, annotations: dict[str, str], labels: dict[str, str] = _EMPTY
) -> ObjectMeta:
    return ObjectMeta.model_construct(
        name=detached(meta.name),
        namespace=None if meta.namespace is None else detached(meta.namespace),
        labels=labels,
        annotations=annotations,
        uid=None if meta.uid is None else detached(meta.uid),
        resource_version=None,
        generation=None,
        creation_timestamp=None,
    )


def _shared_spec(*key: Any) -> ServiceSpec:
    spec = _specs.get(key)
    if spec is None:
        kind, cls, policy = key
        spec = ServiceSpec.model_construct(
            type=kind, load_balancer_class=cls, external_traffic_policy=policy
        )
        if len(_specs) < _SHARED_MAX:
            _specs[key] = spec
    return spec


def _shared_endpoint(node: str | None, ready: bool | None) -> Endpoint:
    key = (node, ready)
    endpoint = _endpoints.get(key)
    if endpoint is None:
        conditions = EndpointConditions.model_construct(ready=ready)
        name = None if node is None else detached(node)
        endpoint = Endpoint.model_construct(node_name=name, conditions=conditions)
        if len(_endpoints) < _SHARED_MAX:
            _endpoints[key] = endpoint
    return endpoint
