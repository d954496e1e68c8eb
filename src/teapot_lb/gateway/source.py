"""Standalone input: a GatewayConfig from a YAML or JSON file of the same shape (camelCase),
with every problem named by field path; and a watcher that yields it again on change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from pydantic import ValidationError

from teapot_lb.gateway.config import GatewayConfig, problems
from teapot_lb.model.manifest import _field_path
from teapot_lb.standalone.directory import Fingerprint, fingerprint


def parse_config(text: str, where: str) -> tuple[GatewayConfig | None, list[str]]:
    """The config in `text` (YAML, JSON being YAML too), or the problems: `where: field: why`."""
    if not text.strip():
        # A file being rewritten in place reads empty for a moment; serving nothing is
        # written `{}`.
        return None, [f"{where}: empty (to serve nothing, write {{}})"]
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [f"{where}: not YAML or JSON: {exc}"]
    if not isinstance(body, dict):
        return None, [f"{where}: expected a mapping with listeners, backends, routes"]
    try:
        config = GatewayConfig.model_validate(body)
    except ValidationError as err:
        return None, [
            f"{where}: {_field_path(e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in err.errors()
        ]
    found = problems(config)
    if found:
        return None, [f"{where}: {p}" for p in found]
    return config, []


def load_config(path: Path) -> tuple[GatewayConfig | None, list[str]]:
    try:
        text = path.read_text()
    except OSError as exc:
        return None, [f"{path}: cannot read: {exc.strerror}"]
    return parse_config(text, str(path))


def dump_config(config: GatewayConfig) -> str:
    """The config as JSON in its file shape (what `load_config` reads back)."""
    return json.dumps(config.model_dump(mode="json", exclude_defaults=True), indent=2) + "\n"


async def watch_config(
    path: Path, every_s: float = 1.0
) -> AsyncIterator[tuple[GatewayConfig | None, list[str]]]:
    """The file's config now, then again each time the file changes (polled: a file
    replaced by rename, as editors and ConfigMap mounts do, is seen too)."""
    last: Fingerprint | None = None
    first = True
    while True:
        stamp = await asyncio.to_thread(fingerprint, [path])
        if first or stamp != last:
            first, last = False, stamp
            yield await asyncio.to_thread(load_config, path)
        await asyncio.sleep(every_s)
