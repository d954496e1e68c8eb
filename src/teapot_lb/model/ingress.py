"""Typed views of networking.k8s.io/v1 Ingress and IngressClass: the fields the Teapot
gateway serves; every other field is kept as it came (``extra="allow"``), so an object
read, vetted and written back (the tenant agent's mirror) loses nothing.

Hostnames and paths are kept as the tenant wrote them; what may be served is decided by
:mod:`teapot_lb.tenancy.l7vet` (with a reason), not by a parse error here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from teapot_lb.model.common import Identified, KubeView, ObjectMeta

# The Ingress class the Teapot gateway serves, and its controller name.
INGRESS_CLASS = "teapot"
GATEWAY_CONTROLLER = "lb.teapot.io/gateway"
# The annotation older Ingresses name their class with (before spec.ingressClassName).
CLASS_ANNOTATION = "kubernetes.io/ingress.class"


class L7View(KubeView):
    """Base of the L7 kinds' parts: unknown fields are kept, not dropped."""

    model_config = ConfigDict(extra="allow")


class PathType(StrEnum):
    EXACT = "Exact"
    PREFIX = "Prefix"
    IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"


class ServiceBackendPort(L7View):
    number: int | None = Field(default=None, ge=1, le=65535)
    name: str | None = None

    def __str__(self) -> str:
        return str(self.number) if self.number is not None else str(self.name)


class IngressServiceBackend(L7View):
    name: str = Field(min_length=1)
    port: ServiceBackendPort = Field(default_factory=ServiceBackendPort)


class IngressBackend(L7View):
    service: IngressServiceBackend | None = None
    resource: dict[str, Any] | None = None


class HTTPIngressPath(L7View):
    path: str | None = None
    path_type: PathType = PathType.IMPLEMENTATION_SPECIFIC
    backend: IngressBackend


class HTTPIngressRuleValue(L7View):
    paths: list[HTTPIngressPath] = []


class IngressRule(L7View):
    host: str | None = None
    http: HTTPIngressRuleValue | None = None


class IngressTLS(L7View):
    hosts: list[str] = []
    secret_name: str | None = None


class IngressSpec(L7View):
    ingress_class_name: str | None = None
    default_backend: IngressBackend | None = None
    tls: list[IngressTLS] = []
    rules: list[IngressRule] = []


class IngressPortStatus(L7View):
    port: int
    protocol: str = "TCP"
    error: str | None = None


class IngressLoadBalancerIngress(L7View):
    ip: str | None = None
    hostname: str | None = None
    ports: list[IngressPortStatus] = []


class IngressLoadBalancerStatus(L7View):
    ingress: list[IngressLoadBalancerIngress] = []


class IngressStatus(L7View):
    load_balancer: IngressLoadBalancerStatus = Field(default_factory=IngressLoadBalancerStatus)


class Ingress(Identified, L7View):
    """A networking.k8s.io/v1 Ingress."""

    api_version: Literal["networking.k8s.io/v1"] = Field(
        default="networking.k8s.io/v1", alias="apiVersion"
    )
    kind: Literal["Ingress"] = "Ingress"
    metadata: ObjectMeta
    spec: IngressSpec = Field(default_factory=IngressSpec)
    status: IngressStatus = Field(default_factory=IngressStatus)

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def class_name(self) -> str | None:
        """spec.ingressClassName, else the older annotation."""
        return self.spec.ingress_class_name or self.metadata.annotations.get(CLASS_ANNOTATION)

    def backends(self) -> list[tuple[str, IngressBackend]]:
        """(field path, backend) of every backend the Ingress names."""
        out: list[tuple[str, IngressBackend]] = []
        if self.spec.default_backend is not None:
            out.append(("spec.defaultBackend", self.spec.default_backend))
        for i, rule in enumerate(self.spec.rules):
            for j, path in enumerate(rule.http.paths if rule.http else []):
                out.append((f"spec.rules[{i}].http.paths[{j}].backend", path.backend))
        return out

    def hostnames(self) -> list[tuple[str, str | None]]:
        """(field path, host) of every rule and TLS entry; None: a rule without host."""
        out: list[tuple[str, str | None]] = [
            (f"spec.rules[{i}].host", rule.host) for i, rule in enumerate(self.spec.rules)
        ]
        for i, tls in enumerate(self.spec.tls):
            out += [(f"spec.tls[{i}].hosts[{j}]", host) for j, host in enumerate(tls.hosts)]
        return out


class IngressClassSpec(L7View):
    controller: str | None = None
    parameters: dict[str, Any] | None = None


class IngressClass(Identified, L7View):
    """A networking.k8s.io/v1 IngressClass (cluster-scoped)."""

    namespaced: ClassVar[bool] = False

    api_version: Literal["networking.k8s.io/v1"] = Field(
        default="networking.k8s.io/v1", alias="apiVersion"
    )
    kind: Literal["IngressClass"] = "IngressClass"
    metadata: ObjectMeta
    spec: IngressClassSpec = Field(default_factory=IngressClassSpec)


__all__ = [
    "CLASS_ANNOTATION",
    "GATEWAY_CONTROLLER",
    "INGRESS_CLASS",
    "Ingress",
    "IngressBackend",
    "IngressClass",
    "IngressRule",
    "IngressTLS",
    "L7View",
    "PathType",
]
