"""The whole configuration: the global section, every frontend and backend section, the
crt-lists, maps and certificate files; a rendering reuses the last one's parts whose
inputs are equal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from teapot_lb.gateway import hosts
from teapot_lb.gateway.config import (
    Backend,
    GatewayConfig,
    HTTPRoute,
    Listener,
    Protocol,
    changed_objects,
)
from teapot_lb.gateway.pool import SPARE, Pool, place, pool_id, pooled, stream_backends
from teapot_lb.gateway.slots import Slot, SlotTable

from .backends import backend_section
from .certificates import Offer, certificate_maps, crt_list, offers
from .frontends import (
    Made,
    fast_backend,
    fast_map,
    fast_order,
    fast_route,
    hop_backend,
    http_frontend,
    tcp_frontend,
)
from .paths import Paths
from .words import DEFAULT_CERTIFICATE, backend_id, quote, section_id


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
    route_maps: dict[str, str] = field(default_factory=dict)
    """Each HTTP listener's fast map (exact host -> backend section) by path: not in
    `structure`, its rows change over the runtime API (a simple virtual host added,
    removed or sent elsewhere)."""
    pool: Pool = field(default_factory=Pool)
    """The backend pool's sections (gateway.pool): the next rendering's sticky input."""
    servers: dict[str, tuple[Slot, ...]] = field(default_factory=dict)
    """Every backend section's slots by section id (`be_<name>`, `pool_<i>`): what the
    runtime API's `set server` names."""
    change: int = 0
    """The number of the change this rendering is (sticky: an empty slot holds the number
    of the change that freed it, see gateway.slots)."""
    backends: Mapping[str, Backend] = field(default_factory=dict)
    """The config's backends by name, those `slots` were assigned for (the next change's
    `slots.assign` keeps the slots of those it has as the same objects)."""


@dataclass(frozen=True)
class HTTPFrontend:
    """An HTTP(S) listener's frontend as rendered (`made`) and its fast map's text, with
    the inputs they were rendered from: the next rendering reuses them when those are
    equal, or when the routes added and removed are only fast hosts' (`changed`).
    `hostnames`: how many of the listener's routes have each (normalized) hostname."""

    listener: Listener
    behind: bool
    paths: Paths
    routes: tuple[HTTPRoute, ...]
    made: Made
    hostnames: Counter[str]
    fast_text: str
    fast_sent: dict[str, str]
    """The section id of each backend of the fast map's rows, as `fast_text` has it."""
    map_structure: str
    """Its maps' rows as structure lines, joined (the fast map's are not structure)."""
    joined: str
    """`made.lines` joined: the configuration is joined from such parts, not from every
    line of every part on each rendering."""

    def reused(
        self,
        listener: Listener,
        behind: bool,
        paths: Paths,
        routes: tuple[HTTPRoute, ...],
        ids: Mapping[str, str],
        changed: Changed | None = None,
    ) -> tuple[Made, Counter[str]] | None:
        """This frontend for `routes`, without rendering it again, when it can be: the same
        routes, or the routes added and removed since only fast hosts' (`fast_route`, a
        hostname no other route of the listener has): the same lines and maps, the fast
        rows with theirs added and removed. None: render it again. `changed`: the routes
        added and removed since `self.routes` when known (`_changed`)."""
        if not self._same_lines(listener, behind, paths, ids):
            return None
        # Unchanged tenants' routes are the same objects (the translation keeps them): the
        # tuple comparison is mostly identity checks.
        if self.routes == routes:
            return self.made, self.hostnames
        if changed is None or changed.old is not self.routes:
            changed = _changed(self.routes, routes)
        return self._fast_only(changed, listener.name)

    def _same_lines(
        self, listener: Listener, behind: bool, paths: Paths, ids: Mapping[str, str]
    ) -> bool:
        # (the listener's certificates are the crt-list's, not the frontend's lines)
        mine = self.listener
        return (
            (
                mine == listener
                or mine.model_copy(update={"certificates": listener.certificates}) == listener
            )
            and self.behind == behind
            and self.paths == paths
            and all(section_id(n, ids) == i for n, i in self.made.sent_to.items())
        )

    def _fast_only(self, changed: Changed, listener: str) -> tuple[Made, Counter[str]] | None:
        added, removed = _difference(changed, listener)
        if not all(fast_route(r) for r in (*added, *removed)):
            return None
        names = Counter(self.hostnames)
        rows = dict(self.made.fast)
        for route in removed:
            for host in map(hosts.normalize, route.hostnames):
                if names[host] != 1 or host not in rows:  # (it was not a fast host)
                    return None
                del names[host]
                del rows[host]
        for route in added:
            for host in map(hosts.normalize, route.hostnames):
                names[host] += 1
                rows[host] = fast_backend(route)
        if any(names[hosts.normalize(h)] != 1 for r in added for h in r.hostnames):
            return None
        made = replace(self.made, fast=dict(sorted(rows.items(), key=lambda r: fast_order(r[0]))))
        if made.only_fast != self.made.only_fast:
            return None
        return made, names


