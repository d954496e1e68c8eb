"""The tenants' vetted objects → the data plane's
:class:`~teapot_lb.gateway.config.GatewayConfig` (pure), with the status every object gets
(Gateway API conditions; an Ingress's addresses or refusal).

Inputs are what the management cluster holds: the Tenants, the mirrored Ingresses and
Gateway API objects (:mod:`teapot_lb.gateway.control.l7mirror`), the mirrored EndpointSlices and
TLS Secrets, and the gateway's own addresses. Every object is vetted here again
(:func:`teapot_lb.tenancy.l7vet.vet_object`): a refused object contributes nothing.

Shared listeners per gateway address, always there (with nothing served they answer
404): HTTP on 80, HTTPS on 443 (every accepted certificate, each offered for the
hostnames it was vetted for only; the gateway's own certificate for every other name),
TLS passthrough on 443 too (the data plane dispatches by SNI); a tenant's TCP and UDP
Gateway listeners get a listener of their own port, and so does each port of a
TenantLoadBalancer of provider `proxy` on each of its own addresses. An Ingress or Gateway with a
dedicated address (:mod:`teapot_lb.tenancy.l7address`) gets the same listeners on that
address instead, for its tenant only: its host-less rules, defaultBackend and
hostname-less HTTPRoutes are served there, and its HTTPS listener offers the tenant's
certificates only (the gateway's own the default there too).
Backends are a Service port of one source cluster: the pod IPs (EndpointSlice ports) or
the nodes at the nodePorts, as the Tenant's `gatewayBackends` says; an endpoint outside
the tenant's pod or node networks is never served (reported).

The package is its API (import from ``teapot_lb.gateway.translate``); its modules are the
results (:mod:`.results`: per object, and the translation), the config as one tenant's
objects build it (:mod:`.build`: listeners, certificates, names), a Service port's
endpoints as a backend (:mod:`.backends`), an Ingress (:mod:`.ingress`), a Gateway's
listeners (:mod:`.listeners`), a route's parentRefs and hostnames (:mod:`.attach`), an
HTTPRoute (:mod:`.http_routes`), TLS, TCP and UDP routes (:mod:`.stream_routes`),
Gateway-mode TenantLoadBalancers as TCP and UDP listeners (:mod:`.load_balancers`), a
tenant's objects vetted (:mod:`.vetting`), a tenant's part and the merge of the parts
(:mod:`.parts`), the inputs by tenant namespace (:mod:`.namespaces`) and the whole
translated from scratch (:mod:`.from_scratch`; :mod:`teapot_lb.gateway.translation_cache`
translates only what a change touches).
"""

from __future__ import annotations

from .build import config_name
from .from_scratch import translate
from .namespaces import by_namespace, tenant_namespaces
from .parts import Merged, Part, build_part, merge, shared_listeners, with_endpoints
from .results import (
    Changed,
    Condition,
    ListenerResult,
    LoadBalancerResult,
    ObjectResult,
    ParentResult,
    PortRefusal,
    Translation,
)
from .vetting import ObjectOrder, Vetted, dedicated_wanted, object_order, vet_tenant

__all__ = [
    "Changed",
    "Condition",
    "ListenerResult",
    "LoadBalancerResult",
    "Merged",
    "ObjectOrder",
    "ObjectResult",
    "ParentResult",
    "Part",
    "PortRefusal",
    "Translation",
    "Vetted",
    "build_part",
    "by_namespace",
    "config_name",
    "dedicated_wanted",
    "merge",
    "object_order",
    "shared_listeners",
    "tenant_namespaces",
    "translate",
    "vet_tenant",
    "with_endpoints",
]
