"""Our BFD (the product's ``BfdEndpoint`` and ``Session``) as a process in a lab namespace
(``drive_bfd.py``), driven and watched over JSON lines: the BFD interop tests and
``bench/bfd.py`` run it against real daemons or against itself."""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Host

DRIVER = Path(__file__).with_name("drive_bfd.py")  # run as a script in the namespace


class OurBfd:
    """``drive_bfd.py`` in a namespace; its state events are collected by a thread."""

    def __init__(self, host: Host, workdir: Path, sessions: list[dict[str, Any]]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "bfd.json"
        config.write_text(json.dumps({"sessions": sessions}))
        self.stderr = workdir / "bfd.log"
        with self.stderr.open("ab") as err:
            self.proc = host.popen(
                [sys.executable, str(DRIVER), str(config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        wait_for(lambda: self.seen("ready"), timeout=10, what="our BFD driver to start",
                 detail=self.log_tail)  # fmt: skip

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if event["event"] == "info":
                self._answers.put(event)
            with self._lock:
                self.events.append(event)

    def log_tail(self) -> str:
        return self.stderr.read_text()[-3000:]

    def seen(self, kind: str) -> bool:
        with self._lock:
            return any(e["event"] == kind for e in self.events)

    def states(self, peer: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == "state" and e["peer"] == peer]

    def state(self, peer: str) -> str:
        changes = self.states(peer)
        return changes[-1]["new"] if changes else "DOWN"

    def wait_state(self, peer: str, state: str, *, timeout: float = 15) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            changes = self.states(peer)
            return changes[-1] if changes and changes[-1]["new"] == state else None

        return wait_for(reached, timeout=timeout, what=f"our BFD to {peer} to be {state}",
                        every=0.01, detail=self.log_tail)  # fmt: skip

    def command(self, cmd: str, peer: str, **fields: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, "peer": peer, **fields}).encode() + b"\n")
        self.proc.stdin.flush()

    def info(self, peer: str) -> dict[str, Any]:
        self.command("info", peer)
        return self._answers.get(timeout=5)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=5)
