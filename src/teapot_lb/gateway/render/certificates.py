"""An HTTPS listener's certificates: the crt-list (which certificate for which SNI), the
maps the 421 check looks names up in, and the rules that do it."""

from __future__ import annotations

from teapot_lb.gateway import hosts
from teapot_lb.gateway.config import GatewayConfig, Listener

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


def offered(config: GatewayConfig, listener: Listener) -> Offers:
    """The certificates of an HTTPS listener, each with the names (SNI) it is offered for,
    in the listener's order. A name goes to the first certificate that has it, so that
    the certificate HAProxy picks for it is the one the certificate maps say; a
    certificate left with no name is not offered (it would never be picked). The default
    certificate's own filter is nobody else's."""
    taken = {DEFAULT_SNI}
    out: list[tuple[str, tuple[str, ...]]] = []
    by_name = {c.name: c for c in reversed(config.certificates)}  # (the first of a name)
    for name in listener.certificates:
        cert = by_name.get(name)
        if cert is None:
            continue
        names = tuple(h for h in dict.fromkeys(h.lower() for h in cert.hostnames) if h not in taken)
        taken.update(names)
        if names:
            out.append((name, names))
    return out


def chosen_certificate(config: GatewayConfig, listener: Listener, name: str) -> str | None:
    """The certificate an HTTPS listener presents for SNI `name`, as HAProxy picks it from
    the crt-list and as the 421 check's maps say: the exact name, else the wildcard of its
    parent; None: the gateway's own."""
    name = name.lower()
    by_name = {h: cert for cert, names in offered(config, listener) for h in names}
    _, dot, parent = name.partition(".")
    return by_name.get(name) or (by_name.get(f"*.{parent}") if dot else None)


def crt_list(
    config: GatewayConfig,
    listener: Listener,
    paths: Paths,
    held: str | None = None,
    offers: Offers | None = None,
) -> str:
    """The crt-list of an HTTPS listener: the gateway's own certificate first (the
    default), then each certificate with the names it is offered for.

    `held`: the crt-list HAProxy holds now (None: none, or a reload is coming). A
    certificate offered for names it was not in `held` keeps its lines there as they are
    and gets the new names in a line of its own after them (a certificate may have several
    lines: HAProxy offers it for the names of each), so that the names go over the runtime
    API (`add ssl crt-list`) without a reload; a certificate that loses a name gets one
    line again (a reload). `offers`: `offered(config, listener)` when known."""
    lines = [f"{paths.certificate(DEFAULT_CERTIFICATE)} {DEFAULT_SNI}"]
    had: dict[str, list[list[str]]] = {}
    for line in (held or "").splitlines()[1:]:
        cert, *its = line.split()
        had.setdefault(cert, []).append(its)
    for name, names in offered(config, listener) if offers is None else offers:
        path = str(paths.certificate(name))
        kept = had.get(path, [])
        if not all(n in names for line in kept for n in line):
            kept = []
        lines += [f"{path} {' '.join(line)}" for line in kept]
        covered = {n for line in kept for n in line}
        new = [n for n in names if n not in covered]
        if new:
            lines.append(f"{path} {' '.join(new)}")
    return "\n".join(lines) + "\n"


def certificate_maps(
    config: GatewayConfig, listener: Listener, paths: Paths, offers: Offers | None = None
) -> dict[str, str]:
    """The two maps `misdirected` looks names up in: exact name -> certificate, and the
    parent of a wildcard (`a.example` for `*.a.example`) -> certificate. `offers`:
    `offered(config, listener)` when known."""
    exact: list[tuple[str, str]] = []
    wild: list[tuple[str, str]] = []
    for name, names in offered(config, listener) if offers is None else offers:
        for host in names:
            if hosts.is_wildcard(host):
                wild.append((host[2:], name))
            else:
                exact.append((host, name))
    return {
        str(paths.map(listener.name, "certs")): map_file(exact),
        str(paths.map(listener.name, "certs-wild")): map_file(wild),
    }


__all__ = [
    "certificate_maps",
    "chosen_certificate",
    "crt_list",
    "misdirected",
    "offered",
    "sni_certificate",
]
