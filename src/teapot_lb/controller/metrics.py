"""The controller's Prometheus metrics (in a registry of their own, so that several
controllers can live in one process, as they do in tests)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from teapot_lb import ipam
from teapot_lb.kube.errors import ApiStatusError, KubeError

PREFIX = "teapot_lb_controller"


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pool_size = Gauge(
            f"{PREFIX}_pool_addresses",
            "Addresses an AddressPool can hand out, per family.",
            ["pool", "family"],
            registry=r,
        )
        self.pool_in_use = Gauge(
            f"{PREFIX}_pool_addresses_in_use",
            "Addresses of an AddressPool assigned to Services (a shared IP counts once).",
            ["pool", "family"],
            registry=r,
        )
        self.pools_invalid = Gauge(
            f"{PREFIX}_pools_invalid",
            "AddressPools left out because they are invalid (see their Valid condition).",
            registry=r,
        )
        self.assignments = Counter(
            f"{PREFIX}_assignments",
            "Services given new IPs (first assignment or change).",
            registry=r,
        )
        self.releases = Counter(
            f"{PREFIX}_releases", "Services whose IPs were released.", registry=r
        )
        self.failures = Counter(
            f"{PREFIX}_allocation_failures",
            "Reconciles that refused a Service an IP, by IPAM reason.",
            ["reason"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time to reconcile one key, API writes included.",
            ["kind"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_errors",
            "Reconciles that failed and were requeued with backoff.",
            ["kind"],
            registry=r,
        )
        self.api_errors = Counter(
            f"{PREFIX}_api_errors",
            "Kubernetes API requests that failed, by operation and HTTP code (0: no answer).",
            ["operation", "code"],
            registry=r,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader", "1 while this replica holds the leader lease.", registry=r
        )
        self.queue_depth = Gauge(
            f"{PREFIX}_workqueue_depth", "Keys waiting in the work queue.", registry=r
        )
        self.services_without_ip = Gauge(
            f"{PREFIX}_services_without_ip",
            "LoadBalancer Services this controller handles that were refused an IP.",
            registry=r,
        )
        self.webhook_errors = Counter(
            f"{PREFIX}_webhook_errors",
            "Admission reviews not answered, by reason (not_ready: 503, bad_review: 400).",
            ["reason"],
            registry=r,
        )
        self.webhook_requests = Counter(
            f"{PREFIX}_webhook_requests",
            "Admission reviews answered, by kind and verdict.",
            ["kind", "allowed"],
            registry=r,
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
