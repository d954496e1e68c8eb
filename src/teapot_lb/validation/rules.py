"""Validation of a whole configuration: every rule, and the view the webhook needs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teapot_lb.kept import Kept
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.kinds import ApiObject
from teapot_lb.model.manifest import Manifest
from teapot_lb.model.problem import Problem
from teapot_lb.model.service import Service
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.validation.advertisements import l2_problems, ovn_problems, vip_problems
from teapot_lb.validation.bfd import bfd_profile_problems
from teapot_lb.validation.bgp import bgp_advertisement_problems, peer_problems
from teapot_lb.validation.config import ConfigSet, OwnChecks
from teapot_lb.validation.gateway import gateway_problems
from teapot_lb.validation.names import name_problems
from teapot_lb.validation.pools import pool_problems
from teapot_lb.validation.services import service_problems
from teapot_lb.validation.tenancy import (
    tenant_load_balancer_problems,
    tenant_nodes_problems,
    tenant_problems,
)

RULES = (
    name_problems,
    pool_problems,
    peer_problems,
    bgp_advertisement_problems,
    bfd_profile_problems,
    l2_problems,
    vip_problems,
    ovn_problems,
    service_problems,
    tenant_problems,
    tenant_load_balancer_problems,
    tenant_nodes_problems,
    gateway_problems,
)


def validate(
    objects: Iterable[ApiObject] | ConfigSet,
    unparsed: Iterable[ObjectRef] = (),
    secrets: Mapping[str, Mapping[str, bytes]] | None = None,
    kept: Kept[OwnChecks] | None = None,
) -> list[Problem]:
    """Every problem in a configuration (pools, peers, advertisements, Services together).

    `unparsed` names objects that exist but could not be parsed, so that references to
    them are not also reported as unknown; `secrets`: the Secrets that exist, when known;
    `kept`: each Service's own checks from the last validation of the same source.
    """
    config = (
        objects
        if isinstance(objects, ConfigSet)
        else ConfigSet.of(objects, unparsed, secrets, kept)
    )
    return [p for rule in RULES for p in rule(config)]


def validate_change(obj: ApiObject, existing: Iterable[ApiObject]) -> list[Problem]:
    """Problems a create/update of `obj` would bring, given the objects already there.

    For an admission webhook: `obj` replaces any existing object of the same ref; only
    problems about `obj`, or naming it (an overlap with it), are returned, so that an
    unrelated broken object does not block this change.
    """
    ref = obj.ref
    others = [o for o in existing if o.ref != ref]
    if isinstance(obj, Service):
        # Another Service can only be involved through an IP both request: skip the rest.
        others = [o for o in others if not isinstance(o, Service) or _shares_request(obj, o)]
    elif isinstance(obj, TenantLoadBalancer):
        # Only its own tenant's requests count (quotas); they come before it.
        namespace = obj.metadata.namespace
        others = [
            o
            for o in others
            if not isinstance(o, TenantLoadBalancer) or o.metadata.namespace == namespace
        ]
    return [p for p in validate([*others, obj]) if p.involves(ref)]


def _shares_request(a: Service, b: Service) -> bool:
    try:
        return bool(set(a.requested_ips()) & set(b.requested_ips()))
    except ValueError:
        return False


def validate_manifest(
    manifest: Manifest, *, secrets_known: bool = False, kept: Kept[OwnChecks] | None = None
) -> list[Problem]:
    """Parse problems of a loaded manifest, then the rules, each marked with its file.

    A BGPPeer's `passwordSecret` is checked against the manifests' Secrets when they hold
    any, or always with `secrets_known` (standalone mode, where the manifests are the only
    source of Secrets). `kept`: see :func:`validate`."""
    unparsed = [p.ref for p in manifest.problems]
    secrets = manifest.secrets if secrets_known or manifest.secrets else None
    found = validate(manifest.objects, unparsed, secrets, kept)
    return manifest.problems + manifest.with_sources(found)
