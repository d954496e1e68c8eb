"""The heartbeats' shared key, read from a file (a Kubernetes Secret volume, MetalLB-style).

The file holds the key as raw bytes: whatever it contains, less one trailing newline (what
``echo`` or an editor leaves), is the HMAC-SHA256 key of every heartbeat
(:mod:`teapot_lb.membership.core`). Every speaker of a cluster must read the same bytes.
"""

from __future__ import annotations

from pathlib import Path

MIN_KEY_BYTES = 16  # HMAC-SHA256 tags truncated to 16 bytes: a shorter key is the weak part


class KeyFileError(ValueError):
    """The key file cannot be used; the message names the file and says why."""


def read_key_file(path: Path) -> bytes:
    """The key in ``path``; raises :class:`KeyFileError` (only)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise KeyFileError(f"{path}: cannot read the heartbeat key: {err.strerror}") from err
    key = raw[:-2] if raw.endswith(b"\r\n") else raw.removesuffix(b"\n")
    if not key:
        raise KeyFileError(f"{path}: the heartbeat key file is empty")
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"{path}: the heartbeat key is {len(key)} bytes; at least {MIN_KEY_BYTES} are "
            "needed (e.g. openssl rand -base64 128)"
        )
    return key
