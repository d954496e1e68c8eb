"""The manager's Prometheus metrics, per tenant (a registry of their own, as the
controller's, so several managers can live in one test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "teapot_lb_manager"


class ManagerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.addresses = Gauge(
            f"{PREFIX}_tenant_addresses", "Distinct IPs a tenant holds.", ["tenant"], registry=r
        )
        self.load_balancers = Gauge(
            f"{PREFIX}_tenant_load_balancers",
            "TenantLoadBalancers of a tenant holding IPs.",
            ["tenant"],
            registry=r,
        )
        self.refused = Gauge(
            f"{PREFIX}_tenant_requests_refused",
            "Requests of a tenant currently refused.",
            ["tenant"],
            registry=r,
        )
        self.refusals = Counter(
            f"{PREFIX}_refusals",
            "Reconciles that refused a request, by tenant and rule.",
            ["tenant", "rule"],
            registry=r,
        )
        self.routes = Gauge(
            f"{PREFIX}_routes", "Route-mode routes wanted, over all tenants.", registry=r
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time to reconcile one key, API writes included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors", "Reconciles failed and retried.", registry=r
        )
        self.webhook_requests = Counter(
            f"{PREFIX}_webhook_requests",
            "Admission reviews answered, by kind and verdict.",
            ["kind", "allowed"],
            registry=r,
        )
        self.leader = Gauge(f"{PREFIX}_leader", "1 while this replica leads.", registry=r)
