"""The manifest watch on a real directory: every way a manifest changes is seen at once.

The source's poll and safety re-check are set to a minute, so a change seen within the
test's deadline was seen by inotify, not by a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from teapot_lb.cluster import Store
from teapot_lb.lab.standalone_lab import ours, service, write
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.standalone.inotify import Mask
from teapot_lb.standalone.runner import ManifestSource
from teapot_lb.standalone.watch import libc_inotify_init

SLOW = 60.0  # no poll, no safety re-check within a test
WITHIN = 5.0


def config() -> list[dict[str, Any]]:
    return [ours("AddressPool", "public", {"addresses": ["203.0.113.0/29"]})]


def services_of(source: ManifestSource) -> Callable[[], set[str]]:
    return lambda: set(source.store.view().services)


@contextlib.asynccontextmanager
async def running(source: ManifestSource) -> AsyncIterator[ManifestSource]:
    task = asyncio.create_task(source.run())
    try:
        await wait_for_async(lambda: source.loaded, within=WITHIN, what="the first reload")
        yield source
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def has(source: ManifestSource, *keys: str) -> None:
    want = set(keys)
    await wait_for_async(
        lambda: services_of(source)() == want, within=WITHIN, what=f"services {sorted(want)}"
    )


def populate(root: Path, *names: str) -> Path:
    """A new manifest directory: the pool, and one file per named Service."""
    os.mkdir(root)
    write(root / "config.yaml", config())
    for name in names:
        write(root / f"{name}.yaml", [service(name)])
    return root


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    return populate(tmp_path / "manifests")


def watched(root: Path, **kw: Any) -> ManifestSource:
    return ManifestSource(root, Store(), poll_s=SLOW, recheck_s=SLOW, **kw)


async def test_a_file_renamed_in_is_read_at_once(manifests: Path) -> None:
    async with running(watched(manifests)) as source:
        assert source.watch is not None
        write(manifests / "web.yaml", [service("web")])  # temporary file, then rename
        await has(source, "default/web")


async def test_a_file_written_in_place_is_read_when_closed(manifests: Path) -> None:
    async with running(watched(manifests)) as source:
        with (manifests / "web.yaml").open("w") as fh:
            fh.write("apiVersion: v1\nkind: Service\n")
            fh.flush()
            # Created and half-written: not read yet (nothing says it is complete).
            await asyncio.sleep(0.05)
            assert source.loaded is not None and source.loaded.generation == 1
            fh.write("metadata: {name: web, namespace: default}\n")
            fh.write("spec: {type: LoadBalancer, ports: [{port: 80}]}\n")
        await has(source, "default/web")


async def test_a_deleted_file_is_seen_at_once(manifests: Path) -> None:
    write(manifests / "web.yaml", [service("web")])
    async with running(watched(manifests)) as source:
        await has(source, "default/web")
        (manifests / "web.yaml").unlink()
        await has(source)


async def test_files_in_a_new_subdirectory_are_seen(manifests: Path) -> None:
    async with running(watched(manifests)) as source:
        team = manifests / "team-a"
        team.mkdir()
        write(team / "web.yaml", [service("web")])
        await has(source, "default/web")
        write(team / "api.yaml", [service("api")])  # the subdirectory is watched now
        await has(source, "default/web", "default/api")


async def test_a_removed_and_recreated_directory_is_read_again(manifests: Path) -> None:
    write(manifests / "web.yaml", [service("web")])
    async with running(watched(manifests)) as source:
        await has(source, "default/web")
        generation = source.loaded.generation if source.loaded else 0
        shutil.rmtree(manifests)
        await wait_for_async(
            lambda: source.loaded and source.loaded.generation > generation,
            within=WITHIN,
            what="the missing directory reported",
        )
        assert services_of(source)() == {"default/web"}  # the last manifests stay in use
        populate(manifests, "api")
        await has(source, "default/api")
        write(manifests / "db.yaml", [service("db")])  # the new directory is watched
        await has(source, "default/api", "default/db")


async def test_a_directory_replaced_by_a_rename_is_read_again(manifests: Path) -> None:
    write(manifests / "web.yaml", [service("web")])
    async with running(watched(manifests)) as source:
        await has(source, "default/web")
        new = populate(manifests.with_name("manifests.new"), "api")
        os.rename(manifests, manifests.with_name("manifests.old"))
        os.rename(new, manifests)
        await has(source, "default/api")
        watch = source.watch
        assert watch is not None
        await wait_for_async(
            lambda: watch.watches == 2, within=WITHIN, what="the old copy's watch dropped"
        )


async def test_a_configmap_volume_update_is_seen(manifests: Path) -> None:
    """Kubernetes publishes a ConfigMap update by swapping the hidden `..data` symlink the
    visible files point through."""

    def version(name: str, service_name: str) -> None:
        os.mkdir(manifests / name)
        write(manifests / name / "web.yaml", [service(service_name)])
        os.symlink(name, manifests / "..data_tmp")
        os.rename(manifests / "..data_tmp", manifests / "..data")

    version("..2026_12_03_a", "web")
    os.symlink("..data/web.yaml", manifests / "web.yaml")
    async with running(watched(manifests)) as source:
        await has(source, "default/web")
        version("..2026_12_03_b", "api")
        await has(source, "default/api")


async def test_hidden_files_do_not_cause_a_reload(manifests: Path) -> None:
    async with running(watched(manifests)) as source:
        watch = source.watch
        assert watch is not None
        (manifests / ".web.yaml.swp").write_text("x")
        await wait_for_async(lambda: watch.events_read >= 2, within=WITHIN, what="the events")
        await asyncio.sleep(0.02)
        assert source.loaded is not None and source.loaded.generation == 1


async def test_an_overflow_rereads_everything(manifests: Path) -> None:
    """A stand-in kernel (a pipe) that only ever reports an overflow: the one way the
    change can be noticed is the full re-read an overflow asks for."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    async with running(watched(manifests, inotify_init=lambda: read_end)) as source:
        write(manifests / "web.yaml", [service("web")])
        os.write(write_end, struct.pack("=iIII", -1, Mask.Q_OVERFLOW, 0, 0))
        await has(source, "default/web")
    os.close(write_end)


