"""The OVN writer's Prometheus metrics and readiness, read from its stats at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from teapot_lb.ovn.writer import OVNWriter

PREFIX = "teapot_lb_ovn"


class OVNCollector(Collector):
    def __init__(self, writer: OVNWriter) -> None:
        self.writer = writer

    def collect(self) -> Iterator[Metric]:
        stats = self.writer.loop.stats
        for name, help_text, value in (
            ("reconciles", "Diffs of the desired rows against the Northbound.", stats.reconciles),
            ("transactions", "Northbound transactions committed.", stats.transactions),
            ("operations", "Row and reference changes committed.", stats.operations),
            ("failures", "Reconciles that failed (retried after 1 s).", stats.failures),
        ):
            counter = CounterMetricFamily(f"{PREFIX}_{name}", help_text)
            counter.add_metric([], value)
            yield counter
        desired = self.writer.desired
        rows = GaugeMetricFamily(f"{PREFIX}_load_balancers", "Load_Balancer rows we want.")
        rows.add_metric([], len(desired.state.load_balancers) if desired else 0)
        yield rows
        missing = GaugeMetricFamily(
            f"{PREFIX}_missing_targets", "Configured routers and switches the NB does not have."
        )
        missing.add_metric([], len(stats.missing))
        yield missing
        behind = GaugeMetricFamily(
            f"{PREFIX}_pending", "1 while the Northbound does not hold the latest desired rows."
        )
        behind.add_metric([], 0 if stats.applied >= self.writer.generation else 1)
        yield behind


def ovn_registry(writer: OVNWriter) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(OVNCollector(writer))
    return registry


def readiness(writer: OVNWriter) -> list[str]:
    """Why the writer is not ready (the last reconcile failed), or nothing."""
    error = writer.loop.stats.last_error
    return [f"OVN Northbound: {error}"] if error else []
