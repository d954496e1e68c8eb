"""The controller's Prometheus metrics (in a registry of their own, so that several
controllers can live in one process, as they do in tests)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from teapot_lb import ipam
from teapot_lb.kube.errors import ApiStatusError, KubeError
from teapot_lb.metrics_table import MetricTable

PREFIX = "teapot_lb_controller"


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        t = MetricTable(PREFIX, registry)
        self.registry = t.registry
        self.pool_size = t.gauge(
            "pool_addresses",
            "Addresses an AddressPool can hand out, per family.",
            ["pool", "family"],
        )
        self.pool_in_use = t.gauge(
            "pool_addresses_in_use",
            "Addresses of an AddressPool assigned to Services (a shared IP counts once).",
            ["pool", "family"],
        )
        self.pools_invalid = t.gauge(
            "pools_invalid",
            "AddressPools left out because they are invalid (see their Valid condition).",
        )
        self.assignments = t.counter(
            "assignments", "Services given new IPs (first assignment or change)."
        )
        self.releases = t.counter("releases", "Services whose IPs were released.")
        self.failures = t.counter(
            "allocation_failures",
            "Reconciles that refused a Service an IP, by IPAM reason.",
            ["reason"],
        )
        self.reconcile_duration = t.histogram(
            "reconcile_duration_seconds",
            "Time to reconcile one key, API writes included.",
            ["kind"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.reconcile_errors = t.counter(
            "reconcile_errors", "Reconciles that failed and were requeued with backoff.", ["kind"]
        )
        self.api_errors = t.counter(
            "api_errors",
            "Kubernetes API requests that failed, by operation and HTTP code (0: no answer).",
            ["operation", "code"],
        )
        self.leader = t.gauge("leader", "1 while this replica holds the leader lease.")
        self.queue_depth = t.gauge("workqueue_depth", "Keys waiting in the work queue.")
        self.services_without_ip = t.gauge(
            "services_without_ip",
            "LoadBalancer Services this controller handles that were refused an IP.",
        )
        self.webhook_errors = t.counter(
            "webhook_errors",
            "Admission reviews not answered, by reason (not_ready: 503, bad_review: 400).",
            ["reason"],
        )
        self.webhook_requests = t.counter(
            "webhook_requests",
            "Admission reviews answered, by kind and verdict.",
            ["kind", "allowed"],
        )

    def api_error(self, operation: str, err: KubeError) -> None:
        """Count a failed API request by operation and HTTP code (0: no answer)."""
        code = err.code if isinstance(err, ApiStatusError) else 0
        self.api_errors.labels(operation, str(code)).inc()

    def set_pool_usage(
        self,
        usage: Mapping[str, Mapping[ipam.IPFamily, ipam.FamilyUsage]],
        invalid: int,
    ) -> None:
        self.pool_size.clear()
        self.pool_in_use.clear()
        for pool, families in usage.items():
            for family, counts in families.items():
                self.pool_size.labels(pool, family.value).set(counts.assigned + counts.available)
                self.pool_in_use.labels(pool, family.value).set(counts.assigned)
        self.pools_invalid.set(invalid)
