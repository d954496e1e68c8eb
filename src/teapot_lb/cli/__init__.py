"""The `teapot-lb` command: one entry point, one subcommand per component."""

from __future__ import annotations

import asyncio
import importlib
import signal

import click

from teapot_lb import __version__, log


def cancel_on_signals() -> None:
    """SIGTERM and SIGINT cancel the running task (a component's serve coroutine), whose
    `finally` then stops its servers and closes its clients."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)


# Subcommands are imported only when used: `teapot-lb run` in a lab node need not load
# the Kubernetes client, and `--help` stays fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "controller": ("teapot_lb.cli.controller", "controller"),
    "speaker": ("teapot_lb.cli.speaker", "speaker"),
    "run": ("teapot_lb.cli.run", "run"),
    "lab": ("teapot_lb.cli.lab", "lab"),
    "explain": ("teapot_lb.cli.explain", "explain_command"),
    "validate": ("teapot_lb.cli.validate", "validate"),
    "status": ("teapot_lb.cli.status", "status"),
    "manager": ("teapot_lb.cli.manager", "manager"),
    "tenant-agent": ("teapot_lb.cli.tenant_agent", "tenant_agent"),
    "ovn": ("teapot_lb.cli.ovn", "ovn"),
    "gateway": ("teapot_lb.cli.gateway", "gateway"),
    "relay": ("teapot_lb.cli.relay", "relay"),
}

_SUMMARIES = {
    "controller": "Assign IPs to LoadBalancer Services (Kubernetes, leader-elected).",
    "speaker": "Announce this node's Service IPs by BGP, L2 or VIP (Kubernetes).",
    "run": "Standalone: controller and speaker from a directory of manifests.",
    "lab": "Build a namespace lab, run teapot-lb in it, break it, measure.",
    "explain": "Why each node does or does not announce a Service.",
    "validate": "Check manifests and report every problem.",
    "status": "Pools, sessions, who holds which IP, problems: one screen.",
    "manager": "Teapot: vet and allocate tenants' load balancers (management cluster).",
    "tenant-agent": "Teapot: cloud-provider-teapot for a tenant cluster's Services.",
    "ovn": "OVN mode: Service IPs as OVN Northbound Load_Balancers (one writer).",
    "gateway": "Teapot gateway: tenants' HTTP(S)/TLS/TCP/UDP routes on HAProxy and nginx.",
    "relay": "Teapot: BGP filtering relay between tenants' speakers and the routers.",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module = importlib.import_module(target[0])
        command = getattr(module, target[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _SUMMARIES[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="teapot-lb")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="Minimum level of log lines.",
)
@click.option(
    "--log-format",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "json", "console"]),
    help="auto: JSON unless stderr is a terminal.",
)
@click.pass_context
def main(ctx: click.Context, log_level: str, log_format: str) -> None:
    """Load balancing for Kubernetes on bare metal.

    Services of type LoadBalancer get an external IP from an address pool,
    announced by BGP (ECMP), by L2 (ARP/NDP) or by a keepalived VIP.
    """
    json = None if log_format == "auto" else log_format == "json"
    log.configure(log_level, json=json, component=ctx.invoked_subcommand)