def _difference(changed: Changed, listener: str) -> tuple[list[HTTPRoute], list[HTTPRoute]]:
    """The routes of `listener` added and removed. A tenant's translation gives its
    unchanged routes again as equal copies: those are neither."""
    added = [r for r in changed.added if listener in r.listeners]
    removed = [r for r in changed.removed if listener in r.listeners]
    by_owner: dict[tuple[str, ...], list[HTTPRoute]] = {}
    for r in removed:
        by_owner.setdefault(_owner(r), []).append(r)
    kept: list[int] = []
    for r in added:
        same = by_owner.get(_owner(r), [])
        twin = next((i for i, x in enumerate(same) if x == r), None)
        if twin is None:
            kept.append(id(r))
        else:
            same.pop(twin)
    remaining = {id(r) for group in by_owner.values() for r in group}
    return [r for r in added if id(r) in kept], [r for r in removed if id(r) in remaining]


@dataclass(frozen=True)
class Changed:
    """From the routes `old` to others: those added (not objects of `old`) and removed
    (not objects of the others), each in its tuple's order."""

    old: tuple[HTTPRoute, ...]
    added: list[HTTPRoute]
    removed: list[HTTPRoute]


def _changed(old: tuple[HTTPRoute, ...], new: tuple[HTTPRoute, ...]) -> Changed:
    return Changed(old, *changed_objects(old, new))


def _backend_refs(routes: list[HTTPRoute]) -> Counter[str]:
    """How many references each backend has in `routes` (their rules' backends)."""
    return Counter(ref.backend for r in routes for rule in r.rules for ref in rule.backends)


def _map_structure(maps: Mapping[str, str]) -> str:
    """A frontend's maps are its structure too (but for the fast map, not among `maps`:
    see `Rendered.route_maps`)."""
    return "\n".join(
        line
        for path, content in maps.items()
        for line in (f"# map {path}", *(f"#  {row}" for row in content.splitlines()))
    )


def _owner(route: HTTPRoute) -> tuple[str, ...]:
    o = route.owner
    return (o.tenant, o.kind, o.namespace, o.name)


def _hostnames(routes: tuple[HTTPRoute, ...], listener: str) -> Counter[str]:
    return Counter(
        hosts.normalize(h) for r in routes if listener in r.listeners for h in r.hostnames
    )


@dataclass(frozen=True)
class BackendSection:
    """A backend's text and structure (each its lines joined), with what they were
    rendered from."""

    backend: Backend
    slots: tuple[Slot, ...]
    http: bool
    text: str
    structure: str


@dataclass(frozen=True)
class Parts:
    """The parts of a rendering a later one may reuse: what an endpoint-only or
    certificate-only change leaves as it was costs a comparison, not a render.

    `routes`: the config's HTTP routes the HTTP backends were found in (`http_backends`,
    with how many references each has: `http_refs`); `frontends` by listener name;
    `backends` by section id."""

    routes: tuple[HTTPRoute, ...]
    http_backends: frozenset[str]
    http_refs: Counter[str]
    frontends: dict[str, HTTPFrontend]
    backends: dict[str, BackendSection]
    offers: dict[str, HTTPSOffers] = field(default_factory=dict)
    """Each HTTPS listener's certificates as offered, by listener name."""


