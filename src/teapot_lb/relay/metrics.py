"""The relay's Prometheus metrics, per tenant and reason (a registry of their own, as the
manager's, so several relays can live in one test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

PREFIX = "teapot_lb_relay"


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rejected = Counter(
            f"{PREFIX}_routes_rejected",
            "Routes a tenant sent that the relay did not pass on, by tenant and rule.",
            ["tenant", "reason"],
            registry=r,
        )
        self.scrubbed = Counter(
            f"{PREFIX}_routes_communities_scrubbed",
            "Accepted routes whose communities outside the allowlist were removed.",
            ["tenant"],
            registry=r,
        )
        self.refused = Counter(
            f"{PREFIX}_sessions_refused",
            "Tenant sessions refused or torn down, by tenant ('' unknown) and reason.",
            ["tenant", "reason"],
            registry=r,
        )
        self.accepted = Gauge(
            f"{PREFIX}_routes_accepted",
            "Routes of a tenant passed on to the network now.",
            ["tenant"],
            registry=r,
        )
        self.sessions = Gauge(
            f"{PREFIX}_sessions_established",
            "Established sessions of a tenant's speakers.",
            ["tenant"],
            registry=r,
        )
        self.prefixes = Gauge(
            f"{PREFIX}_prefixes_advertised", "Prefixes advertised to the network.", registry=r
        )
        self.paths = Gauge(
            f"{PREFIX}_paths_advertised",
            "Paths advertised to the network (ADD-PATH: one per tenant node and prefix).",
            registry=r,
        )
