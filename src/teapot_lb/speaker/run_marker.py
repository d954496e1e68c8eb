"""Whether this start is a restart after a crash: the file that says a run is under way."""

from __future__ import annotations

import json
import os
from pathlib import Path

from teapot_lb import log

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class RunMarker:
    """A file that exists while teapot-lb runs: found at start, the previous run of this
    node did not stop gracefully (crash, SIGKILL, OOM kill) and this start is a restart.

    Then BGP sessions open with the graceful-restart R and F bits (RFC 4724 §3): a router
    that kept our routes as stale keeps forwarding to them until our End-of-RIB.

    The marker records the kernel's boot id. A marker from another boot means the node
    rebooted since: the data plane restarted with it, so claiming preserved forwarding
    state (the F bit) would be false, and the start is a fresh one. That keeps the answer
    right when the state directory outlives reboots (a hostPath, /var/lib). A marker
    without a boot id (older versions, or no readable ``boot_id_path``) counts as a restart.
    """

    NAME = "running"

    def __init__(self, state_dir: Path, *, boot_id_path: Path = BOOT_ID) -> None:
        self.path = state_dir / self.NAME
        self.boot_id_path = boot_id_path

    def begin(self) -> bool:
        """Write the marker; True if the previous run left one in this boot (it did not stop
        cleanly and the node did not reboot since)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        boot_id = self._boot_id()
        left = self._read()
        self.path.write_text(json.dumps({"pid": os.getpid(), "boot_id": boot_id}) + "\n")
        if left is None:
            return False
        previous = left.get("boot_id")
        if boot_id and isinstance(previous, str) and previous and previous != boot_id:
            log.get("run-marker").info(
                "the run marker is from an earlier boot: the node rebooted, so this is a "
                "fresh start, not a graceful restart (no forwarding state survives a reboot)",
                previous_boot_id=previous,
                boot_id=boot_id,
            )
            return False
        log.get("run-marker").warning(
            "the previous run did not stop gracefully; restarting (BGP graceful restart)",
            state_dir=str(self.path.parent),
        )
        return True

    def end(self) -> None:
        """A graceful stop: the next start is a fresh start."""
        self.path.unlink(missing_ok=True)

    def _read(self) -> dict[str, object] | None:
        """The marker a previous run left: None if none; {} if it holds no JSON object (the
        pid-only format of older versions, or a truncated write)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _boot_id(self) -> str | None:
        try:
            return self.boot_id_path.read_text().strip() or None
        except OSError:
            return None
