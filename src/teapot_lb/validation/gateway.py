"""The Teapot gateway's rules for `teapot-lb validate` and standalone mode: every Ingress
and Gateway API object in a Tenant's namespace vetted as the webhook and the gateway's
reconcile vet it (:mod:`teapot_lb.tenancy.l7vet`)."""

from __future__ import annotations

from teapot_lb.model.problem import Problem
from teapot_lb.tenancy.l7vet import (
    L7Object,
    L7World,
    problems_of,
    unresolved_backend_refs,
    unserved_parts,
    vet_object,
)
from teapot_lb.validation.config import ConfigSet


def gateway_problems(config: ConfigSet) -> list[Problem]:
    objects: list[L7Object] = [
        *config.ingresses,
        *config.gateways,
        *config.http_routes,
        *config.tls_routes,
        *config.tcp_routes,
        *config.udp_routes,
    ]
    if not objects:
        return []
    world = L7World(config.tenants, objects, config.secrets)
    # (an Ingress's rules without host are left out and an HTTPRoute's references to other
    # namespaces or kinds answered 500, the rest served: said too)
    return [
        p
        for obj in objects
        for p in problems_of(
            obj,
            [
                *vet_object(obj, world),
                *unserved_parts(obj, world),
                *unresolved_backend_refs(obj).values(),
            ],
        )
    ]
