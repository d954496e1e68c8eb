"""`teapot-lb lab` cleans up whatever happens to its output: a reader that went away
(`| head -1`, a `tee` killed by the same Ctrl-C) or a closed terminal (SIGHUP)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from teapot_lb.lab.wait import wait_for

from .test_lab import our_namespaces, require_lab


def processes_using(workdir: Path) -> list[int]:
    """Processes whose command line names the lab's work directory (BIRD, the nodes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(workdir).encode() in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def start_lab(workdir: Path) -> subprocess.Popen[bytes]:
    """A short lab (BGP only, two nodes) with stdout and stderr to pipes; returns once
    both nodes run their workload and `teapot-lb run` (every namespace is built)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "teapot_lb.cli.lab", "--nodes", "2", "--modes", "bgp",
         "--families", "v4", "--workdir", str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip

    def node_processes() -> list[int]:
        nodes = [ns for ns in our_namespaces(proc.pid) if "node-" in ns]
        return [
            len(subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                               text=True).stdout.split())
            for ns in nodes
        ]  # fmt: skip

    def up() -> bool:
        assert proc.poll() is None, "the lab exited early"
        counts = node_processes()
        return len(counts) == 2 and all(n >= 2 for n in counts)

    wait_for(up, timeout=90, what="workload and speaker on both nodes", every=0.05)
    return proc


def finish(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    try:
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert our_namespaces(proc.pid) == [], "namespaces left behind"
    wait_for(
        lambda: not processes_using(workdir), timeout=10, what="the lab's processes to be gone"
    )


def close_output(proc: subprocess.Popen[bytes]) -> None:
    """The reader of both streams goes away: every later write gets EPIPE."""
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c-tee-gone", "terminal-closed"]
)
def test_the_lab_cleans_up_when_its_output_is_gone(sig: signal.Signals, tmp_path: Path) -> None:
    require_lab("bird")
    workdir = tmp_path / "work"
    proc = start_lab(workdir)
    close_output(proc)
    proc.send_signal(sig)
    finish(proc, workdir)
    assert proc.returncode == 1


def test_the_lab_cleans_up_when_its_reader_went_away_before_the_signal(
    tmp_path: Path,
) -> None:
    """`teapot-lb lab 2>&1 | head -1`: the lab's next writes fail; it keeps going (and is
    then stopped with SIGTERM) and still removes everything."""
    require_lab("bird")
    workdir = tmp_path / "work"
    proc = start_lab(workdir)
    close_output(proc)
    wait_for(
        lambda: (workdir / "manifests").exists() and proc.poll() is None,
        timeout=10,
        what="the lab still running with its output gone",
    )
    proc.send_signal(signal.SIGTERM)
    finish(proc, workdir)
