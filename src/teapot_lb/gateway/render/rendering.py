"""The whole configuration: the global section, every frontend and backend section, the
crt-lists, maps and certificate files; a rendering reuses the last one's parts whose
inputs are equal."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from teapot_lb.gateway.config import Backend, GatewayConfig, HTTPRoute, Listener, Protocol
from teapot_lb.gateway.slots import Slot, SlotTable

from .backends import backend_section, http_backend_names
from .certificates import certificate_maps, crt_list, offered
from .frontends import hop_backend, http_frontend, tcp_frontend
from .paths import Paths
from .words import DEFAULT_CERTIFICATE, quote


def shared_sockets(config: GatewayConfig) -> dict[str, str]:
    """HTTPS and TLS passthrough listeners on the same IP:port: each one's partner by name
    (both directions)."""
    by_socket: dict[tuple[str, int], dict[Protocol, str]] = {}
    for x in config.listeners:
        by_socket.setdefault((str(x.address), x.port), {})[x.protocol] = x.name
    out: dict[str, str] = {}
    for names in by_socket.values():
        https, tls = names.get(Protocol.HTTPS), names.get(Protocol.TLS_PASSTHROUGH)
        if https is not None and tls is not None:
            out[https], out[tls] = tls, https
    return out


@dataclass(frozen=True)
class Rendered:
    """What HAProxy is given: files by path, the structure (compare two renderings to know
    whether a reload is needed), the slot table and the certificates' PEMs by path."""

    files: dict[str, str]
    structure: str
    slots: SlotTable
    certificates: dict[str, str] = field(default_factory=dict)
    crt_lists: dict[str, str] = field(default_factory=dict)
    """Each HTTPS listener's crt-list by path (not in `structure`: a certificate added to
    one can go over the runtime API)."""
    certificate_maps: dict[str, str] = field(default_factory=dict)
    """Each HTTPS listener's name -> certificate maps by path (not in `structure`: the
    names of a certificate added without a reload are added to them over the runtime
    API)."""
    parts: Parts | None = None
    """What this rendering was made from, per part, for the next one to reuse."""


@dataclass(frozen=True)
class HTTPFrontend:
    """An HTTP(S) listener's frontend lines and map files, with the inputs they were
    rendered from: the next rendering reuses them when those are equal."""

    listener: Listener
    behind: bool
    paths: Paths
    routes: tuple[HTTPRoute, ...]
    lines: tuple[str, ...]
    maps: dict[str, str]

    def made_from(
        self, listener: Listener, behind: bool, paths: Paths, routes: tuple[HTTPRoute, ...]
    ) -> bool:
        # Unchanged tenants' routes are the same objects (the translation keeps them): the
        # tuple comparison is mostly identity checks.
        return (
            self.routes == routes
            and self.listener == listener
            and self.behind == behind
            and self.paths == paths
        )


@dataclass(frozen=True)
class BackendSection:
    """A backend's text and structure, with what they were rendered from."""

    backend: Backend
    slots: tuple[Slot, ...]
    http: bool
    text: tuple[str, ...]
    structure: tuple[str, ...]


@dataclass(frozen=True)
class Parts:
    """The parts of a rendering a later one may reuse: what an endpoint-only or
    certificate-only change leaves as it was costs a comparison, not a render.

    `routes`: the config's HTTP routes the HTTP backends were found in (`http_backends`);
    `frontends` by listener name; `backends` by backend name."""

    routes: tuple[HTTPRoute, ...]
    http_backends: frozenset[str]
    frontends: dict[str, HTTPFrontend]
    backends: dict[str, BackendSection]


# --- sections ------------------------------------------------------------------------------


def _global(paths: Paths) -> list[str]:
    return [
        "global",
        f"    stats socket {quote(str(paths.admin_socket))} mode 600 level admin"
        " expose-fd listeners",
        "    stats timeout 30s",
        f"    pidfile {quote(str(paths.pid_file))}",
        "    hard-stop-after 30s",
        "    ssl-default-bind-options ssl-min-ver TLSv1.2",
        "    tune.ssl.default-dh-param 2048",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout http-request 10s",
        "    timeout tunnel 1h",
        "    retries 3",
        "    option redispatch 1",
        # On a reload the old worker answers one more request on each idle keep-alive
        # connection, with `Connection: close`, instead of closing it under the client.
        "    option idle-close-on-response",
        "    default-server init-addr none",
        "",
    ]


