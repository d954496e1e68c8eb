"""Run HAProxy for the gateway: render, check, reload only when the structure changes,
everything else over the runtime API; restart it when it dies.

HAProxy runs in master-worker mode (`-W -S master.sock`); a reload is the master CLI's
`reload`: a new worker starts and takes the listening sockets from the old one over the
admin socket (`expose-fd listeners`), so no connection is refused; the old worker finishes
its connections (`hard-stop-after`). A configuration that `haproxy -c` refuses is never
installed: the last good one keeps running and `apply` returns HAProxy's own message.

A change made over the runtime API alone writes no file: HAProxy holds it already, and
writing the whole configuration and maps per change cost as much as the rest of a simple
change's work. The files are written, where they differ from those on disk, before
HAProxy next reads them: before a reload, before any start (a restart after it died too,
by the daemon's `before_start`), and when the driver stops. So HAProxy never reads files
older than what it was told at run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from teapot_lb import log
from teapot_lb.gateway import plan as planning
from teapot_lb.gateway import render, runtime
from teapot_lb.gateway.config import (
    HOSTNAME_PATTERN,
    Certificate,
    GatewayConfig,
    Protocol,
    problems,
)
from teapot_lb.gateway.default_certificate import generate
from teapot_lb.gateway.pool import POOL_PREFIX, Pool
from teapot_lb.gateway.process import Daemon, DaemonFailed, check_config, until, write_atomic
from teapot_lb.tenancy.l7cert import certificate_names

_HOSTNAME = re.compile(HOSTNAME_PATTERN)


def _log() -> Any:
    return log.get("gateway.haproxy")


class Refused(Exception):
    """A runtime API command was refused (the answer says why)."""


async def send(
    socket_path: str | os.PathLike[str], command: runtime.Command, timeout_s: float = 10.0
) -> str:
    """Send one command to a HAProxy CLI socket and return its answer (raises
    Refused when the answer is not what the command expects)."""
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_unix_connection(str(socket_path))
        try:
            writer.write(command.text.encode() + b"\n")
            await writer.drain()
            answer = (await reader.read()).decode(errors="replace")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    why = runtime.refusal([runtime.Answer(command, answer)])
    if why is not None:
        raise Refused(why)
    return answer


async def send_all(
    socket_path: str | os.PathLike[str],
    commands: Sequence[runtime.Command],
    timeout_s: float = 10.0,
) -> list[runtime.Answer]:
    """Run `commands` in order over one connection to HAProxy's admin socket (an apply's
    commands: one connection, not one each) and return each one's answer; raises Refused
    naming the first command refused or left unanswered. HAProxy runs every command it
    is sent, those after a refused one too."""
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_unix_connection(str(socket_path))
        try:
            writer.write(runtime.conversation(commands))
            # Read while writing: HAProxy stops reading once our side stops reading its
            # answers.
            _, received = await asyncio.gather(writer.drain(), reader.read())
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    found = runtime.answers(commands, received.decode(errors="replace"))
    why = runtime.refusal(found)
    if why is not None:
        raise Refused(why)
    return found


def load_pems(config: GatewayConfig) -> tuple[dict[str, str], list[str]]:
    """Each HTTPS certificate's PEM (chain then key) by name, the gateway's own default
    one (when the config gives it) as `render.DEFAULT_CERTIFICATE`, and the problems
    found (an unreadable file names the certificate and the file)."""
    used = {n for x in config.listeners if x.protocol == Protocol.HTTPS for n in x.certificates}
    pems: dict[str, str] = {}
    errors: list[str] = []
    wanted = [(c.name, f"certificates ({c.name})", c) for c in config.certificates]
    default = config.default_certificate
    if default is not None:
        wanted.append((render.DEFAULT_CERTIFICATE, "defaultCertificate", default))
        used.add(render.DEFAULT_CERTIFICATE)
    for name, where, cert in wanted:
        if name not in used:
            continue
        try:
            pems[name] = _pem(cert)
        except OSError as exc:
            errors.append(f"{where}: cannot read {exc.filename}: {exc.strerror}")
    return pems, errors


def with_certificate_names(config: GatewayConfig, pems: Mapping[str, str]) -> GatewayConfig:
    """`config` with each certificate without `hostnames` given the DNS names of its PEM
    (the renderer offers a certificate for its listed names only: the crt-list and the
    421 check's maps must say the same)."""
    certificates = []
    for cert in config.certificates:
        if not cert.hostnames and cert.name in pems:
            found = certificate_names(pems[cert.name].encode())
            names = tuple(n for n in found if len(n) <= 253 and _HOSTNAME.match(n))
            cert = cert.model_copy(update={"hostnames": names})
        certificates.append(cert)
    return config.model_copy(update={"certificates": tuple(certificates)})


def _pem(cert: Certificate) -> str:
    if cert.cert_pem is not None and cert.key_pem is not None:
        parts = [cert.cert_pem, cert.key_pem]
    else:
        assert cert.cert_file is not None
        parts = [Path(cert.cert_file).read_text()]
        if cert.key_file is not None:
            parts.append(Path(cert.key_file).read_text())
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


@dataclass(frozen=True)
class Applied:
    """What `apply` did: the change (reload or runtime actions) or why it refused."""

    change: planning.Change
    error: str | None = None


@dataclass
class Counters:
    """Monotonic counters, for metrics and tests."""

    reloads: int = 0
    runtime_actions: int = 0
    refused: int = 0  # configurations not installed (invalid)
    reasons: list[str] = field(default_factory=list)


class HAProxy:
    """One HAProxy for one gateway. `apply(config)` is idempotent and level-triggered:
    call it with the whole desired config whenever anything changed."""

    def __init__(
        self,
        state_dir: Path,
        *,
        binary: str = "haproxy",
        wrap: Sequence[str] = (),
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
    ) -> None:
        self.paths = render.Paths(Path(state_dir))
        self._staging = render.Paths(Path(state_dir) / "staging")
        self.binary = (
            shutil.which(binary, path="/usr/sbin:/sbin:" + os.environ.get("PATH", "")) or binary
        )
        self.counters = Counters()
        self.running: render.Rendered | None = None
        self._staged: render.Rendered | None = None  # the check's files on disk
        self._installed: render.Rendered | None = None  # the files on disk
        # What HAProxy holds by runtime actions whose files are not written yet (None: the
        # files on disk are what it holds).
        self._unwritten: render.Rendered | None = None
        self._default_pem: str | None = None
        self._sound: GatewayConfig | None = None  # the last config without problems
        self._lock = asyncio.Lock()
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        argv = [*wrap, self.binary, "-W", "-S", f"{self.paths.master_socket},mode,600"]
        self.daemon = Daemon(
            "haproxy",
            [*argv, "-f", str(self.paths.config)],
            Path(self.paths.base) / "haproxy.log",
            ready=self._answers,
            before_start=self._before_start,
            lock=self._lock,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
        )

    # --- public -----------------------------------------------------------------------------

    @property
    def master_pid(self) -> int | None:
        return self.daemon.pid

    async def worker_pid(self) -> int:
        """The current worker's pid (`show info` on the admin socket)."""
        info = runtime.parse_info(await send(self.paths.admin_socket, runtime.show_info()))
        return int(info["Pid"])

    async def stats(self) -> list[runtime.StatRow]:
        """`show stat`'s rows, a pooled backend's under its own name (`be_<name>`, as the
        metrics and the backends report look them up), a spare section's left out."""
        rows = runtime.parse_stat(await send(self.paths.admin_socket, runtime.show_stat()))
        running = self.running
        return rows if running is None else named_by_backend(rows, running.pool)

    async def apply(self, config: GatewayConfig) -> Applied:
        """Make HAProxy serve `config`: a reload if its structure changed, runtime API
        actions otherwise, nothing if nothing changed. An invalid config is not installed
        (the error says why) and the running one stays."""
        async with self._lock:
            found = problems(config, self._sound)
            self._sound = None if found else config
            pems, unreadable = load_pems(config)
            found += unreadable
            if found:
                return self._refuse("; ".join(found))
            if render.DEFAULT_CERTIFICATE not in pems:
                pems[render.DEFAULT_CERTIFICATE] = await self._generated_default()
            config = with_certificate_names(config, pems)
            new, change = planning.step(config, self.running, self.paths, pems)
            if change.empty:
                return Applied(change)
            if change.reload:
                error = await self._check(new)
                if error is not None:
                    return self._refuse(error, change)
                self._install(new)
                try:
                    await self._reload_or_start()
                except (DaemonFailed, Refused, OSError, TimeoutError) as exc:
                    # Installed but not running: the next apply starts from scratch.
                    self.running = None
                    return self._refuse(f"haproxy did not take the configuration: {exc}", change)
                self.running = new
                self.counters.reasons = list(change.reasons)
                _log().info("gateway reloaded", reasons=list(change.reasons))
                return Applied(change)
            # (the files are written before HAProxy next reads them, not now)
            self._unwritten = new
            try:
                commands = [c for action in change.actions for c in runtime.commands(action)]
                await send_all(self.paths.admin_socket, commands)
                self.counters.runtime_actions += len(change.actions)
            except (Refused, OSError, TimeoutError) as exc:
                # A reload makes HAProxy read the files (written first).
                _log().warning("runtime api failed, reloading", error=str(exc))
                try:
                    await self._reload_or_start()
                except (DaemonFailed, Refused, OSError, TimeoutError) as again:
                    self.running = None
                    return self._refuse(f"haproxy did not take the change: {again}", change)
            self.running = new
            return Applied(change)

    async def stop(self) -> None:
        async with self._lock:
            self._write_unwritten()  # (the files on disk say what HAProxy served)
        await self.daemon.stop()

    # --- internals --------------------------------------------------------------------------

    async def _generated_default(self) -> str:
        """The default certificate made at start (once per driver) when the config gives
        none."""
        if self._default_pem is None:
            self._default_pem = await asyncio.to_thread(generate)
        return self._default_pem

    def _refuse(self, error: str, change: planning.Change | None = None) -> Applied:
        self.counters.refused += 1
        _log().error("gateway config refused", error=error)
        return Applied(change or planning.Change(False), error)

    async def _check(self, new: render.Rendered) -> str | None:
        # The rendering itself, moved to the staging directory (rendering it again there
        # cost as much as the rendering: every frontend, on every route added).
        staged = relocated(new, self.paths, self._staging)
        # (unknown while writing: a write that fails leaves some files of each)
        written, self._staged = self._staged, None
        _write_changed(staged, written)
        self._staged = staged
        error = await check_config(
            # (not -q: it silences the ALERT lines that say what is wrong)
            [self.binary, "-c", "-f", str(self._staging.config)],
            str(self._staging.base),
            str(self.paths.base),
        )
        return None if error is None else f"haproxy refused the configuration: {error}"

    def _install(self, rendered: render.Rendered) -> None:
        written, self._installed = self._installed, None
        _write_changed(rendered, written)
        self._installed, self._unwritten = rendered, None

    def _write_unwritten(self) -> None:
        """Write the files of what HAProxy holds by runtime actions (before it reads them)."""
        if self._unwritten is not None:
            self._install(self._unwritten)

    async def _reload_or_start(self) -> None:
        self._write_unwritten()
        if self.master_pid is None:
            await self.daemon.start()
            return
        before = await self._current_worker()
        await send(self.paths.master_socket, runtime.master("reload"))
        self.counters.reloads += 1

        async def reloaded() -> bool:
            with contextlib.suppress(OSError, Refused, TimeoutError, ValueError):
                now = await self._current_worker()
                return now is not None and now != before
            return False

        await until(reloaded, within=15.0, what="haproxy's new worker")

    async def _current_worker(self) -> int | None:
        text = await send(self.paths.master_socket, runtime.master("show proc", ("#",)))
        return parse_current_worker(text)

    async def _answers(self) -> bool:
        with contextlib.suppress(OSError, Refused, TimeoutError):
            await send(self.paths.admin_socket, runtime.show_info())
            return True
        return False

    def _before_start(self) -> None:
        # (a restart after HAProxy died reads the files: they say what it held)
        self._write_unwritten()
        for sock in (self.paths.master_socket, self.paths.admin_socket):
            with contextlib.suppress(FileNotFoundError):
                Path(sock).unlink()


def named_by_backend(rows: Sequence[runtime.StatRow], pool: Pool) -> list[runtime.StatRow]:
    """`show stat` rows with a pool section's under its backend's own section name
    (`be_<name>`), a spare's left out."""
    names = {section: render.backend_id(name) for name, section in pool.ids().items()}
    return [
        replace(row, proxy=names[row.proxy]) if row.proxy in names else row
        for row in rows
        if row.proxy in names or not row.proxy.startswith(POOL_PREFIX)
    ]


def relocated(rendered: render.Rendered, into: render.Paths, to: render.Paths) -> render.Rendered:
    """`rendered` (its files under `into`) with its files under `to` instead, every
    mention of one of its paths in their text too (the configuration's, the crt-lists'
    lines): what `haproxy -c` checks before the files are installed. (A route's own value
    that spells out the state directory is moved too: it is still a value where it was.)"""
    before, after = f"{into.base}/", f"{to.base}/"
    # (the configuration has them as quoted words: a quote inside is escaped)
    pairs = {(before, after), (before.replace("'", "'\\''"), after.replace("'", "'\\''"))}

    def text_moved(text: str) -> str:
        for old, new in pairs:  # (one pass each: `after` holds `before`)
            text = text.replace(old, new)
        return text

    def moved(files: dict[str, str]) -> dict[str, str]:
        return {after + path.removeprefix(before): text_moved(t) for path, t in files.items()}

    return replace(rendered, files=moved(rendered.files), certificates=moved(rendered.certificates))


def _write_changed(rendered: render.Rendered, written: render.Rendered | None) -> None:
    """Write a rendering's files where they differ from `written` (the rendering last
    written there; None: every file). Certificates first: the crt-lists and the
    configuration name them."""
    for files, before in (
        (rendered.certificates, written.certificates if written is not None else {}),
        (rendered.files, written.files if written is not None else {}),
    ):
        for path, text in files.items():
            if before.get(path) != text:
                write_atomic(Path(path), text)


def parse_current_worker(show_proc: str) -> int | None:
    """The current worker's pid in the master CLI's `show proc` (the first worker line,
    before '# old workers')."""
    section = ""
    for line in show_proc.splitlines():
        if line.startswith("#"):
            section = line
            continue
        fields = line.split()
        if len(fields) >= 2 and fields[1] == "worker" and "old" not in section:
            return int(fields[0])
    return None
