"""Is a TLS Secret's certificate servable? PEM that parses, a key that matches it, not
expired, read by the `openssl` binary (the `cryptography` package is not among the
project's dependencies).

Also: the DNS names a certificate is for, and whether one of them covers a hostname
(the TLS wildcard rule: `*.a.example` covers `x.a.example` only).

Results are cached by the Secret's bytes: the reconcile asks again at every pass.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache

CERT_KEY = "tls.crt"
KEY_KEY = "tls.key"

_DNS = re.compile(r"DNS:([^,\s]+)")
_CN = re.compile(r"(?:^|[,/])\s*CN\s*=\s*([^,/\n]+)")


def certificate_problem(cert: bytes, key: bytes, now: datetime | None = None) -> str | None:
    """Why `cert` with `key` cannot be served, or None when it can."""
    if b"-----BEGIN CERTIFICATE-----" not in cert:
        return f"{CERT_KEY} holds no PEM certificate"
    if b"PRIVATE KEY-----" not in key:
        return f"{KEY_KEY} holds no PEM private key"
    when = (now or datetime.now(UTC)).replace(microsecond=0)
    return _cached(hashlib.sha256(cert + b"\0" + key).hexdigest(), cert, key, when.date())


@lru_cache(maxsize=4096)
def _cached(_digest: str, cert: bytes, key: bytes, _day: object) -> str | None:
    return _with_openssl(cert, key)


def _openssl(args: list[str], data: bytes) -> tuple[int, bytes]:
    done = subprocess.run(
        ["openssl", *args], input=data, capture_output=True, timeout=10, check=False
    )
    return done.returncode, done.stdout


def _with_openssl(cert: bytes, key: bytes) -> str | None:
    code, cert_pub = _openssl(["x509", "-noout", "-pubkey"], cert)
    if code != 0:
        return f"{CERT_KEY} does not parse as an X.509 certificate"
    # The key goes through a private temporary file, never an argument.
    with tempfile.NamedTemporaryFile(prefix="teapot-key-") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(key)
        handle.flush()
        code, key_pub = _openssl(["pkey", "-in", handle.name, "-pubout"], b"")
    if code != 0:
        return f"{KEY_KEY} does not parse as a private key"
    if cert_pub.strip() != key_pub.strip():
        return f"{KEY_KEY} is not the key of the certificate in {CERT_KEY}"
    code, _ = _openssl(["x509", "-noout", "-checkend", "0"], cert)
    if code != 0:
        return "the certificate has expired"
    return None


def certificate_names(cert: bytes) -> list[str]:
    """The DNS names a PEM certificate is for: its subjectAltName DNS entries, else its
    subject's CN (lowercase, in the certificate's order); [] when it does not parse."""
    return list(_names(cert))


@lru_cache(maxsize=4096)
def _names(cert: bytes) -> tuple[str, ...]:
    args = ["x509", "-noout", "-ext", "subjectAltName", "-subject", "-nameopt", "RFC2253"]
    code, stdout = _openssl(args, cert)
    if code != 0:
        return ()
    out = stdout.decode(errors="replace")
    sans = [n.lower() for n in _DNS.findall(out)]
    if sans:
        return tuple(dict.fromkeys(sans))
    subject = next((line for line in out.splitlines() if line.startswith("subject=")), "")
    cn = _CN.search(subject.removeprefix("subject="))
    return (cn.group(1).strip().lower(),) if cn else ()


def name_covers(name: str, host: str) -> bool:
    """Whether the certificate name `name` is valid for `host`: equal, or a wildcard of
    exactly one label (`*.a.example` covers `x.a.example`, not `a.example` nor
    `y.x.a.example`). A wildcard host is covered only by the same wildcard."""
    name, host = name.lower().rstrip("."), host.lower().rstrip(".")
    if name == host:
        return True
    if not name.startswith("*.") or host.startswith("*."):
        return False
    head, _, rest = host.partition(".")
    return bool(head) and rest == name[2:]


def covered_hostnames(names: Iterable[str], hostnames: Iterable[str]) -> tuple[str, ...]:
    """The `hostnames` that a certificate with DNS names `names` covers, in their order."""
    known = tuple(names)
    return tuple(h for h in hostnames if any(name_covers(n, h) for n in known))


__all__ = [
    "CERT_KEY",
    "KEY_KEY",
    "certificate_names",
    "certificate_problem",
    "covered_hostnames",
    "name_covers",
]
