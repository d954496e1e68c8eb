"""HAProxy's words as the rendering writes them: quoting, section and server names, the
constants every part shares."""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Address, IPv6Address

from teapot_lb.gateway.config import Protocol

HAPROXY_PROTOCOLS = (Protocol.HTTP, Protocol.HTTPS, Protocol.TLS_PASSTHROUGH, Protocol.TCP)
EMPTY_SLOT = "127.0.0.1:1"  # an empty slot's address; it is in maintenance, never used
SLOT_MASK = "<slot>"
DEFAULT_CERTIFICATE = "_default"
"""The gateway's own certificate's name among the PEMs (a config name cannot start with
'_', so no tenant's certificate can take it)."""
DEFAULT_SNI = "teapot-lb-gateway-default.invalid"
"""The default certificate's one SNI filter (RFC 6761 `.invalid`: no client's real name):
with a filter, HAProxy offers it by no name of its own (an operator's certificate naming a
tenant's hostname would otherwise compete for it); as the crt-list's first line it stays
the default."""
NO_CERTIFICATE = "-"
"""What the certificate maps give for a name no certificate is offered for."""


def quote(text: str) -> str:
    """One HAProxy configuration word, whatever it contains (single quotes: no escapes,
    no variable expansion; a quote inside is closed, escaped, reopened)."""
    return "'" + text.replace("'", "'\\''") + "'"


def log_format(text: str) -> str:
    """A literal inside a log-format argument (set-header values, redirect locations)."""
    return text.replace("%", "%%")


def host_port(address: IPv4Address | IPv6Address, port: int) -> str:
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def server_name(index: int) -> str:
    return f"s{index + 1}"


def backend_id(name: str) -> str:
    return f"be_{name}"


def section_id(name: str, ids: Mapping[str, str] | None) -> str:
    """The backend section of backend `name`: its pool section's id in `ids`, or its own."""
    return (ids.get(name) if ids else None) or backend_id(name)


def frontend_id(name: str) -> str:
    return f"fe_{name}"


def hop_id(name: str) -> str:
    """The tcp backend that hands connections to HTTPS listener `name` (not a `be_`)."""
    return f"hop_{name}"


def when(line: str, cond: str) -> str:
    """`line` under condition `cond` (none: always)."""
    return f"{line} if {cond}" if cond else line


def map_file(rows: list[tuple[str, str]]) -> str:
    """An HAProxy map file: one `key value` line per row."""
    return "".join(f"{k} {v}\n" for k, v in rows)


__all__ = [
    "DEFAULT_CERTIFICATE",
    "DEFAULT_SNI",
    "EMPTY_SLOT",
    "HAPROXY_PROTOCOLS",
    "NO_CERTIFICATE",
    "SLOT_MASK",
    "backend_id",
    "frontend_id",
    "hop_id",
    "host_port",
    "log_format",
    "map_file",
    "quote",
    "section_id",
    "server_name",
    "when",
]
