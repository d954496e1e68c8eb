"""The gateway's own certificate when the operator gives none: made when the gateway
starts, self-signed, with a neutral subject that names no tenant. It is what a client
without SNI, or with a name no tenant's certificate is offered for, is shown.

Made by the `openssl` binary (the `cryptography` package is not among the project's
dependencies; `tenancy.l7cert` reads certificates the same way).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

SUBJECT_CN = "teapot-lb gateway default"


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
