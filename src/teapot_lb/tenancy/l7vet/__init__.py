"""Vetting a tenant's Ingresses and Gateway API objects (pure): may the shared gateway
serve this for this tenant?

The same rules run in the admission webhook and at every reconcile of the gateway's
objects (an object written while the webhook was down is still refused). A refusal names
the object, the field and the rule (:class:`L7Rule`, the condition's and Event's reason).

Objects live in the tenant's namespace of the management cluster, mirrored there by the
tenant agent; their source (cluster, namespace, name in the tenant cluster) is in labels,
and what they reference (Secrets, Services) is mirrored under :func:`mirrored_name`.

The package is its API (import from ``teapot_lb.tenancy.l7vet``); its modules are the
refusal's vocabulary (:mod:`.refusal`), the objects and the world vetting reads
(:mod:`.world`), hostnames within a tenant's DNS domains (:mod:`.hostnames`), values safe
to render (:mod:`.values`), an Ingress's and a Gateway's own rules (:mod:`.listeners`), a
route's (:mod:`.routes`), and one object vetted against the world (:mod:`.vet`: tenant,
limits, hostnames taken by another tenant, ports and quotas).
"""

from __future__ import annotations

from .hostnames import domain_holds, hostname_refusal
from .listeners import SHARED_PORTS
from .refusal import L7Refusal, L7Rule
from .routes import unresolved_backend_refs
from .vet import problems_of, unserved_parts, vet_all, vet_object
from .world import (
    GATEWAY_CLASS,
    LABEL_SOURCE_NAME,
    LABEL_SOURCE_NAMESPACE,
    CertificateCheck,
    L7Object,
    L7World,
    Source,
    claimed_hostnames,
    exclusive_ports,
    mirrored_name,
    served_here,
    source_of,
)

__all__ = [
    "GATEWAY_CLASS",
    "LABEL_SOURCE_NAME",
    "LABEL_SOURCE_NAMESPACE",
    "SHARED_PORTS",
    "CertificateCheck",
    "L7Object",
    "L7Refusal",
    "L7Rule",
    "L7World",
    "Source",
    "claimed_hostnames",
    "domain_holds",
    "exclusive_ports",
    "hostname_refusal",
    "mirrored_name",
    "problems_of",
    "served_here",
    "source_of",
    "unresolved_backend_refs",
    "unserved_parts",
    "vet_all",
    "vet_object",
]
