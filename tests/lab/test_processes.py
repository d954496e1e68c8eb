"""Lab processes: a Restartable command is killed without a goodbye and comes back."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from teapot_lb.lab.processes import Restartable, tenant_agent_command


async def test_a_restartable_process_is_sigkilled_counted_and_started_again() -> None:
    proc = Restartable([sys.executable, "-c", "import time; time.sleep(60)"])
    await proc.start()
    first = proc.process
    await proc.kill()
    assert first is not None and first.returncode == -signal.SIGKILL
    await proc.start()
    assert proc.process is not first and proc.process is not None
    assert proc.process.returncode is None  # running again
    await proc.kill()
    assert proc.kills == 2


async def test_killing_a_restartable_that_never_started_does_nothing() -> None:
    proc = Restartable(["true"])
    await proc.kill()
    assert proc.kills == 0


def test_the_tenant_agent_command_names_both_clusters_and_turns_metrics_off() -> None:
    argv = tenant_agent_command(Path("/k/tenant"), Path("/k/remote"), "c7")
    assert argv[0] == sys.executable
    tail = argv[argv.index("tenant-agent") + 1 :]
    assert tail == [
        "--kubeconfig", "/k/tenant", "--management-kubeconfig", "/k/remote",
        "--cluster-name", "c7", "--metrics-addr", "",
    ]  # fmt: skip
