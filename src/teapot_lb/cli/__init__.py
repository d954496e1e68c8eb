"""The `teapot-lb` command: one entry point, one subcommand per component."""

from __future__ import annotations

import click

from teapot_lb import __version__, log


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def _register() -> None:
    from teapot_lb.cli.netlab import lab_cleanup
    from teapot_lb.cli.validate import validate

    for command in (lab_cleanup, validate):
        main.add_command(command)


_register()
