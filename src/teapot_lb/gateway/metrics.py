"""The gateway's Prometheus metrics, per tenant and route, read at scrape time from the
last HAProxy stats snapshot (`show stat`) and the drivers' counters.

A backend's labels are its owner's (`config.Owner`: tenant, kind, namespace, name of the
route or Service it serves); a listener's frontend counts every request it received.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from teapot_lb.gateway.render import backend_id, frontend_id
from teapot_lb.gateway.service import Gateway

PREFIX = "teapot_lb_gateway"
ROUTE_LABELS = ["tenant", "kind", "namespace", "route", "backend"]


class GatewayCollector(Collector):
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def collect(self) -> Iterator[Metric]:
        g = self.gateway
        yield from self._drivers(g)
        config = g.config
        if config is None:
            return
        owners = {backend_id(b.name): b for b in config.backends}
        listeners = {frontend_id(x.name): x.name for x in config.listeners}
        requests = CounterMetricFamily(
            f"{PREFIX}_requests", "HTTP requests (TCP: connections) sent to a backend.",
            labels=ROUTE_LABELS,
        )  # fmt: skip
        errors = CounterMetricFamily(
            f"{PREFIX}_errors", "5xx responses (TCP: connection and response errors).",
            labels=ROUTE_LABELS,
        )  # fmt: skip
        bytes_in = CounterMetricFamily(
            f"{PREFIX}_received_bytes", "Bytes from clients, per backend.", labels=ROUTE_LABELS
        )
        bytes_out = CounterMetricFamily(
            f"{PREFIX}_sent_bytes", "Bytes to clients, per backend.", labels=ROUTE_LABELS
        )
        up = GaugeMetricFamily(
            f"{PREFIX}_endpoints_up", "Endpoints a backend can send to now.", labels=ROUTE_LABELS
        )
        frontend = CounterMetricFamily(
            f"{PREFIX}_listener_requests", "Requests (TCP: connections) a listener received.",
            labels=["listener"],
        )  # fmt: skip
        up_counts: dict[str, int] = {}
        for row in g.stats.rows:
            backend = owners.get(row.proxy)
            if row.service == "FRONTEND" and row.proxy in listeners:
                frontend.add_metric([listeners[row.proxy]], row.requests)
            elif backend is not None and row.service == "BACKEND":
                o = backend.owner
                labels = [o.tenant, o.kind.value, o.namespace, o.name, backend.name]
                requests.add_metric(labels, row.requests)
                errors.add_metric(labels, row.errors)
                bytes_in.add_metric(labels, row.bytes_in)
                bytes_out.add_metric(labels, row.bytes_out)
            elif backend is not None and row.status.startswith("UP"):
                up_counts[row.proxy] = up_counts.get(row.proxy, 0) + 1
        for proxy, b in owners.items():
            o = b.owner
            up.add_metric(
                [o.tenant, o.kind.value, o.namespace, o.name, b.name], up_counts.get(proxy, 0)
            )
        yield from (requests, errors, bytes_in, bytes_out, up, frontend)

    def _drivers(self, g: Gateway) -> Iterator[Metric]:
        c = g.haproxy.counters
        for name, value, text in (
            ("reloads", c.reloads, "HAProxy reloads (the structure changed)."),
            ("runtime_actions", c.runtime_actions, "Changes applied over HAProxy's runtime API."),
            ("refused_configs", c.refused, "Configurations not installed (invalid)."),
            ("haproxy_restarts", g.haproxy.daemon.unexpected_exits, "HAProxy deaths restarted."),
            ("nginx_reloads", g.nginx.reloads, "nginx (UDP) reloads."),
        ):
            m = CounterMetricFamily(f"{PREFIX}_{name}", text)
            m.add_metric([], value)
            yield m
        ok = GaugeMetricFamily(f"{PREFIX}_config_ok", "1 when the last apply had no error.")
        ok.add_metric([], 0 if g.last_errors else 1)
        yield ok


def register(registry: CollectorRegistry, gateway: Gateway) -> None:
    registry.register(GatewayCollector(gateway))
