"""An HTTPS listener's certificates: the crt-list (which certificate for which SNI), the
maps the 421 check looks names up in, and the rules that do it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from teapot_lb.gateway import hosts
from teapot_lb.gateway.config import Certificate, GatewayConfig, Listener

from .paths import Paths
from .words import DEFAULT_CERTIFICATE, DEFAULT_SNI, NO_CERTIFICATE, map_file, quote, when


def _certificate_of(
    listener: Listener, paths: Paths, var: str, name: str, action: str, cond: str = ""
) -> list[str]:
    """Rules that set `var` to the certificate `name` (a sample) chooses, found the way
    HAProxy picks one by SNI: the exact name, else the wildcard of its first label's parent
    (`*.a.example` covers one label, as in TLS), else none ('-': the gateway's own). Two
    maps (each name in one only: see `offered`): the wildcard's lookup first, with '-' as
    its default, then the exact name's over it (a lookup that finds nothing leaves the
    variable as it was); a wildcard's key is its parent, `a.example` for `*.a.example`."""
    exact = quote(str(paths.map(listener.name, "certs")))
    wild = quote(str(paths.map(listener.name, "certs-wild")))
    return [
        when(f"    {action} set-var({var}) {name},field(2,.,0),"
              f"map_str({wild},{NO_CERTIFICATE})", cond),
        when(f"    {action} set-var({var}) {name},map_str({exact})", cond),
    ]  # fmt: skip


def sni_certificate(listener: Listener, paths: Paths) -> list[str]:
    """The certificate the connection's SNI chose, once per connection (`tcp-request
    session`: after the handshake, before any request), in `sess.sni_crt`; without SNI it
    stays unset. Computed then, it is the one the connection got, also while a new
    certificate's names are being added to the maps."""
    return _certificate_of(
        listener, paths, "sess.sni_crt", "ssl_fc_sni,lower", "tcp-request session"
    )


def misdirected(listener: Listener, paths: Paths) -> list[str]:
    """421 Misdirected Request (RFC 9110 section 15.5.20) for a request whose Host would
    not have chosen the certificate its connection's SNI chose (another tenant's name over
    a tenant's connection, HTTP/2 reuse across names, a tenant's name without SNI): the
    Host's certificate found as the SNI's was (`sni_certificate`) and the two compared.

    A Host equal to the SNI chose the same certificate: then (most requests) nothing is
    looked up: one comparison, then a variable found or not per rule (cheaper than fetching
    and comparing again).
    """
    differ = "{ var(txn.tls_other) -m found }"
    sni = "{ var(sess.sni_crt) -m found }"
    same = "{ var(sess.sni_crt),strcmp(txn.host_crt) eq 0 }"
    unnamed = f"!{{ var(txn.host_crt) -m str -- {NO_CERTIFICATE} }}"
    return [
        "    http-request set-var(txn.tls_other) bool(1)"
        " if !{ ssl_fc_sni,lower,strcmp(txn.host) eq 0 }",  # (true without SNI too)
        *_certificate_of(listener, paths, "txn.host_crt", "var(txn.host)", "http-request", differ),
        f"    http-request return status 421 if {differ} {sni} !{same}",
        # no SNI: the gateway's own certificate, misdirected for a name that has another
        f"    http-request return status 421 if {differ} !{sni} {unnamed}",
    ]


Offers = list[tuple[str, tuple[str, ...]]]
"""Certificates by name, each with the names it is offered for (`offered`)."""


@dataclass(frozen=True)
class Offer:
    """A certificate as an HTTPS listener offers it (`offers`), with its own lines of the
    listener's crt-list and certificate maps: the next rendering keeps it while the
    certificate is the same object offered for the same names (a change costs the
    certificates it touched, and a C-speed set check of the others' names)."""

    name: str
    certificate: Certificate
    normalized: tuple[str, ...]
    """Its hostnames, lower case, each once."""
    names: tuple[str, ...]
    """Those it is offered for (not an earlier certificate's)."""
    path: str
    lines: tuple[tuple[str, ...], ...]
    """The names of each of its crt-list lines (one, but for names added at run time)."""
    crt_text: str
    exact: str
    """Its rows of the exact names' certificate map, and of the wildcards' (`wild`)."""
    wild: str


