"""VIP backend: a running (or restarted) node never renumbers an existing instance."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path, PurePath

from teapot_lb.speaker.vip_backend import VRIDS_FILE, VIPBackend
from teapot_lb.vrrp.group import VipGroup
from teapot_lb.vrrp.render import Rendered, RenderPaths, render

RANGE = (10, 11)  # two VRIDs: a newcomer preferring the taken one is easy to find
PATHS = RenderPaths(notify_fifo=PurePath("/nonexistent/fifo"), track_dir=PurePath("/nonexistent"))


class FakeSupervisor:
    """What VIPBackend uses of KeepalivedSupervisor, without keepalived."""

    paths = PATHS

    def __init__(self) -> None:
        self.applied: list[Rendered] = []

    async def apply(self, rendered: Rendered) -> None:
        self.applied.append(rendered)

    def set_track(self, track_file: PurePath, ok: bool) -> None:
        pass

    async def stop(self) -> None:
        pass


def backend(state_dir: Path) -> VIPBackend:
    b = VIPBackend("n1", state_dir)
    b.supervisor = FakeSupervisor()  # type: ignore[assignment]
    return b


def group(name: str, ip: str, *nodes: str, vrid_range: tuple[int, int] = RANGE) -> VipGroup:
    return VipGroup(
        name=name,
        interface="eth0",
        vips=(ip_address(ip),),
        candidate_nodes=nodes,
        vrid_range=vrid_range,
    )


def vrid_of(b: VIPBackend, group_name: str) -> int:
    assert b.rendered is not None
    (inst,) = b.rendered.instances_for_group(group_name)
    return inst.vrid


def colliding_newcomer(existing: VipGroup) -> VipGroup:
    """A group (another instance: other candidates) that, allocated from scratch together
    with `existing`, takes `existing`'s VRID: the case that used to renumber it."""
    alone = render("n1", [existing], paths=PATHS).vrids
    for i in range(200):
        new = group(f"vip/new{i}", "192.0.2.201", "n1", f"m{i}")
        both = render("n1", [existing, new], paths=PATHS)
        (old_inst,) = both.instances_for_group(existing.name)
        if old_inst.vrid != next(iter(alone.values())):
            return new
    raise AssertionError("no colliding group found")


async def test_a_colliding_new_group_does_not_renumber_the_existing_instance(
    tmp_path: Path,
) -> None:
    existing = group("vip/web", "192.0.2.200", "n1", "n2")
    newcomer = colliding_newcomer(existing)
    b = backend(tmp_path)
    await b.apply([existing], {}, ["eth0"])
    before = vrid_of(b, existing.name)
    for _ in range(3):  # successive applies of the same input change nothing
        await b.apply([existing, newcomer], {}, ["eth0"])
        assert vrid_of(b, existing.name) == before
        assert vrid_of(b, newcomer.name) != before
    assert not b.errors


async def test_the_allocation_survives_a_restart_through_the_state_dir(tmp_path: Path) -> None:
    existing = group("vip/web", "192.0.2.200", "n1", "n2")
    newcomer = colliding_newcomer(existing)
    first = backend(tmp_path)
    await first.apply([existing], {}, ["eth0"])
    await first.apply([existing, newcomer], {}, ["eth0"])
    assert (tmp_path / VRIDS_FILE).exists()
    restarted = backend(tmp_path)
    await restarted.apply([existing, newcomer], {}, ["eth0"])
    assert vrid_of(restarted, existing.name) == vrid_of(first, existing.name)
    assert vrid_of(restarted, newcomer.name) == vrid_of(first, newcomer.name)


async def test_nodes_with_the_same_history_agree(tmp_path: Path) -> None:
    existing = group("vip/web", "192.0.2.200", "n1", "n2")
    newcomer = colliding_newcomer(existing)
    seen = []
    for name in ("n1", "n2"):
        b = VIPBackend(name, tmp_path / name)
        b.supervisor = FakeSupervisor()  # type: ignore[assignment]
        await b.apply([existing], {}, ["eth0"])
        await b.apply([existing, newcomer], {}, ["eth0"])
        seen.append(b.vrids)
    assert seen[0] == seen[1]


async def test_a_node_set_change_is_numbered_alike_with_and_without_history(
    tmp_path: Path,
) -> None:
    # n4 joins: the instance's node set changes. A node that saw the old instance must not
    # hand it the old VRID (the renderer's lineage inheritance), or n4, which never saw
    # it, would run the same VIP under another VRID. (Full range: no probing collision.)
    full = (1, 255)
    before = [
        group("vip/web", "192.0.2.200", "n1", "n2", vrid_range=full),
        group("vip/db", "192.0.2.201", "n1", vrid_range=full),
    ]
    after = [group("vip/web", "192.0.2.200", "n1", "n2", "n4", vrid_range=full), before[1]]
    old_node = backend(tmp_path / "n1")
    await old_node.apply(before, {}, ["eth0"])
    old_vrid = vrid_of(old_node, "vip/web")
    scratch = render("n1", after, paths=PATHS)
    (fresh,) = scratch.instances_for_group("vip/web")
    assert fresh.vrid != old_vrid, "precondition: the new node set prefers another VRID"
    await old_node.apply(after, {}, ["eth0"])
    new_node = VIPBackend("n4", tmp_path / "n4")
    new_node.supervisor = FakeSupervisor()  # type: ignore[assignment]
    await new_node.apply(after, {}, ["eth0"])
    assert old_node.vrids == new_node.vrids
