"""What a teapot provider driver call refuses at once, as the octavia-lib exceptions Octavia
shows the user: options teapot-lb does not support (`UnsupportedOptionError`, naming the
option) and what the manager would refuse anyway for the Tenant (a `DriverError`: its
modes, its node networks, certificates outside its DNS domains). The rest (quotas,
addresses) is the manager's to decide with its allocator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from octavia_lib.api.drivers import exceptions as lib_exceptions

from teapot_lb.model.tenancy import Tenant
from teapot_lb.octavia import tree as t
from teapot_lb.octavia.driver_runtime import fault
from teapot_lb.octavia.l7 import gateway_refusals, l7_refusals
from teapot_lb.octavia.mapping import desired_request, refusal_text
from teapot_lb.octavia.tls import certificate_refusals
from teapot_lb.octavia.unsupported import Unsupported, tree_refusals
from teapot_lb.tenancy.vet import Rule, vet

# What the driver checks before the manager does.
_EARLY_RULES = frozenset({Rule.MODE_NOT_ALLOWED, Rule.BACKEND_NOT_ALLOWED, Rule.INVALID_REQUEST})


def refuse(found: Iterable[Unsupported]) -> None:
    """Raise the options found unsupported, all of them in one message."""
    found = list(found)
    if found:
        text = "; ".join(str(u) for u in found)
        raise lib_exceptions.UnsupportedOptionError(
            user_fault_string=text, operator_fault_string=text
        )


def check(tenant: Tenant, lb: t.LoadBalancer) -> None:
    """Refuse now what cannot work: unsupported shapes, and what the manager would
    refuse for the Tenant (its modes, its node networks)."""
    refuse([*tree_refusals(lb), *l7_refusals(lb)])
    request = desired_request(lb, tenant.spec.namespace)
    early = [refusal_text(request, r) for r in vet(request, tenant, {}) if r.rule in _EARLY_RULES]
    early += gateway_refusals(lb, tenant)
    if early:
        text = "; ".join(early)
        raise fault(f"load balancer {lb.id}: refused for Tenant {tenant.name}: {text}")


def check_tls(tenant: Tenant, listeners: Iterable[Mapping[str, Any]]) -> None:
    """Refuse now a TERMINATED_HTTPS listener's certificate the Tenant cannot serve
    (outside its DNS domains, unparsable, expired), naming the option and reference."""
    found = [text for li in listeners for text in certificate_refusals(li, tenant)]
    if found:
        raise fault(f"refused for Tenant {tenant.name}: {'; '.join(found)}")
