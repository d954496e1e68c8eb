"""Values the gateway writes into its rendered configuration (paths, header names and
values): refused when they could break out of it (quotes, backslashes, control
characters)."""

from __future__ import annotations

import re

from teapot_lb.tenancy.l7vet.refusal import L7Refusal, L7Rule

_PATH_RE = re.compile(r"^/[A-Za-z0-9\-._~!$&()*+,;=:@%/]*$")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9!#$&*+\-.^_`|~]+$")  # RFC 9110 token (header names)
_VALUE_RE = re.compile(r"^[\x20-\x7e]*$")
_VALUE_FORBIDDEN = set("\"'\\%")


def unsafe_path(value: str, where: str) -> L7Refusal | None:
    if _PATH_RE.match(value):
        return None
    return L7Refusal(
        L7Rule.UNSAFE_VALUE,
        where,
        f"path {value!r} must start with '/' and hold only URL path characters "
        "(no spaces, quotes, backslashes, '#' or control characters)",
    )


def unsafe_token(value: str, where: str) -> L7Refusal | None:
    if _TOKEN_RE.match(value):
        return None
    return L7Refusal(L7Rule.UNSAFE_VALUE, where, f"{value!r} is not an HTTP token")


def unsafe_value(value: str, where: str) -> L7Refusal | None:
    if _VALUE_RE.match(value) and not _VALUE_FORBIDDEN & set(value):
        return None
    return L7Refusal(
        L7Rule.UNSAFE_VALUE,
        where,
        f"{value!r} may hold only printable ASCII without quotes, backslashes or '%'",
    )
