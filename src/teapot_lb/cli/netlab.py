"""`teapot-lb lab-cleanup`: remove namespaces a crashed lab or test left behind."""

from __future__ import annotations

import click

from teapot_lb.netlab import cleanup_stale, netns_available


@click.command("lab-cleanup")
@click.option("--all", "all_owners", is_flag=True, help="Also remove namespaces of live runs.")
def lab_cleanup(all_owners: bool) -> None:
    """Remove network namespaces left by crashed lab runs or tests."""
    reason = netns_available()
    if reason:
        raise click.ClickException(reason)
    removed = cleanup_stale(all_owners=all_owners)
    click.echo(
        f"removed {len(removed)} namespace(s)" + (": " + ", ".join(removed) if removed else "")
    )
