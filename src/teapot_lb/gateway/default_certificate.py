"""The gateway's own certificate: the one every HTTPS listener shows a client without SNI,
or with a name no tenant's certificate is offered for. Never a tenant's.

Either the operator's (`teapot-lb gateway --default-certificate FILE`, or in a cluster
`--default-certificate-secret NAMESPACE/NAME`; a `--config` file's `defaultCertificate`),
checked here before it is used, or one made when the gateway starts: self-signed, with a
neutral subject that names no tenant, valid for no hostname.

Made and checked by the `openssl` binary (the `cryptography` package is not among the
project's dependencies; `tenancy.l7cert` reads certificates the same way).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from teapot_lb.gateway.config import Certificate, Owner
from teapot_lb.tenancy.l7cert import CERT_KEY, KEY_KEY, certificate_problem

SUBJECT_CN = "teapot-lb gateway default"
NAME = "gateway-default"


def generate(days: int = 3650) -> str:
    """A new self-signed ECDSA P-256 certificate and its key, as one PEM (certificate
    first). No subjectAltName: it is valid for no hostname."""
    with tempfile.TemporaryDirectory(prefix="teapot-gw-default-") as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec",
             "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", str(days),
             "-subj", f"/CN={SUBJECT_CN}"],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        return cert.read_text() + key.read_text()


def from_files(cert_file: Path, key_file: Path | None = None) -> Certificate:
    """The operator's certificate from PEM files (the key in `cert_file` too when
    `key_file` is None), read again by the driver at each apply; ValueError naming the file
    and what is wrong (unreadable, no PEM, a key not its own, expired)."""
    try:
        cert = cert_file.read_bytes()
        key = key_file.read_bytes() if key_file is not None else cert
    except OSError as exc:
        raise ValueError(f"{exc.filename}: {exc.strerror}") from None
    why = certificate_problem(cert, key)
    if why is not None:  # (said of a Secret's keys: here, of the files)
        raise ValueError(
            why.replace(KEY_KEY, str(key_file or cert_file)).replace(CERT_KEY, str(cert_file))
        )
    return Certificate(
        name=NAME,
        cert_file=str(cert_file),
        key_file=str(key_file) if key_file is not None else None,
        owner=Owner(name=str(cert_file)),
    )


def from_secret(data: Mapping[str, bytes] | None, source: str) -> Certificate:
    """The operator's certificate from a TLS Secret's data (`tls.crt`, `tls.key`);
    ValueError naming the Secret and what is wrong (missing, no PEM, a key not its own,
    expired)."""
    if data is None:
        raise ValueError(f"Secret {source} does not exist")
    cert, key = data.get(CERT_KEY, b""), data.get(KEY_KEY, b"")
    why = certificate_problem(cert, key)
    if why is not None:
        raise ValueError(f"Secret {source}: {why}")
    return Certificate(
        name=NAME, cert_pem=cert.decode(), key_pem=key.decode(), owner=Owner(name=source)
    )