def offers(
    config: GatewayConfig,
    listener: Listener,
    paths: Paths,
    held: str | None = None,
    previous: Mapping[str, Offer] | None = None,
    previous_text: str | None = None,
) -> list[Offer]:
    """The certificates of an HTTPS listener, each with the names (SNI) it is offered for,
    in the listener's order. A name goes to the first certificate that has it, so that
    the certificate HAProxy picks for it is the one the certificate maps say; a
    certificate left with no name is not offered (it would never be picked). The default
    certificate's own filter is nobody else's.

    Each with its crt-list lines: `held` is the crt-list HAProxy holds now (None: none, or
    a reload is coming). A certificate offered for names it was not in `held` keeps its
    lines there as they are and gets the new names in a line of its own after them (a
    certificate may have several lines: HAProxy offers it for the names of each), so that
    the names go over the runtime API (`add ssl crt-list`) without a reload; a
    certificate that loses a name gets one line again (a reload).

    `previous`: the offers of an earlier rendering of this listener by certificate name,
    whose crt-list was `previous_text`; an offer whose certificate is the same object and
    offered for the same names is taken as it is (when `held` is `previous_text`, its lines
    are what `held` has of it). The result is the same as without it."""
    before: Mapping[str, Offer] = previous or {}
    reuse = held is not None and held is previous_text
    had: dict[str, list[tuple[str, ...]]] = {}
    if not reuse:
        before = {n: o for n, o in before.items() if o.lines == (o.names,)} if held is None else {}
        for line in (held or "").splitlines()[1:]:
            file, *its = line.split()
            had.setdefault(file, []).append(tuple(its))
    taken = {DEFAULT_SNI}
    out: list[Offer] = []
    by_name = {c.name: c for c in reversed(config.certificates)}  # (the first of a name)
    for name in listener.certificates:
        cert = by_name.get(name)
        if cert is None:
            continue
        old = before.get(name)
        if old is not None and old.certificate is cert:
            normalized = old.normalized
        else:
            normalized = tuple(dict.fromkeys(h.lower() for h in cert.hostnames))
        if taken.isdisjoint(normalized):  # (most: one set look-up per name, in C)
            names = normalized
        else:
            names = tuple(h for h in normalized if h not in taken)
        taken.update(names)
        if not names:
            continue
        if old is not None and old.certificate is cert and old.names == names:
            out.append(old)
            continue
        path = old.path if old is not None else str(paths.certificate(name))
        kept = list(old.lines) if reuse and old is not None else had.get(path, [])
        out.append(_offer(name, cert, normalized, names, path, kept))
    return out


def _offer(
    name: str,
    cert: Certificate,
    normalized: tuple[str, ...],
    names: tuple[str, ...],
    path: str,
    kept: list[tuple[str, ...]],
) -> Offer:
    offered_for = set(names)
    if not all(n in offered_for for line in kept for n in line):
        kept = []
    covered = {n for line in kept for n in line}
    new = tuple(n for n in names if n not in covered)
    lines = (*kept, new) if new else tuple(kept)
    crt_text = "".join(f"{path} {' '.join(line)}\n" for line in lines)
    exact = map_file([(h, name) for h in names if not hosts.is_wildcard(h)])
    wild = map_file([(h[2:], name) for h in names if hosts.is_wildcard(h)])
    return Offer(name, cert, normalized, names, path, lines, crt_text, exact, wild)


def offered(config: GatewayConfig, listener: Listener) -> Offers:
    """The certificates of an HTTPS listener, each with the names it is offered for
    (`offers`)."""
    return [(o.name, o.names) for o in offers(config, listener, Paths(PurePath("/")))]


def chosen_certificate(config: GatewayConfig, listener: Listener, name: str) -> str | None:
    """The certificate an HTTPS listener presents for SNI `name`, as HAProxy picks it from
    the crt-list and as the 421 check's maps say: the exact name, else the wildcard of its
    parent; None: the gateway's own."""
    name = name.lower()
    by_name = {h: cert for cert, names in offered(config, listener) for h in names}
    _, dot, parent = name.partition(".")
    return by_name.get(name) or (by_name.get(f"*.{parent}") if dot else None)


def crt_list(listener_offers: Sequence[Offer], paths: Paths) -> str:
    """The crt-list of an HTTPS listener: the gateway's own certificate first (the
    default), then each certificate's lines (`offers`)."""
    default = f"{paths.certificate(DEFAULT_CERTIFICATE)} {DEFAULT_SNI}\n"
    return default + "".join(o.crt_text for o in listener_offers)


def certificate_maps(
    listener: Listener, paths: Paths, listener_offers: Sequence[Offer]
) -> dict[str, str]:
    """The two maps `misdirected` looks names up in: exact name -> certificate, and the
    parent of a wildcard (`a.example` for `*.a.example`) -> certificate."""
    return {
        str(paths.map(listener.name, "certs")): "".join(o.exact for o in listener_offers),
        str(paths.map(listener.name, "certs-wild")): "".join(o.wild for o in listener_offers),
    }


__all__ = [
    "Offer",
    "certificate_maps",
    "chosen_certificate",
    "crt_list",
    "misdirected",
    "offered",
    "offers",
    "sni_certificate",
]
