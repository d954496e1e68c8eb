"""Octavia health monitors → what probes the members (pure).

An L7 pool (one the gateway serves) is probed by the gateway's HAProxy: its monitor
becomes the gateway's :class:`~teapot_lb.gateway.config.HealthCheck`, carried on the
pool's EndpointSlice as an annotation (:data:`ANNOTATION_HEALTH_CHECK`) that the
gateway's translation reads, so the check travels the same path as the endpoints.

    delay → inter        timeout → timeout check     max_retries → rise
    max_retries_down → fall    url_path, http_method, http_version, domain_name → the
    check request          expected_codes → the statuses that pass
    HTTP → an HTTP check   HTTPS → the same over TLS   TCP → a connect check

PING and TLS-HELLO monitors are refused (:mod:`.unsupported`). An L4 pool's monitor is
kept but probes nothing: route mode hands the VIP's traffic to the members without a
proxy that could check them, so its members report NO_MONITOR (see docs/octavia.md).
"""

from __future__ import annotations

from pydantic import ValidationError

from teapot_lb.gateway.config import HealthCheck
from teapot_lb.gateway.control.l7mirror import ANNOTATION_HEALTH_CHECK
from teapot_lb.octavia.tree import HealthMonitor, Pool

PROBED_TYPES = frozenset({"HTTP", "HTTPS", "TCP"})
"""The monitor types the gateway's HAProxy carries out."""


def health_check(monitor: HealthMonitor | None) -> HealthCheck | None:
    """The gateway's check for an L7 pool's monitor (None: no monitor, or disabled)."""
    if monitor is None or not monitor.admin_state_up or monitor.type not in PROBED_TYPES:
        return None
    http = monitor.type in ("HTTP", "HTTPS")
    version = monitor.http_version
    try:
        return _check(monitor, http, version)
    except ValidationError:  # refused before it is stored (unsupported.RULES)
        return None


def _check(monitor: HealthMonitor, http: bool, version: float | None) -> HealthCheck:
    return HealthCheck(
        interval_ms=monitor.delay * 1000,
        timeout_ms=monitor.timeout * 1000,
        rise=monitor.max_retries,
        fall=monitor.max_retries_down,
        http_path=(monitor.url_path or "/") if http else None,
        http_method=(monitor.http_method or "GET") if http else "GET",
        http_version=f"HTTP/{version:.1f}" if http and version is not None else None,
        http_host=monitor.domain_name if http else None,
        expect_status=_codes(monitor.expected_codes) if http else None,
        tls=monitor.type == "HTTPS",
    )


def _codes(text: str | None) -> str | None:
    """Octavia's expected_codes without the spaces its API allows after commas."""
    return "".join(text.split()) if text else None


def probed(pool: Pool) -> bool:
    """Whether the gateway probes this (L7) pool's members."""
    return health_check(pool.health_monitor) is not None


def health_annotations(pool: Pool) -> dict[str, str]:
    """The annotation of the pool's EndpointSlice that asks the gateway for the check
    (none without one)."""
    check = health_check(pool.health_monitor)
    if check is None:
        return {}
    return {ANNOTATION_HEALTH_CHECK: check.model_dump_json(by_alias=True, exclude_none=True)}


__all__ = ["PROBED_TYPES", "health_annotations", "health_check", "probed"]
