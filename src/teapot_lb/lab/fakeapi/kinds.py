"""The table of resource kinds the fake API server serves.

Each row is what a real API server learns from its built-in registry or from a
CustomResourceDefinition: where the kind lives in the URL space, whether it is
namespaced, whether it has a ``/status`` subresource, and which field selectors it
supports (a real server answers 400 for any other field label, and so do we, so that
code tested here never depends on something only the fake accepts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from teapot_lb.model.kinds import KINDS

# Field labels every kind supports.
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    # Field labels accepted in fieldSelector besides metadata.name / metadata.namespace.
    extra_fields: frozenset[str] = field(default_factory=frozenset)
    # Custom resources reject unconditional updates (PUT without resourceVersion).
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def selectable_fields(self) -> frozenset[str]:
        return _META_FIELDS | self.extra_fields

    @property
    def resource(self) -> str:
        """``plural.group`` as in error messages (``services``, ``leases.coordination.k8s.io``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


LB_GROUP = "lb.teapot.io"
LB_VERSION = "v1alpha1"


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
    return Kind(group, version, plural, kind, namespaced, status_subresource=status, custom=True)


BUILTIN_KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "namespaces", "Namespace", False, True, frozenset({"status.phase"})),
    Kind("", "v1", "nodes", "Node", False, True, frozenset({"spec.unschedulable"})),
    Kind("", "v1", "services", "Service", True, True, frozenset({"spec.clusterIP", "spec.type"})),
    Kind("", "v1", "secrets", "Secret", True, False, frozenset({"type"})),
    Kind("", "v1", "configmaps", "ConfigMap", True, False),
    Kind("", "v1", "pods", "Pod", True, True, frozenset({"spec.nodeName", "status.phase"})),
    Kind(
        "",
        "v1",
        "events",
        "Event",
        True,
        False,
        frozenset(
            {
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
            }
        ),
    ),
    # events.k8s.io/v1 Events are stored apart from core/v1 ones here (a real server
    # serves one set of objects through both APIs).
    Kind("events.k8s.io", "v1", "events", "Event", True, False),
    Kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, False),
    Kind("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    Kind("networking.k8s.io", "v1", "ingresses", "Ingress", True, True),
    Kind("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False, False),
    # teapot-lb's custom resources, from its kind registry (served as if their CRDs, which
    # are generated from the same registry, were installed).
    *(
        custom_kind(r.group, r.version, r.plural, r.kind, namespaced=r.namespaced)
        for r in (info.resource for info in KINDS)
        if r.custom
    ),
)
