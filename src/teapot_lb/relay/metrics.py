"""The relay's Prometheus metrics, per tenant and reason (a registry of their own, as the
manager's, so several relays can live in one test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from teapot_lb.metrics_table import MetricTable

PREFIX = "teapot_lb_relay"


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        t = MetricTable(PREFIX, registry)
        self.registry = t.registry
        self.rejected = t.counter(
            "routes_rejected",
            "Routes a tenant sent that the relay did not pass on, by tenant and rule.",
            ["tenant", "reason"],
        )
        self.scrubbed = t.counter(
            "routes_communities_scrubbed",
            "Accepted routes whose communities outside the allowlist were removed.",
            ["tenant"],
        )
        self.refused = t.counter(
            "sessions_refused",
            "Tenant sessions refused or torn down, by tenant ('' unknown) and reason.",
            ["tenant", "reason"],
        )
        self.accepted = t.gauge(
            "routes_accepted", "Routes of a tenant passed on to the network now.", ["tenant"]
        )
        self.sessions = t.gauge(
            "sessions_established", "Established sessions of a tenant's speakers.", ["tenant"]
        )
        self.prefixes = t.gauge("prefixes_advertised", "Prefixes advertised to the network.")
        self.paths = t.gauge(
            "paths_advertised",
            "Paths advertised to the network (ADD-PATH: one per tenant node and prefix).",
        )
