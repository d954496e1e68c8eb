"""The table of resource kinds the fake API server serves.

Each row is what a real API server learns from its built-in registry or from a
CustomResourceDefinition: where the kind lives in the URL space, whether it is
namespaced, whether it has a ``/status`` subresource (the product's own
:class:`~teapot_lb.kube.resources.Resource`), and which field selectors it supports (a
real server answers 400 for any other field label, and so do we, so that code tested here
never depends on something only the fake accepts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from teapot_lb.kube.resources import (
    ENDPOINT_SLICES,
    EVENTS,
    INGRESS_CLASSES,
    INGRESSES,
    LEASES,
    NAMESPACES,
    NODES,
    SECRETS,
    SERVICES,
    Resource,
)
from teapot_lb.model.kinds import KINDS

# Field labels every kind supports.
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Kind(Resource):
    """A resource as the fake server serves it. Custom resources (not of a built-in group)
    reject unconditional updates (PUT without resourceVersion)."""

    extra_fields: frozenset[str] = field(default_factory=frozenset)
    """Field labels accepted in fieldSelector besides metadata.name / metadata.namespace."""

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def selectable_fields(self) -> frozenset[str]:
        return _META_FIELDS | self.extra_fields

    @property
    def resource(self) -> str:
        """``plural.group`` as in error messages (``services``, ``leases.coordination.k8s.io``)."""
        return str(self)


def served(resource: Resource, *extra_fields: str) -> Kind:
    """The row of one of the product's resources (with the field labels it selects on)."""
    return Kind(**asdict(resource), extra_fields=frozenset(extra_fields))


def custom_kind(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    status: bool = True,
) -> Kind:
    """A row for another custom resource (register it with ``FakeApiServer.register_kind``)."""
    return Kind(group, version, plural, kind, namespaced, has_status=status)


_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

BUILTIN_KINDS: tuple[Kind, ...] = (
    served(NAMESPACES, "status.phase"),
    served(NODES, "spec.unschedulable"),
    served(SERVICES, "spec.clusterIP", "spec.type"),
    served(SECRETS, "type"),
    Kind("", "v1", "configmaps", "ConfigMap", True),
    Kind("", "v1", "pods", "Pod", True, True, frozenset({"spec.nodeName", "status.phase"})),
    served(EVENTS, *_EVENT_FIELDS),
    # events.k8s.io/v1 Events are stored apart from core/v1 ones here (a real server
    # serves one set of objects through both APIs).
    Kind("events.k8s.io", "v1", "events", "Event", True),
    served(ENDPOINT_SLICES),
    served(LEASES),
    served(INGRESSES),
    served(INGRESS_CLASSES),
    # teapot-lb's custom resources, from its kind registry (served as if their CRDs, which
    # are generated from the same registry, were installed).
    *(served(info.resource) for info in KINDS if info.resource.custom),
)
