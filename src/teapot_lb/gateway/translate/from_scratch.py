"""Everything translated from scratch: vetted per tenant, dedicated addresses assigned,
parts built and merged."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

from teapot_lb.addresses import IPAddress
from teapot_lb.kube.resources import KubeObject
from teapot_lb.tenancy.l7address import assign
from teapot_lb.tenancy.l7vet import L7World

from .namespaces import by_namespace, tenant_namespaces
from .parts import build_part, merge
from .results import Translation
from .vetting import Vetted, dedicated_wanted, vet_tenant


def translate(
    world: L7World, slices: Iterable[KubeObject], addresses: Sequence[IPAddress]
) -> Translation:
    """The config the gateway serves and every object's result, translated from scratch
    (:class:`~teapot_lb.gateway.translation_cache.TranslationCache` keeps the parts and
    translates only the tenants a change touches). Objects are taken in
    :func:`~.vetting.object_order` per tenant namespace, the namespaces in order."""
    shared = tuple(addresses)
    owners = tenant_namespaces(world.tenants)
    inputs = by_namespace(world, slices)
    vetted: dict[str, tuple[Vetted, ...]] = {}
    for namespace, (objects, _, _) in sorted(inputs.items()):
        owner = owners.get(namespace)
        if owner is not None:
            vetted[namespace] = vet_tenant(objects, owner, world)
    wanted = dedicated_wanted(chain.from_iterable(vetted.values()))
    dedicated = assign(wanted, world.pools, world.held, shared)
    parts = {
        ns: build_part(vs, dedicated, inputs[ns][2], inputs[ns][1], shared)
        for ns, vs in vetted.items()
    }
    changed = {ns: part.results for ns, part in parts.items()}
    return merge(list(parts.values()), shared, changed)


__all__ = ["translate"]
