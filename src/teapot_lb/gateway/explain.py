"""`explain` for a hostname: which listeners serve it, which tenant and route win for a
path (by the same routing table HAProxy is given), and the backends with their endpoints.
Pure: a GatewayConfig in, lines of text out."""

from __future__ import annotations

from teapot_lb.gateway import hosts, render, routing
from teapot_lb.gateway.config import BackendRef, GatewayConfig, Listener, Protocol, RouteSemantics


def _backends(config: GatewayConfig, refs: tuple[BackendRef, ...]) -> list[str]:
    out = []
    for ref in refs:
        b = config.backend(ref.backend)
        if ref.missing:
            out.append(f"      backend {ref.backend} (weight {ref.weight}): does not exist: 500")
            continue
        if b is None:
            out.append(f"      backend {ref.backend} (weight {ref.weight}): missing")
            continue
        eps = ", ".join(
            f"{e.address}:{e.port}{'' if e.ready else ' (not ready)'}" for e in b.endpoints
        )
        out.append(f"      backend {b.name} (weight {ref.weight}): {eps or 'no endpoints'}")
    return out


def _certificate(config: GatewayConfig, listener: Listener, hostname: str) -> str:
    """Which certificate the name gets (and so which connections its requests are not
    misdirected on: those whose SNI chose the same one)."""
    name = render.chosen_certificate(config, listener, hostname)
    cert = config.certificate(name) if name else None
    if cert is None:
        return "      TLS: the gateway's own certificate (none is offered for this name)"
    return f"      TLS: certificate {cert.name} (tenant {cert.owner.tenant or '-'})"


def explain(config: GatewayConfig, hostname: str, path: str = "/") -> list[str]:
    """Lines saying who serves `hostname` (and `path`) on every listener."""
    lines = [f"{hostname}{path}:"]
    for listener in config.listeners:
        where = f"  {listener.name} {listener.address}:{listener.port} {listener.protocol}"
        if listener.protocol in (Protocol.HTTP, Protocol.HTTPS):
            vhost = routing.virtual_host(routing.table(config, listener.name), hostname)
            if vhost is None:
                continue
            entry = routing.winner([vhost], routing.Request(hostname, path))
            if entry is None:
                lines.append(f"{where}: host {vhost.hostname or '*'} matches, no path does: 404")
                continue
            o = entry.route.owner
            lines.append(
                f"{where}: tenant {o.tenant or '-'}, {o.kind} {o.namespace}/{o.name}"
                f" rule {entry.rule_index} (host {vhost.hostname or '*'},"
                f" path {entry.match.path.type} {entry.match.path.value})"
            )
            if entry.rule.redirect is not None:
                lines.append(f"      redirect {entry.rule.redirect.status_code}")
            if entry.rule.rewrite is not None:
                rw = entry.rule.rewrite
                parts = [f"host {rw.hostname}"] if rw.hostname else []
                parts += [f"path {rw.path}"] if rw.path is not None else []
                if rw.replace_prefix_match is not None:
                    parts.append(f"prefix {entry.match.path.value} -> {rw.replace_prefix_match!r}")
                lines.append(f"      rewrite {', '.join(parts)}")
            lines += _backends(config, entry.rule.backends)
            if listener.protocol == Protocol.HTTPS:
                lines.append(_certificate(config, listener, hostname))
        elif listener.protocol == Protocol.TLS_PASSTHROUGH:
            for route in config.tls_routes:
                if listener.name in route.listeners and any(
                    hosts.matches(h, hostname, RouteSemantics.HTTP_ROUTE) for h in route.hostnames
                ):
                    o = route.owner
                    lines.append(
                        f"{where}: tenant {o.tenant or '-'}, {o.kind} "
                        f"{o.namespace}/{o.name} (passthrough)"
                    )
                    lines += _backends(config, route.backends)
                    break
    if len(lines) == 1:
        lines.append("  no listener serves this hostname")
    return lines
