"""Is a TLS Secret's certificate servable? PEM that parses, a key that matches it, not
expired, read by the `openssl` binary (the `cryptography` package is not among the
project's dependencies).

Results are cached by the Secret's bytes: the reconcile asks again at every pass.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from datetime import UTC, datetime
from functools import lru_cache

CERT_KEY = "tls.crt"
KEY_KEY = "tls.key"


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


__all__ = ["CERT_KEY", "KEY_KEY", "certificate_problem"]
