"""The gateway's control plane without Kubernetes: a manifest directory (Tenants, the
tenants' Ingresses and Gateway API objects, their EndpointSlices and TLS Secrets, as the
tenant agent would have mirrored them) translated into the data plane's GatewayConfig,
with the same vetting (a refused object is left out and reported). A dedicated address
(:mod:`.l7address`) is vetted against the Tenant's allocation in the AddressPools of the
directory, and counted in its quota with the addresses its TenantLoadBalancers there hold
(their status).

For standalone mode and the lab: ``translate_directory(path, addresses)``. Objects without
`creationTimestamp` get the time this gateway first saw them (`first_seen`, as standalone
Services do: :mod:`teapot_lb.standalone.first_seen`), so that "the oldest object keeps a
hostname" and "the oldest route wins a tie" mean what they mean with Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.kube.resources import KubeObject
from teapot_lb.model.gateway_api import Gateway, HTTPRoute, TCPRoute, TLSRoute, UDPRoute
from teapot_lb.model.ingress import Ingress
from teapot_lb.model.manifest import parse_documents, read_documents
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.standalone.first_seen import FirstSeen
from teapot_lb.tenancy.l7address import held_addresses
from teapot_lb.tenancy.l7vet import L7Object, L7World, served_here

_SLICE = ("discovery.k8s.io/v1", "EndpointSlice")


def translate_directory(
    path: str | Path,
    addresses: Sequence[IPAddress],
    first_seen: FirstSeen | None = None,
    now: datetime | None = None,
) -> tuple[Translation, list[Problem]]:
    """The translation of the manifests under `path`, and what was wrong with the files
    (documents that do not parse; refusals are in the translation's results).

    `first_seen`: the times objects without a creationTimestamp were first seen (kept in
    the gateway's state directory); None: every such object is seen `now` (a one-off
    check: ties then go by namespace and name)."""
    documents, problems = read_documents([path])
    manifest = parse_documents(documents, ignore_unknown_kinds=True)
    slices: list[KubeObject] = [
        dict(d.body)
        for d in documents
        if isinstance(d.body, Mapping) and (d.body.get("apiVersion"), d.body.get("kind")) == _SLICE
    ]
    tenants = [o for o in manifest.objects if isinstance(o, Tenant)]
    found = [
        o
        for o in manifest.objects
        if isinstance(o, Ingress | Gateway | HTTPRoute | TLSRoute | TCPRoute | UDPRoute)
        and served_here(o)
    ]
    stamps = first_seen if first_seen is not None else FirstSeen(None)
    objects: list[L7Object] = [
        o
        for o in stamps.stamp(found, now or datetime.now(UTC))
        if isinstance(o, Ingress | Gateway | HTTPRoute | TLSRoute | TCPRoute | UDPRoute)
    ]
    pools = {o.name: o for o in manifest.objects if isinstance(o, AddressPool)}
    requests = [o for o in manifest.objects if isinstance(o, TenantLoadBalancer)]
    world = L7World(
        tenants, objects, manifest.secrets, pools=pools, held=held_addresses(tenants, requests)
    )
    return translate(world, slices, addresses, requests), [*problems, *manifest.problems]
