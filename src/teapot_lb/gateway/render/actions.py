"""What an HTTP rule does, as HAProxy lines: header modifiers, redirects, rewrites and
the weighted pick of a backend (an unresolved one answered 500)."""

from __future__ import annotations

from collections.abc import Callable

from teapot_lb.gateway.config import (
    BackendRef,
    HeaderModifier,
    HTTPRule,
    Listener,
    Protocol,
    Redirect,
)

from .words import backend_id, log_format, quote, when


def header_lines(direction: str, modifier: HeaderModifier | None, cond: str) -> list[str]:
    """A header modifier's set, add and del lines (`direction`: http-request or
    http-response), each under `cond`."""
    if modifier is None:
        return []
    lines = [
        f"    {direction} set-header {h.name} {quote(log_format(h.value))} if {cond}"
        for h in modifier.set
    ]
    lines += [
        f"    {direction} add-header {h.name} {quote(log_format(h.value))} if {cond}"
        for h in modifier.add
    ]
    lines += [f"    {direction} del-header {name} if {cond}" for name in modifier.remove]
    return lines


_WELL_KNOWN_PORTS = {"http": 80, "https": 443}


def location(redirect: Redirect, listener: Listener, path: str | None = None) -> str:
    """The Location of a redirect (HTTPRoute RequestRedirect): an unset scheme is the
    listener's, an unset port the new scheme's well-known one (or, with the scheme unset,
    the listener's), and a well-known port is not written; an unset host is the request's;
    `path` (log-format text, with the query) is the new path, by default the redirect's
    full path or the request's own."""
    own = "https" if listener.protocol == Protocol.HTTPS else "http"
    scheme = redirect.scheme or own
    number = redirect.port or (_WELL_KNOWN_PORTS[scheme] if redirect.scheme else listener.port)
    host = log_format(redirect.hostname) if redirect.hostname else "%[var(txn.host)]"
    port = "" if number == _WELL_KNOWN_PORTS[scheme] else f":{number}"
    if path is None:
        path = log_format(redirect.path) if redirect.path is not None else "%[pathq]"
    return f"{scheme}://{host}{port}{path}"


def _prefix_parts(prefix: str, replacement: str, fetch: str) -> tuple[str, str, str]:
    """ReplacePrefixMatch by path element (Gateway API HTTPPathModifier): the matched
    prefix without its trailing '/' (`base`), the replacement without its own (`head`),
    and the rest of the request (`fetch`: path or pathq) after `base` as log-format text;
    the new path is head + rest, or '/' when both are empty. The match guarantees that the
    path is `base` or starts with `base/`."""
    base = prefix.rstrip("/")
    head = log_format(replacement.rstrip("/"))
    rest = f"%[{fetch},bytes({len(base)})]" if base else f"%[{fetch}]"
    return base, head, rest


def redirect_lines(rule: HTTPRule, listener: Listener, cond: str) -> list[str]:
    redirect = rule.redirect
    assert redirect is not None
    code = redirect.status_code

    def line(path: str | None, when: str) -> str:
        loc = quote(location(redirect, listener, path))
        return f"    http-request redirect location {loc} code {code} if {when}"

    if redirect.path is not None:
        # The request's query comes along (as with every other redirect).
        full = log_format(redirect.path)
        return [line(full + "?%[query]", f"{cond} {{ query -m found }}"), line(full, cond)]
    prefix = rule.replaced_prefix()
    if redirect.replace_prefix_match is None or prefix is None:
        return [line(None, cond)]
    base, head, rest = _prefix_parts(prefix, redirect.replace_prefix_match, "pathq")
    if head or not base:
        return [line(head + rest, cond)]
    # The prefix removed from the path that is only the prefix: '/' (and the query).
    return [line("/" + rest, f"{cond} {{ path -m str {quote(base)} }}"), line(rest, cond)]


def rewrite_lines(rule: HTTPRule, cond: str) -> list[str]:
    rewrite = rule.rewrite
    if rewrite is None:
        return []
    lines = []
    if rewrite.hostname is not None:
        lines.append(f"    http-request set-header Host {quote(rewrite.hostname)} if {cond}")
    if rewrite.path is not None:
        lines.append(f"    http-request set-path {quote(log_format(rewrite.path))} if {cond}")
    prefix = rule.replaced_prefix()
    if rewrite.replace_prefix_match is not None and prefix is not None:
        base, head, rest = _prefix_parts(prefix, rewrite.replace_prefix_match, "path")
        if head or not base:
            if head:  # (nothing to do when both are empty: '/' replaced by '')
                lines.append(f"    http-request set-path {quote(head + rest)} if {cond}")
        else:
            # The path that is only the prefix becomes '/'; after that line the path is
            # '/', which no longer is within `base` (never ''), so the next one skips it.
            lines += [
                f"    http-request set-path / if {cond} {{ path -m str {quote(base)} }}",
                f"    http-request set-path {quote(rest)} if {cond} !{{ path -m str / }}",
            ]
    return lines


def weighted(
    refs: tuple[BackendRef, ...],
    cond: str,
    action: str = "http-request",
    section: Callable[[str], str] = backend_id,
) -> list[str]:
    """use_backend lines that split traffic by weight (`action` sets the pick: http-request
    or tcp-request content; `section`: a backend's section id). The share of a missing
    backend is answered 500 (TCP: closed)."""
    refused = (
        "    http-request return status 500"
        if action == "http-request"
        else "    tcp-request content reject"
    )
    live = [r for r in refs if r.weight > 0]
    if not live:
        # Gateway API: a rule whose backends get no traffic answers 500 (TCP: closed)
        return [when(refused, cond)]
    if len(live) == 1:
        if live[0].missing:
            return [when(refused, cond)]
        return [when(f"    use_backend {section(live[0].backend)}", cond)]
    total = sum(r.weight for r in live)
    lines = [when(f"    {action} set-var(txn.pick) rand({total})", cond)]
    upto = 0
    for ref in live:
        low, upto = upto, upto + ref.weight
        if ref.missing:
            pick = f"{{ var(txn.pick) -m int ge {low} }} {{ var(txn.pick) -m int lt {upto} }}"
            lines.append(when(refused, f"{cond} {pick}".strip()))
            continue
        pick = f"{{ var(txn.pick) -m int lt {upto} }}"
        lines.append(when(f"    use_backend {section(ref.backend)}", f"{cond} {pick}".strip()))
    return lines


def live_refs(rule: HTTPRule) -> list[BackendRef]:
    """The backends of a rule that get traffic (weight above 0)."""
    return [r for r in rule.backends if r.weight > 0]


def plain(rule: HTTPRule) -> bool:
    """A rule that only sends to one backend (no redirect, rewrite or header modifier)."""
    live = live_refs(rule)
    return (
        rule.redirect is None
        and rule.rewrite is None
        and rule.request_headers is None
        and rule.response_headers is None
        and len(live) == 1
        and not live[0].missing
    )


__all__ = [
    "header_lines",
    "live_refs",
    "location",
    "plain",
    "redirect_lines",
    "rewrite_lines",
    "weighted",
]
