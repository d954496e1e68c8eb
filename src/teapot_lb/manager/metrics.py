"""The manager's Prometheus metrics, per tenant (a registry of their own, as the
controller's, so several managers can live in one test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from teapot_lb.metrics_table import MetricTable

PREFIX = "teapot_lb_manager"


class ManagerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        t = MetricTable(PREFIX, registry)
        self.registry = t.registry
        self.addresses = t.gauge("tenant_addresses", "Distinct IPs a tenant holds.", ["tenant"])
        self.load_balancers = t.gauge(
            "tenant_load_balancers", "TenantLoadBalancers of a tenant holding IPs.", ["tenant"]
        )
        self.refused = t.gauge(
            "tenant_requests_refused", "Requests of a tenant currently refused.", ["tenant"]
        )
        self.refusals = t.counter(
            "refusals", "Reconciles that refused a request, by tenant and rule.", ["tenant", "rule"]
        )
        self.node_addresses_refused = t.gauge(
            "tenant_node_addresses_refused",
            "Addresses of a published TenantNodes refused (outside the Tenant's nodeNetworks).",
            ["tenant", "namespace", "name"],
        )
        self.routes = t.gauge("routes", "Route-mode routes wanted, over all tenants.")
        self.reconcile_duration = t.histogram(
            "reconcile_duration_seconds",
            "Time to reconcile one key, API writes included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.reconcile_errors = t.counter("reconcile_errors", "Reconciles failed and retried.")
        # The work queue takes one tenant's key at a time in turn (kube.workqueue): what
        # a tenant's churn was made to wait for another's, and what of it was folded.
        self.deferred = t.counter(
            "queue_deferred",
            "Times a tenant's oldest queued key waited while another tenant's younger key"
            " was reconciled first (by the tenant's namespace; '' the cloud's own keys).",
            ["namespace"],
        )
        self.coalesced = t.counter(
            "queue_coalesced",
            "Changes folded into a key already queued (by the tenant's namespace).",
            ["namespace"],
        )
        self.webhook_requests = t.counter(
            "webhook_requests",
            "Admission reviews answered, by kind and verdict.",
            ["kind", "allowed"],
        )
        self.leader = t.gauge("leader", "1 while this replica leads.")
        self.provider_calls = t.counter(
            "provider_calls",
            "Calls of an external provider (ensure, delete, sweep), by the phase answered.",
            ["provider", "call", "phase"],
        )
        self.provider_errors = t.counter(
            "provider_errors",
            "Calls of an external provider that answered Error, raised or timed out.",
            ["provider", "call"],
        )
        self.provider_seconds = t.histogram(
            "provider_call_seconds",
            "Time an external provider took to answer one call.",
            ["provider", "call"],
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
