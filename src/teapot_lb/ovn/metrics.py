"""The OVN writer's Prometheus metrics and readiness, read from its stats at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from teapot_lb.metrics_table import Reading, ReadingCollector
from teapot_lb.ovn.writer import OVNWriter

PREFIX = "teapot_lb_ovn"

READINGS: tuple[Reading[OVNWriter], ...] = (
    Reading("counter", "reconciles", "Diffs of the desired rows against the Northbound.",
            lambda w: w.loop.stats.reconciles),
    Reading("counter", "transactions", "Northbound transactions committed.",
            lambda w: w.loop.stats.transactions),
    Reading("counter", "operations", "Row and reference changes committed.",
            lambda w: w.loop.stats.operations),
    Reading("counter", "failures", "Reconciles that failed (retried after 1 s).",
            lambda w: w.loop.stats.failures),
    Reading("gauge", "load_balancers", "Load_Balancer rows we want.",
            lambda w: len(w.desired.state.load_balancers) if w.desired else 0),
    Reading("gauge", "missing_targets", "Configured routers and switches the NB does not have.",
            lambda w: len(w.loop.stats.missing)),
    Reading("gauge", "pending", "1 while the Northbound does not hold the latest desired rows.",
            lambda w: 0 if w.loop.stats.applied >= w.generation else 1),
)  # fmt: skip


def ovn_registry(writer: OVNWriter) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ReadingCollector(PREFIX, writer, READINGS))
    return registry


def readiness(writer: OVNWriter) -> list[str]:
    """Why the writer is not ready (the last reconcile failed), or nothing."""
    error = writer.loop.stats.last_error
    return [f"OVN Northbound: {error}"] if error else []
