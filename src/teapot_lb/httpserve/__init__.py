"""A small HTTP server every component shares: `/metrics`, `/healthz`, `/readyz`.

Checks are plain callables returning a list of reasons for failing (empty: fine), so a
component declares what "alive" and "ready" mean without knowing about HTTP.
"""

from teapot_lb.httpserve.server import Check, MonitoringServer, parse_address

__all__ = ["Check", "MonitoringServer", "parse_address"]
