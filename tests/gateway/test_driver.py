"""The HAProxy driver's failure paths, with a stand-in binary (no root, no HAProxy)."""

from __future__ import annotations

from pathlib import Path

from teapot_lb.gateway.config import Certificate
from teapot_lb.gateway.haproxy import HAProxy

from .builders import ingress, listener
from .test_routing import _cfg


def _stand_in(tmp_path: Path) -> Path:
    """Passes the configuration check (`-c`), then exits at once when run."""
    script = tmp_path / "haproxy"
    script.write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 0\necho "cannot bind" >&2\nexit 3\n')
    script.chmod(0o755)
    return script


async def test_a_haproxy_that_cannot_start_is_an_error_not_a_crash(tmp_path: Path) -> None:
    driver = HAProxy(tmp_path / "state", binary=str(_stand_in(tmp_path)))
    cfg = _cfg(ingress("a", "a.example", [("Prefix", "/", "a")]))
    applied = await driver.apply(cfg)
    assert applied.error is not None and "haproxy exited at start" in applied.error
    assert driver.running is None and driver.master_pid is None
    await driver.stop()


async def test_an_unreadable_certificate_file_is_named(tmp_path: Path) -> None:
    driver = HAProxy(tmp_path / "state", binary=str(_stand_in(tmp_path)))
    cfg = _cfg(ingress("a", "a.example", [("Prefix", "/", "a")]))
    cfg = cfg.model_copy(
        update={
            "listeners": (*cfg.listeners, listener("tls", 443, "HTTPS", certificates=("c",))),
            "certificates": (Certificate(name="c", cert_file=str(tmp_path / "missing.pem")),),
        }
    )
    applied = await driver.apply(cfg)
    assert applied.error == (
        f"certificates (c): cannot read {tmp_path / 'missing.pem'}: No such file or directory"
    )
