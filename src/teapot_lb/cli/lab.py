"""`teapot-lb lab`: the one-command proof on one machine (see docs/lab.md)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import click

from teapot_lb.lab.html_report import render_html
from teapot_lb.lab.manifests import DEFAULT_GROUPS, FAMILIES, GROUPS, MODES
from teapot_lb.lab.progress import TerminalProgress
from teapot_lb.lab.report import table, to_json
from teapot_lb.lab.router import ROUTERS
from teapot_lb.lab.runner import REPO_EXAMPLES, LabOptions, run_lab
from teapot_lb.lab.scenarios import Sizes
from teapot_lb.netlab import cleanup_stale, netns_available


class _Output:
    """stdout or stderr that never fails the lab. The lab's cleanup must finish whatever
    happened to its output: `teapot-lb lab | head -1`, a `tee` killed by the same Ctrl-C,
    a closed terminal (SIGHUP). Once a write fails (EPIPE: the reader is gone; EIO: the
    terminal is), this and later writes are dropped, and the descriptor is pointed at
    /dev/null so that nothing else (the interpreter's flush at exit) fails on it either."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> None:
        if self.gone:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.gone = True
            _to_devnull(self.stream)

    def flush(self) -> None:
        """Every write is flushed already."""


def _to_devnull(stream: TextIO) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _pick(known: tuple[str, ...], what: str, text: str) -> tuple[str, ...]:
    picked = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    bad = [m for m in picked if m not in known]
    if bad or not picked:
        raise click.BadParameter(f"unknown {what} {', '.join(bad)}; use {', '.join(known)}")
    return picked


def _modes(_ctx: click.Context, _param: click.Parameter, text: str) -> tuple[str, ...]:
    return _pick(GROUPS, "mode(s)", text)


def _families(_ctx: click.Context, _param: click.Parameter, text: str) -> tuple[str, ...]:
    return _pick(FAMILIES, "address family(ies)", text)


@click.command("lab")
@click.option(
    "--modes", default=",".join(DEFAULT_GROUPS), show_default=True, callback=_modes,
    help="Announcement modes to exercise, comma-separated; `teapot`: the Teapot group"
    " (standalone manager and tenant agent, see docs/lab.md); `ovn`: OVN mode on a real"
    " OVN (docs/ovn.md); `gateway`: the Teapot gateway (docs/lab.md); `relay`: a tenant's"
    " speakers through the BGP filtering relay (docs/lab.md); `octavia`: a tenant's Service"
    " on Octavia with ovn-octavia-provider beside route mode, through the manager and agent"
    " processes (docs/lab.md; starts an OpenStack stack: minutes); the last four by name only.",
)  # fmt: skip
@click.option(
    "--families", default=",".join(FAMILIES), show_default=True, callback=_families,
    help="Address families of the Services each mode is run with (v4: IPv4, v6: IPv6).",
)  # fmt: skip
@click.option(
    "--nodes", type=click.IntRange(2, 60), default=None,
    help="Node namespaces node-1..node-N [default: the manifests' Nodes, 3 in examples/lab].",
)  # fmt: skip
@click.option("--router", type=click.Choice(ROUTERS), default="bird", show_default=True)
@click.option(
    "--manifests", type=click.Path(exists=True, path_type=Path), default=None,
    help="Your own manifest directory (copied; see docs/lab.md) [default: examples/lab].",
)  # fmt: skip
@click.option("--services", type=click.IntRange(1, 20), default=5, show_default=True,
              help="Services created per mode and family (create→reachable samples).")  # fmt: skip
@click.option("--requests", type=click.IntRange(1, 10000), default=30, show_default=True,
              help="Requests sent to show the spread over nodes.")  # fmt: skip
@click.option("--trials", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Failover trials per mode and family (and per kind in BGP mode).")  # fmt: skip
@click.option(
    "--poll-interval",
    type=float,
    default=None,
    help="Pass --poll-interval to each node's `teapot-lb run` (s) [default: its own, "
    "0.2 s; it watches the directory with inotify and polls only without it].",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the figures as JSON to this file (schema: docs/lab.md).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the report as one self-contained HTML page with charts.",
)
@click.option(
    "--prometheus",
    is_flag=True,
    help="Run a real Prometheus scraping every node with the alert rules; the report lists"
    " the alerts that fired per mode (a hard kill must fire TeapotLBSpeakerDown) and none"
    " may still fire at the end.",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Leave the lab running at the end, for debugging (remove: --cleanup).",
)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=None,
    help="Keep manifests, logs and status files here instead of a temporary dir.",
)
@click.option(
    "--cleanup",
    is_flag=True,
    help="Only remove namespaces left behind by crashed lab runs and tests, then exit.",
)
@click.pass_context
def lab(
    ctx: click.Context,
    modes: tuple[str, ...],
    families: tuple[str, ...],
    nodes: int | None,
    router: str,
    manifests: Path | None,
    services: int,
    requests: int,
    trials: int,
    poll_interval: float | None,
    json_path: Path | None,
    html_path: Path | None,
    prometheus: bool,
    keep: bool,
    workdir: Path | None,
    cleanup: bool,
) -> None:
    """Build a small data centre in network namespaces, run teapot-lb, break it, measure.

    A router (BIRD or FRR, ECMP into its kernel FIB), a client behind it and N nodes on a
    LAN (dual-stack), each running `teapot-lb run` and an HTTP server answering its name.
    For each mode and address family:
    create Services, reach them, show which nodes serve, kill the serving node and time
    the failover, delete a Service. Needs root. Exit status 1 if any scenario failed.
    """
    reason = netns_available()
    if reason:
        raise click.ClickException(reason)
    if cleanup:
        removed = cleanup_stale()
        click.echo(f"removed {len(removed)} namespace(s)" + "".join(f"\n  {n}" for n in removed))
        return
    if manifests is None and not REPO_EXAMPLES.exists():
        raise click.ClickException("examples/lab not found; pass --manifests DIR")
    options = LabOptions(
        modes=modes,
        families=families,
        nodes=nodes,
        router=router,
        manifests=manifests or REPO_EXAMPLES,
        sizes=Sizes(services=services, requests=requests, trials=trials),
        poll_interval=poll_interval,
        keep=keep,
        workdir=workdir,
        prometheus=prometheus,
    )
    out, err = _Output(sys.stdout), _Output(sys.stderr)
    progress = TerminalProgress(
        tuple(m for m in modes if m in MODES),
        families,
        messages=err,
        screen=out if sys.stdout.isatty() else None,
        clock=time.monotonic,
    )
    report = run_lab(options, progress)
    progress.finish()
    out.write("\n" + table(report) + "\n")
    doc = to_json(report)
    if json_path is not None:
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
    if html_path is not None:
        html_path.write_text(render_html(doc))
    ctx.exit(0 if report.ok else 1)


if __name__ == "__main__":
    lab.main(args=sys.argv[1:], prog_name="teapot-lb lab")
