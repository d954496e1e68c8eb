"""`teapot-lb validate PATH...`: check manifests before they reach a cluster."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from teapot_lb.model.gateway_api_schema import unevaluable_rules
from teapot_lb.model.manifest import load
from teapot_lb.validation import validate_manifest


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--ignore-unknown-kinds",
    is_flag=True,
    help="Skip documents of kinds teapot-lb does not read instead of reporting them.",
)
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...], ignore_unknown_kinds: bool) -> None:
    """Check YAML manifests (files or directories) of pools, peers, advertisements and Services.

    `v1` Secrets are read too (BGP passwords, as `teapot-lb run` reads them); when the
    manifests hold any, each BGPPeer's passwordSecret must name one of them with a
    `password` key. Every problem is printed as `Kind/name: field: reason  [file,
    document N]`; the exit status is 1 when there is any.
    """
    manifest = load(paths, ignore_unknown_kinds=ignore_unknown_kinds)
    problems = validate_manifest(manifest)
    for rule in unevaluable_rules():  # none today; never skipped without a word
        click.echo(f"warning: Gateway API CRD rule not evaluated: {rule}", err=True)
    for p in problems:
        click.echo(str(p))
    if problems:
        objects = len({p.ref for p in problems})
        click.echo(
            f"{len(problems)} problem(s) in {objects} object(s) of {len(manifest.files)} file(s)",
            err=True,
        )
        ctx.exit(1)
    kinds: Counter[str] = Counter(str(obj.kind) for obj in manifest.objects)
    if manifest.secrets:  # `v1` Secrets: BGP passwords, as standalone mode reads them
        kinds["Secret"] = len(manifest.secrets)
    detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    count = len(manifest.objects) + len(manifest.secrets)
    click.echo(
        f"OK: {count} object(s) in {len(manifest.files)} file(s)"
        + (f" ({detail})" if detail else "")
    )
