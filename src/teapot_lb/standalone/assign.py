"""IP assignment in standalone mode: the controller's core, run so every node agrees (pure).

Several `teapot-lb run` processes (one per node) read one manifest directory and do not
talk to each other. They agree on every Service's IPs because the assignment is a pure
function of the manifests: each reload starts from a fresh allocator rebuilt from the
IPs the manifests already show (`status.loadBalancer.ingress`) and reconciles every
Service in key order with the very same :func:`~teapot_lb.controller.reconcile_service`
the Kubernetes controller uses. Same manifests in, same IPs out, on every node, after
every restart. The price: an IP assigned automatically may move when a Service that
sorts before it is added or removed; pin IPs that must never move (the
`lb.teapot.io/ips` annotation, or a status in the manifest).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from teapot_lb import ipam
from teapot_lb.cluster import ClusterView
from teapot_lb.controller import (
    ControllerOptions,
    ServiceOutcome,
    UnparsedPool,
    rebuild,
    reconcile_service,
)
from teapot_lb.model import IPAddress, Service
from teapot_lb.model.service import LoadBalancerIngress, LoadBalancerStatus, ServiceStatus


@dataclass(frozen=True)
class Assignment:
    """What one Service got: IPs and pool, or why not (`refused`)."""

    key: str
    ips: tuple[IPAddress, ...]
    pool: str | None = None
    refused: str | None = None


def assign(
    view: ClusterView,
    options: ControllerOptions | None = None,
    unparsed_pools: Mapping[str, UnparsedPool] | None = None,
) -> dict[str, Assignment]:
    """Every handled Service's assignment, deterministically (see the module docstring)."""
    options = options or ControllerOptions()
    state = rebuild(view, options, unparsed_pools)
    outcomes: dict[str, ServiceOutcome] = {}
    pending = sorted(view.services)
    # Requeues (a freed address may satisfy a refused Service) converge quickly; bounded.
    for _ in range(3):
        requeue: set[str] = set()
        for key in pending:
            outcome = reconcile_service(view, state, key, unparsed_pools)
            outcomes[key] = outcome
            requeue.update(outcome.requeue)
        pending = sorted(requeue)
        if not pending:
            break
    out: dict[str, Assignment] = {}
    for key, outcome in sorted(outcomes.items()):
        result = outcome.result
        if isinstance(result, ipam.Assigned):
            out[key] = Assignment(key, result.ips, result.pool)
        elif isinstance(result, ipam.Refused):
            out[key] = Assignment(key, (), None, result.message)
    return out


def with_status(service: Service, ips: tuple[IPAddress, ...]) -> Service:
    """The Service as the API server would show it once the controller wrote its status."""
    status = ServiceStatus(
        load_balancer=LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=str(ip)) for ip in ips])
    )
    return service.model_copy(update={"status": status})


def assigned_services(
    view: ClusterView, assignments: Mapping[str, Assignment]
) -> dict[str, Service]:
    """Every Service of the view, those we handle carrying their assigned IPs in status."""
    out: dict[str, Service] = {}
    for key, svc in view.services.items():
        a = assignments.get(key)
        out[key] = with_status(svc, a.ips) if a is not None else svc
    return out
