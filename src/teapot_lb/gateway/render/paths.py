"""Where the gateway's files live."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Paths:
    """Where the gateway's files live (one directory per HAProxy instance)."""

    base: PurePath

    @property
    def config(self) -> PurePath:
        return self.base / "haproxy.cfg"

    @property
    def admin_socket(self) -> PurePath:
        return self.base / "admin.sock"

    @property
    def master_socket(self) -> PurePath:
        return self.base / "master.sock"

    @property
    def pid_file(self) -> PurePath:
        return self.base / "haproxy.pid"

    def map(self, listener: str, what: str) -> PurePath:
        return self.base / "maps" / f"{listener}-{what}.map"

    def crt_list(self, listener: str) -> PurePath:
        return self.base / f"crt-{listener}.list"

    def certificate(self, name: str) -> PurePath:
        return self.base / "certs" / f"{name}.pem"

    def hop(self, listener: str) -> str:
        """The internal socket of an HTTPS listener behind a passthrough one (abstract:
        no file, unique per state directory and listener)."""
        digest = hashlib.sha256(f"{self.base}\0{listener}".encode()).hexdigest()[:24]
        return f"abns@teapot-gw-{digest}"


__all__ = ["Paths"]
