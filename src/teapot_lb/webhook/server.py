"""The validating admission webhook over HTTPS (aiohttp), with certificate reloading.

Certificates are rotated by whatever issues them (cert-manager, a Secret update): the
files are checked every `reload_interval_s` and loaded into the same `SSLContext`, so
new connections get the new certificate without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from teapot_lb import log
from teapot_lb.model import ApiObject
from teapot_lb.webhook.review import BadReview, L7Check, review

VALIDATE_PATH = "/validate"


class ReloadingCertificate:
    """A server SSLContext whose certificate follows the files on disk."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert = Path(cert)
        self.key = Path(key)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[int, ...] = ()
        self.loads = 0
        self._log = log.get("webhook.tls")
        self.reload_if_changed()

    def _files_stamp(self) -> tuple[int, ...]:
        stamp: list[int] = []
        for path in (self.cert, self.key):
            st = path.stat()
            stamp += [st.st_mtime_ns, st.st_size, st.st_ino]
        return tuple(stamp)

    def reload_if_changed(self) -> bool:
        """Load the files when they changed; True when a new certificate is in use.

        A half-written pair (cert and key do not match) is skipped until it is complete.
        """
        try:
            stamp = self._files_stamp()
        except OSError as err:
            if not self.loads:
                raise
            self._log.warning("cannot stat certificate files", error=str(err))
            return False
        if stamp == self._stamp:
            return False
        try:
            self.context.load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, OSError) as err:
            if not self.loads:
                raise
            self._log.warning("certificate files not loadable yet", error=str(err))
            return False
        self._stamp = stamp
        self.loads += 1
        if self.loads > 1:
            self._log.info("webhook certificate reloaded", cert=str(self.cert))
        return True

    async def watch(self, interval_s: float = 10.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.reload_if_changed()


class WebhookServer:
    """POST /validate: AdmissionReview in, AdmissionReview out.

    `existing()` gives the lb.teapot.io objects in the cache (for overlap checks);
    objects outside `config_namespace` (when given) are admitted with a warning;
    `ready()` returns reasons not to answer yet (503 then, so the API server applies
    the webhook's failurePolicy); `observe(kind, allowed)` counts verdicts and
    `fail(reason)` the reviews not answered (`not_ready`, `bad_review`); `l7`: the
    gateway's check for Ingresses and Gateway API objects (:mod:`.review`).
    """

    def __init__(
        self,
        existing: Callable[[], Iterable[ApiObject]],
        *,
        certificate: ReloadingCertificate | None = None,
        ready: Callable[[], Sequence[str]] = lambda: (),
        observe: Callable[[str, bool], None] = lambda kind, allowed: None,
        fail: Callable[[str], None] = lambda reason: None,
        reload_interval_s: float = 10.0,
        config_namespace: str | None = None,
        l7: L7Check | None = None,
    ) -> None:
        self.existing = existing
        self.l7 = l7
        self.config_namespace = config_namespace
        self.certificate = certificate
        self.ready = ready
        self.observe = observe
        self.fail = fail
        self.reload_interval_s = reload_interval_s
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None
        self.port = 0
        self._log = log.get("webhook")

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=4 * 1024**2)
        app.router.add_post(VALIDATE_PATH, self._validate)
        return app

    async def _validate(self, request: web.Request) -> web.Response:
        waiting = list(self.ready())
        if waiting:
            self.fail("not_ready")
            return web.Response(status=503, text="not ready: " + "; ".join(waiting))
        try:
            body: Any = json.loads(await request.read())
            answer, kind, allowed = review(body, self.existing(), self.config_namespace, self.l7)
        except (ValueError, BadReview) as err:
            self.fail("bad_review")
            return web.Response(status=400, text=f"bad AdmissionReview: {err}")
        self.observe(kind, allowed)
        if not allowed:
            self._log.info("denied", kind=kind, message=answer["response"]["status"]["message"])
        return web.json_response(answer)

    async def start(self, host: str = "0.0.0.0", port: int = 0) -> int:
        self._runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        context = self.certificate.context if self.certificate else None
        site = web.TCPSite(self._runner, host, port, ssl_context=context)
        await site.start()
        server: Any = site._server
        self.port = int(server.sockets[0].getsockname()[1])
        if self.certificate is not None:
            self._watch = asyncio.create_task(self.certificate.watch(self.reload_interval_s))
        return self.port

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
