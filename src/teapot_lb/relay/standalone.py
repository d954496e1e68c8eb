"""The relay on a manifest directory: Tenants, AddressPools, BGPPeers and Secrets are read
from it, and read again whenever its files change (level-triggered: the relay is given the
whole view each time and changes only the difference)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from teapot_lb import log
from teapot_lb.standalone.directory import FileCache, fingerprint, manifest_files, read

from .relay import Relay


async def follow_manifests(relay: Relay, root: Path, *, every: float = 1.0) -> None:
    """Apply the directory now and after each change, until cancelled."""
    logger = log.get("teapot_lb.relay")
    cache = FileCache()
    seen = None
    while True:
        files = manifest_files(root)
        now = fingerprint(files)
        if now != seen:
            seen = now
            snap = read(root, cache=cache)
            for problem in snap.problems:
                logger.warning("relay manifest problem", problem=str(problem))
            await relay.apply(snap.view())
            for text in relay.problems:
                logger.warning("relay configuration problem", problem=text)
            logger.info(
                "relay configuration applied",
                tenants=len(relay.tenants),
                peers=len(relay.network_side.peers),
            )
        await asyncio.sleep(every)