@dataclass(frozen=True)
class HTTPSOffers:
    """An HTTPS listener's offered certificates (`certificates.offers`) by name, and the
    crt-list they made, for the next rendering to keep those that are as they were."""

    paths: Paths
    offers: dict[str, Offer]
    crt_list: str


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
    pool: Pool | None = None,
    held_crt_lists: Mapping[str, str] | None = None,
    change: int = 0,
) -> Rendered:
    """The HAProxy files for `config` (UDP listeners are nginx's, see gateway.nginx).

    `pems` holds each certificate's PEM (certificate chain and key) by certificate name.
    `pool`: the backend pool the last rendering served (gateway.pool; None: none yet),
    sticky state as `slots` is: together with `config` it decides the result; so do
    `change`, the number of this change (`slots` was assigned at it), and `held_crt_lists`,
    the crt-lists HAProxy holds by path (a certificate's new names go in a line of their
    own, see `crt_list`; None: one line per certificate).
    `previous`: an earlier rendering whose parts are reused where their inputs are equal
    (an HTTP frontend: the listener, the config's HTTP routes and its backends' sections;
    a backend: itself and its slots); the result is the same as without it, only cheaper.
    """
    before = previous.parts if previous is not None else None
    # (parts joined, each its lines joined once: "\n".join of every line of the
    # configuration on each rendering was as much as the rest of a simple change's work)
    text = ["\n".join(_global(paths))]
    structure = list(text)
    map_files: dict[str, str] = {}
    route_maps: dict[str, str] = {}
    shared = shared_sockets(config)
    routes = config.http_routes
    changed = None
    if before is not None and before.routes == routes:
        http_backends, http_refs = before.http_backends, before.http_refs
    else:
        if before is None:
            http_refs = _backend_refs(list(routes))
        else:  # the references the routes added and removed have, counted in and out
            changed = _changed(before.routes, routes)
            http_refs, gone = Counter(before.http_refs), _backend_refs(changed.removed)
            http_refs.update(_backend_refs(changed.added))
            http_refs.subtract(gone)
            for name in gone:
                if http_refs[name] <= 0:
                    del http_refs[name]
        http_backends = frozenset(http_refs)
    streams = stream_backends(config)
    in_pool = [
        b
        for b in config.backends
        if b.name in http_backends and b.name not in streams and pooled(b)
    ]
    pool, placed = place(in_pool, slots, pool, change)
    if placed:
        slots = {**slots, **placed}
    ids = pool.ids()
    frontends: dict[str, HTTPFrontend] = {}
    for listener in config.listeners:
        partner = shared.get(listener.name)
        if listener.protocol in (Protocol.HTTP, Protocol.HTTPS):
            behind = partner is not None
            kept = before.frontends.get(listener.name) if before is not None else None
            found = kept.reused(listener, behind, paths, routes, ids, changed) if kept else None
            if found is None:
                made = http_frontend(config, listener, paths, behind, ids)
                found = made, _hostnames(routes, listener.name)
            made, names = found
            fast_sent = {b: section_id(b, ids) for b in made.fast.values()}
            if kept is None or made is not kept.made or kept.fast_sent != fast_sent:
                same_rows = kept is not None and kept.made.fast == made.fast
                if same_rows and kept is not None and kept.fast_sent == fast_sent:
                    text_of_fast = kept.fast_text
                else:
                    text_of_fast = fast_map(made.fast, ids)
                if kept is not None and kept.made.maps is made.maps:
                    map_structure = kept.map_structure
                else:
                    map_structure = _map_structure(made.maps)
                if kept is not None and kept.made.lines is made.lines:
                    joined = kept.joined
                else:
                    joined = "\n".join(made.lines)
                kept = HTTPFrontend(
                    listener, behind, paths, routes, made, names, text_of_fast, fast_sent,
                    map_structure, joined,
                )  # fmt: skip
            elif kept.routes is not routes:  # (equal: the next change's routes diffed once)
                kept = replace(kept, routes=routes)
            frontends[listener.name] = kept
            fast = str(paths.map(listener.name, "fast"))
            lines, maps = kept.joined, {**kept.made.maps, fast: kept.fast_text}
            route_maps[fast] = kept.fast_text
            map_structure = kept.map_structure
        elif listener.protocol in (Protocol.TCP, Protocol.TLS_PASSTHROUGH):
            tcp = tcp_frontend(config, listener, paths, partner)
            if partner is not None:
                tcp += hop_backend(partner, paths)
            lines, maps, map_structure = "\n".join(tcp), {}, ""
        else:
            continue
        # (an empty part adds no line: joining its lines would have added none)
        text += [lines] if lines else []
        structure += [lines] if lines else []
        map_files.update(maps)
        structure += [map_structure] if map_structure else []
    udp_backends = {r.backend for route in config.udp_routes for r in route.backends}
    sections_kept: dict[str, BackendSection] = {}
    servers: dict[str, tuple[Slot, ...]] = {}

    def add_section(backend: Backend, own: tuple[Slot, ...], http: bool, name: str) -> None:
        section = before.backends.get(name) if before is not None else None
        if section is None or not (
            section.slots == own
            and section.http == http
            and (section.backend is backend or section.backend == backend)
        ):
            t, s = backend_section(backend, own, http, name)
            section = BackendSection(backend, own, http, "\n".join(t), "\n".join(s))
        sections_kept[name] = section
        servers[name] = own
        text.append(section.text)
        structure.append(section.structure)

    for backend in config.backends:
        if backend.name in ids or (
            backend.name in udp_backends and backend.name not in http_backends
        ):
            continue
        add_section(
            backend, slots.get(backend.name, ()), backend.name in http_backends,
            backend_id(backend.name),
        )  # fmt: skip
    by_name = {b.name: b for b in in_pool}
    for i, held in enumerate(pool.sections):
        owner = SPARE if held.backend is None else by_name[held.backend]
        add_section(owner, held.slots, True, pool_id(i))
    files = {str(paths.config): "\n".join(text), **map_files}
    certificates: dict[str, str] = {}
    crt_lists: dict[str, str] = {}
    cert_maps: dict[str, str] = {}
    offers_kept: dict[str, HTTPSOffers] = {}
    for listener in config.listeners:
        if listener.protocol == Protocol.HTTPS:
            where = str(paths.crt_list(listener.name))
            holds = (held_crt_lists or {}).get(where)
            last = before.offers.get(listener.name) if before is not None else None
            if last is not None and last.paths == paths:
                made_offers = offers(config, listener, paths, holds, last.offers, last.crt_list)
            else:
                made_offers = offers(config, listener, paths, holds)
            listing = crt_list(made_offers, paths)
            offers_kept[listener.name] = HTTPSOffers(
                paths, {o.name: o for o in made_offers}, listing
            )
            files[where] = listing
            crt_lists[where] = listing
            cert_maps.update(certificate_maps(listener, paths, made_offers))
            default = paths.certificate(DEFAULT_CERTIFICATE)
            certificates[str(default)] = pems.get(DEFAULT_CERTIFICATE, "")
            for offer in made_offers:
                certificates[offer.path] = pems.get(offer.name, "")
    files.update(cert_maps)
    parts = Parts(routes, http_backends, http_refs, frontends, sections_kept, offers_kept)
    # (`servers`, what the plan sets at run time, holds HAProxy's sections only: a UDP
    # route's backend is nginx's and has none; `slots` keeps every backend's for stickiness.)
    return Rendered(
        files, "\n".join(structure), slots, certificates, crt_lists, cert_maps, parts,
        route_maps, pool, servers, change, {b.name: b for b in config.backends},
    )  # fmt: skip


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(section header, body) of a rendered configuration: what the diff names. (A body
    without its blank lines at the end: the last section's has none, being the last.)"""
    header, body = "", list[str]()
    for line in text.splitlines():
        if line and not line.startswith(" ") and not line.startswith("#"):
            if header or body:
                yield header, "\n".join(body).rstrip("\n")
            header, body = line, []
        else:
            body.append(line)
    if header or body:
        yield header, "\n".join(body).rstrip("\n")


__all__ = [
    "BackendSection",
    "HTTPFrontend",
    "HTTPSOffers",
    "Parts",
    "Rendered",
    "render",
    "sections",
    "shared_sockets",
]