def render(
    config: GatewayConfig,
    slots: SlotTable,
    paths: Paths,
    pems: Mapping[str, str],
    previous: Rendered | None = None,
) -> Rendered:
    """The HAProxy files for `config` (UDP listeners are nginx's, see gateway.nginx).

    `pems` holds each certificate's PEM (certificate chain and key) by certificate name.
    `previous`: an earlier rendering whose parts are reused where their inputs are equal
    (an HTTP frontend: the listener and the config's HTTP routes; a backend: itself and its
    slots); the result is the same as without it, only cheaper.
    """
    before = previous.parts if previous is not None else None
    text = _global(paths)
    structure = list(text)
    map_files: dict[str, str] = {}
    shared = shared_sockets(config)
    routes = config.http_routes
    frontends: dict[str, HTTPFrontend] = {}
    for listener in config.listeners:
        partner = shared.get(listener.name)
        if listener.protocol in (Protocol.HTTP, Protocol.HTTPS):
            behind = partner is not None
            kept = before.frontends.get(listener.name) if before is not None else None
            if kept is None or not kept.made_from(listener, behind, paths, routes):
                made, maps = http_frontend(config, listener, paths, behind)
                kept = HTTPFrontend(listener, behind, paths, routes, tuple(made), maps)
            frontends[listener.name] = kept
            lines, maps = list(kept.lines), kept.maps
        elif listener.protocol in (Protocol.TCP, Protocol.TLS_PASSTHROUGH):
            lines, maps = tcp_frontend(config, listener, paths, partner), {}
            if partner is not None:
                lines += hop_backend(partner, paths)
        else:
            continue
        text += lines
        structure += lines
        map_files.update(maps)
        for path, content in maps.items():  # the maps are the frontend's structure too
            structure += [f"# map {path}", *(f"#  {row}" for row in content.splitlines())]
    if before is not None and before.routes == routes:
        http_backends = before.http_backends
    else:
        http_backends = frozenset(http_backend_names(config))
    udp_backends = {r.backend for route in config.udp_routes for r in route.backends}
    sections_kept: dict[str, BackendSection] = {}
    for backend in config.backends:
        if backend.name in udp_backends and backend.name not in http_backends:
            continue
        http = backend.name in http_backends
        own = slots.get(backend.name, ())
        section = before.backends.get(backend.name) if before is not None else None
        if section is None or not (
            section.slots == own and section.http == http and section.backend == backend
        ):
            t, s = backend_section(backend, own, http)
            section = BackendSection(backend, own, http, tuple(t), tuple(s))
        sections_kept[backend.name] = section
        text += section.text
        structure += section.structure
    files = {str(paths.config): "\n".join(text), **map_files}
    certificates: dict[str, str] = {}
    crt_lists: dict[str, str] = {}
    cert_maps: dict[str, str] = {}
    for listener in config.listeners:
        if listener.protocol == Protocol.HTTPS:
            listing = crt_list(config, listener, paths)
            files[str(paths.crt_list(listener.name))] = listing
            crt_lists[str(paths.crt_list(listener.name))] = listing
            cert_maps.update(certificate_maps(config, listener, paths))
            default = paths.certificate(DEFAULT_CERTIFICATE)
            certificates[str(default)] = pems.get(DEFAULT_CERTIFICATE, "")
            for name, _names in offered(config, listener):
                certificates[str(paths.certificate(name))] = pems.get(name, "")
    files.update(cert_maps)
    parts = Parts(routes, http_backends, frontends, sections_kept)
    # The slots of HAProxy's backends only (a UDP route's are nginx's: no runtime action).
    ours = {name: kept for name, kept in slots.items() if name in sections_kept}
    return Rendered(files, "\n".join(structure), ours, certificates, crt_lists, cert_maps, parts)


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(section header, body) of a rendered configuration: what the diff names."""
    header, body = "", list[str]()
    for line in text.splitlines():
        if line and not line.startswith(" ") and not line.startswith("#"):
            if header or body:
                yield header, "\n".join(body)
            header, body = line, []
        else:
            body.append(line)
    if header or body:
        yield header, "\n".join(body)


__all__ = [
    "BackendSection",
    "HTTPFrontend",
    "Parts",
    "Rendered",
    "render",
    "sections",
    "shared_sockets",
]
