"""Is a TLS Secret's certificate servable? PEM that parses, a key that matches it, not
expired. The certificate is read by the `openssl` binary (the `cryptography` package is
not among the project's dependencies), once: its DNS names and its end date in one run;
the key is loaded beside it by the `ssl` module in process (a run of `openssl` costs
30 ms on a quiet machine, over 100 ms on a loaded one, and the reconcile waits for it: a
rotated certificate took four).

Also: the DNS names a certificate is for, and whether one of them covers a hostname
(the TLS wildcard rule: `*.a.example` covers `x.a.example` only).

Results are cached by the Secret's bytes: the reconcile asks again at every pass.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

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
    read = _read(cert)
    if read is None:
        return f"{CERT_KEY} does not parse as an X.509 certificate"
    why = _key_problem(hashlib.sha256(cert + b"\0" + key).hexdigest(), cert, key)
    if why is not None:
        return why
    if read.not_after is not None and read.not_after <= (now or datetime.now(UTC)):
        return "the certificate has expired"
    return None


@dataclass(frozen=True)
class _Read:
    """What `openssl x509` read of a certificate (the first of a chain)."""

    names: tuple[str, ...]
    not_after: datetime | None


@lru_cache(maxsize=4096)
def _read(cert: bytes) -> _Read | None:
    """The certificate's DNS names and end date; None when it does not parse."""
    args = ["x509", "-noout", "-enddate", "-ext", "subjectAltName", "-subject"]
    done = subprocess.run(
        ["openssl", *args, "-nameopt", "RFC2253"],
        input=cert,
        capture_output=True,
        timeout=10,
        check=False,
    )
    if done.returncode != 0:
        return None
    out = done.stdout.decode(errors="replace")
    return _Read(_names_in(out), _end_in(out))


def _names_in(out: str) -> tuple[str, ...]:
    sans = [n.lower() for n in _DNS.findall(out)]
    if sans:
        return tuple(dict.fromkeys(sans))
    subject = next((line for line in out.splitlines() if line.startswith("subject=")), "")
    cn = _CN.search(subject.removeprefix("subject="))
    return (cn.group(1).strip().lower(),) if cn else ()


def _end_in(out: str) -> datetime | None:
    line = next((x for x in out.splitlines() if x.startswith("notAfter=")), "")
    try:
        return datetime.fromtimestamp(ssl.cert_time_to_seconds(line.removeprefix("notAfter=")), UTC)
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _key_problem(_digest: str, cert: bytes, key: bytes) -> str | None:
    """Why the key does not go with the certificate (OpenSSL's own check, in process)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # The key goes through a private temporary directory, never an argument.
    with tempfile.TemporaryDirectory(prefix="teapot-key-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(cert)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        try:
            # (a key that asks for a password gets none: it does not parse)
            context.load_cert_chain(cert_path, key_path, password=lambda: b"")
        except ssl.SSLError as err:
            if err.reason == "KEY_VALUES_MISMATCH":
                return f"{KEY_KEY} is not the key of the certificate in {CERT_KEY}"
            if _chain_problem(cert):
                return f"{CERT_KEY} holds a certificate chain that does not parse"
            return f"{KEY_KEY} does not parse as a private key"
    return None


def _chain_problem(cert: bytes) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(
            cadata=cert.decode("ascii", errors="replace")
        )
    except (ssl.SSLError, ValueError):
        return True
    return False


def certificate_names(cert: bytes) -> list[str]:
    """The DNS names a PEM certificate is for: its subjectAltName DNS entries, else its
    subject's CN (lowercase, in the certificate's order); [] when it does not parse."""
    read = _read(cert)
    return list(read.names) if read is not None else []


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
