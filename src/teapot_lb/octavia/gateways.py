"""Where the provider agent reads the gateways' reports: the gateway pods behind their
Service in the management cluster (``[teapot] gateway_service``), found by the Service's
EndpointSlices and read again every round, or an explicit list
(``[teapot] gateway_status_urls``, which wins when set).

:func:`status_urls` is the pure part (EndpointSlices → report base URLs);
:class:`GatewayFinder` reads the slices (adapter, asyncio) and keeps the last list when a
read fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from teapot_lb import log
from teapot_lb.gateway.render import host_port
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.errors import KubeError
from teapot_lb.kube.resources import ENDPOINT_SLICES
from teapot_lb.model.common import parse_ip
from teapot_lb.model.service import SERVICE_NAME_LABEL, EndpointSlice

_log = log.get("octavia.agent")

DEFAULT_PORT = "7475"
"""The gateway's metrics port (``teapot-lb gateway --metrics-addr=:7475`` in
deploy/teapot/gateway-node.yaml; the pods use the host network)."""


def parse_service(text: str) -> tuple[str, str]:
    """``<namespace>/<name>`` of ``[teapot] gateway_service``; ValueError naming it."""
    namespace, sep, name = text.strip().partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(
            f"[teapot] gateway_service: {text!r} is not <namespace>/<name> of the gateway's "
            "Service in the management cluster"
        )
    return namespace, name


def parse_port(text: str) -> int | str:
    """``[teapot] gateway_status_port``: a number (the port on every gateway pod's
    address) or the name of a port of the Service (its EndpointSlices' port of that name)."""
    text = text.strip()
    if text.isdigit():
        number = int(text)
        if not 0 < number < 65536:
            raise ValueError(f"[teapot] gateway_status_port: {number} is not a port number")
        return number
    if not text:
        raise ValueError("[teapot] gateway_status_port: empty (a port number or name)")
    return text


def status_urls(slices: Sequence[EndpointSlice], port: int | str) -> list[str]:
    """The base URLs (``http://ADDRESS:PORT``) of the ready endpoints of these slices,
    sorted, each once. `port` by name is looked up in each slice's ports: a slice
    without a port of that name contributes nothing."""
    urls: set[str] = set()
    for eps in slices:
        number = port if isinstance(port, int) else _named_port(eps, port)
        if number is None:
            continue
        for endpoint in eps.endpoints:
            if not endpoint.is_ready or endpoint.conditions.terminating:
                continue
            for address in endpoint.addresses:
                try:
                    ip = parse_ip(address)
                except ValueError:
                    continue  # an FQDN slice: not a pod of ours
                urls.add(f"http://{host_port(ip, number)}")
    return sorted(urls)


def _named_port(eps: EndpointSlice, name: str) -> int | None:
    return next((p.port for p in eps.ports if p.name == name and p.port), None)


class GatewayFinder:
    """The URLs to read this round: the explicit list, or the Service's ready endpoints
    (the last list found when the management API cannot be read)."""

    def __init__(self, urls: Sequence[str], service: str = "", port: str = DEFAULT_PORT) -> None:
        self.explicit = [u for u in urls if u]
        self.service = parse_service(service) if service and not self.explicit else None
        self.port = parse_port(port or DEFAULT_PORT)
        self.found: list[str] = []

    async def urls(self, client: KubeClient | None) -> list[str]:
        if self.explicit or self.service is None or client is None:
            return self.explicit
        namespace, name = self.service
        try:
            listed = await client.list(
                ENDPOINT_SLICES, namespace=namespace, label_selector=f"{SERVICE_NAME_LABEL}={name}"
            )
            slices = [EndpointSlice.model_validate(obj) for obj in listed.items]
        except (KubeError, OSError, ValueError, TimeoutError) as err:
            _log.warning("gateway endpoints unreadable", service=f"{namespace}/{name}",
                         error=str(err) or repr(err), keeping=self.found)  # fmt: skip
            return self.found
        found = status_urls(slices, self.port)
        if found != self.found:
            _log.info("gateways", service=f"{namespace}/{name}", urls=found)
            if not found:
                _log.warning("no ready gateway endpoints", service=f"{namespace}/{name}",
                             port=self.port)  # fmt: skip
        self.found = found
        return found


__all__ = ["DEFAULT_PORT", "GatewayFinder", "parse_port", "parse_service", "status_urls"]
