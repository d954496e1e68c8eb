"""Everything translated from scratch: vetted per tenant, dedicated addresses assigned,
parts built and merged."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

from teapot_lb.addresses import IPAddress
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.tenancy.l7address import assign
from teapot_lb.tenancy.l7vet import L7World

from .namespaces import by_namespace, tenant_namespaces
from .parts import Part, build_part, merge
from .results import Translation
from .vetting import Vetted, dedicated_wanted, vet_tenant


def translate(
    world: L7World,
    slices: Iterable[KubeObject],
    addresses: Sequence[IPAddress],
    requests: Iterable[TenantLoadBalancer] = (),
) -> Translation:
    """The config the gateway serves and every object's result, translated from scratch
    (:class:`~teapot_lb.gateway.translation_cache.TranslationCache` keeps the parts and
    translates only the tenants a change touches). Objects are taken in
    :func:`~.vetting.object_order` per tenant namespace, the namespaces in order;
    `requests`: the TenantLoadBalancers (those of provider `proxy` are served)."""
    shared = tuple(addresses)
    owners = tenant_namespaces(world.tenants)
    inputs = by_namespace(world, slices)
    by_ns: dict[str, list[TenantLoadBalancer]] = {}
    for request in requests:
        by_ns.setdefault(request.namespace, []).append(request)
    vetted: dict[str, tuple[Vetted, ...]] = {}
    for namespace in sorted({*inputs, *by_ns}):
        owner = owners.get(namespace)
        if owner is not None:
            objects = inputs[namespace][0] if namespace in inputs else []
            vetted[namespace] = vet_tenant(objects, owner, world)
    wanted = dedicated_wanted(chain.from_iterable(vetted.values()))
    dedicated = assign(wanted, world.pools, world.held, shared)
    parts: dict[str, Part] = {}
    for ns, vs in vetted.items():
        _, eps, secrets = inputs.get(ns, ([], [], {}))
        requests_of = by_ns.get(ns, ())
        part = build_part(vs, dedicated, secrets, eps, shared, requests_of, owners[ns], world.pools)
        if ns in inputs or part.load_balancers:
            parts[ns] = part
    changed = {ns: part.results for ns, part in parts.items()}
    return merge(parts, shared, changed)


__all__ = ["translate"]