async def test_a_burst_of_files_is_read_in_one_reload(manifests: Path) -> None:
    source = watched(manifests, settle_s=0.5)  # a burst well inside the settling time
    async with running(source):
        names = [f"svc{i}" for i in range(5)]
        for name in names:
            write(manifests / f"{name}.yaml", [service(name)])
        await has(source, *(f"default/{n}" for n in names))
        assert source.loaded is not None and source.loaded.generation == 2


async def test_the_safety_recheck_sees_what_no_event_reported(manifests: Path) -> None:
    """A stand-in kernel (a pipe) that never reports anything: a network filesystem
    written from another host looks like this."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    source = ManifestSource(
        manifests, Store(), poll_s=SLOW, recheck_s=0.05, inotify_init=lambda: read_end
    )
    async with running(source):
        assert source.watch is not None
        write(manifests / "web.yaml", [service("web")])
        await has(source, "default/web")
    os.close(write_end)


async def test_without_inotify_the_directory_is_polled(manifests: Path) -> None:
    def unavailable() -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    source = ManifestSource(
        manifests, Store(), poll_s=0.02, recheck_s=SLOW, inotify_init=unavailable
    )
    async with running(source):
        assert source.watch is None
        write(manifests / "web.yaml", [service("web")])
        await has(source, "default/web")


async def test_out_of_inotify_instances_falls_back_to_polling(manifests: Path) -> None:
    opened: list[int] = []

    def emfile() -> int:
        opened.append(libc_inotify_init())  # the real call works; pretend the limit is hit
        os.close(opened[-1])
        raise OSError(errno.EMFILE, "Too many open files")

    source = ManifestSource(manifests, Store(), poll_s=0.02, recheck_s=SLOW, inotify_init=emfile)
    async with running(source):
        assert source.watch is None and opened
        write(manifests / "web.yaml", [service("web")])
        await has(source, "default/web")
