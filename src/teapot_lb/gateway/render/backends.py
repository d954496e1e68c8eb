"""A config backend as a backend section: its server slots and active health check."""

from __future__ import annotations

from teapot_lb.gateway.config import Backend, HealthCheck
from teapot_lb.gateway.slots import Slot

from .words import EMPTY_SLOT, SLOT_MASK, backend_id, host_port, quote, server_name


def _server_line(backend: Backend, index: int, slot: Slot) -> tuple[str, str]:
    """The server line as rendered and as its structure (address and state masked)."""
    opts = []
    if backend.health_check is not None:
        hc = backend.health_check
        opts.append(f"check inter {hc.interval_ms} rise {hc.rise} fall {hc.fall}")
        if hc.tls:
            opts.append("check-ssl verify none")
        if backend.proxy_protocol:
            opts.append("check-send-proxy")
    if backend.proxy_protocol:
        opts.append("send-proxy-v2")
    e = slot.endpoint
    if e is None:
        where, state = EMPTY_SLOT, " disabled"
    else:
        where, state = host_port(e.address, e.port), "" if e.ready else " disabled"
    tail = (" " + " ".join(opts)) if opts else ""
    name = server_name(index)
    return f"    server {name} {where}{tail}{state}", f"    server {name} {SLOT_MASK}{tail}"


def expected_status(codes: str | None) -> str:
    """A status regular expression from Octavia's form (`200`, `200,202`, `200-204`);
    None: any 2xx or 3xx."""
    if codes is None:
        return "^[23]"
    found: list[str] = []
    for part in codes.split(","):
        low, _, high = part.partition("-")
        found += [str(c) for c in range(int(low), int(high or low) + 1) if str(c) not in found]
    return f"^({'|'.join(found)})$"


def _http_check(hc: HealthCheck) -> list[str]:
    if hc.http_version is None and hc.http_host is None and hc.http_method == "GET":
        lines = [f"    option httpchk GET {quote(hc.http_path or '/')}"]
    else:
        send = f"meth {hc.http_method} uri {quote(hc.http_path or '/')}"
        if hc.http_version is not None:
            send += f" ver {hc.http_version}"
        if hc.http_host is not None:
            send += f" hdr Host {quote(hc.http_host)}"
        lines = ["    option httpchk", f"    http-check send {send}"]
    return [*lines, f"    http-check expect rstatus {expected_status(hc.expect_status)}"]


def backend_section(
    backend: Backend, slots: tuple[Slot, ...], http: bool, section: str | None = None
) -> tuple[list[str], list[str]]:
    """A backend's section (`section`: its id, by default `be_<name>`), as rendered and as
    its structure (slot addresses masked)."""
    head = [
        f"backend {section or backend_id(backend.name)}",
        f"    mode {'http' if http else 'tcp'}",
    ]
    head.append("    balance roundrobin")
    hc = backend.health_check
    if hc is not None and hc.timeout_ms is not None:
        head.append(f"    timeout check {hc.timeout_ms}")
    if hc is not None and hc.http_path is not None and http:
        head += _http_check(hc)
    text, structure = list(head), list(head)
    for i, slot in enumerate(slots):
        line, masked = _server_line(backend, i, slot)
        text.append(line)
        structure.append(masked)
    text.append("")
    structure.append("")
    return text, structure


__all__ = ["backend_section", "expected_status"]
