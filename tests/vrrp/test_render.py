"""The keepalived renderer: pure, deterministic, and explicit about what it cannot do."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.vrrp.group import Family, InvalidVipGroup, VipGroup
from teapot_lb.vrrp.instances import (
    PRIORITY_MAX,
    InstanceKey,
    VridCollision,
    VridRangeExhausted,
    allocate_vrids,
    group_instances,
    node_priorities,
)
from teapot_lb.vrrp.render import (
    InterfaceMissing,
    MissingNodeAddress,
    Rendered,
    RenderPaths,
    render,
)

PATHS = RenderPaths(notify_fifo=PurePath("/state/notify.fifo"), track_dir=PurePath("/state/track"))
NODES = ("n1", "n2", "n3")


def group(
    name: str,
    *vips: str,
    interface: str = "eth0",
    nodes: Sequence[str] = NODES,
    **kw: object,
) -> VipGroup:
    return VipGroup(
        name=name,
        interface=interface,
        vips=tuple(ipaddress.ip_address(v) for v in (vips or ("192.0.2.200",))),
        candidate_nodes=tuple(nodes),
        **kw,  # type: ignore[arg-type]
    )


def render_on(node: str, groups: Sequence[VipGroup], **kw: object) -> Rendered:
    return render(node, groups, paths=PATHS, **kw)  # type: ignore[arg-type]


def block(text: str, name: str) -> str:
    match = re.search(rf"^vrrp_instance {re.escape(name)} \{{\n(.*?)^\}}", text, re.M | re.S)
    assert match, f"no instance {name} in:\n{text}"
    return match.group(1)


def test_renders_one_vrrpv3_instance_with_vips_excluded_from_adverts() -> None:
    r = render_on("n1", [group("default/web", "192.0.2.200")])
    assert not r.errors
    (plan,) = r.instances
    body = block(r.text, plan.name)
    assert "    state BACKUP\n" in body
    assert "    interface eth0\n" in body
    assert f"    virtual_router_id {plan.vrid}\n" in body
    assert "    version 3\n" in body
    assert "    advert_int 0.1\n" in body
    assert f"    priority {plan.priority}\n" in body
    assert "    higher_prio_send_advert true\n" in body
    assert "    garp_lower_prio_repeat 2\n" in body
    assert "    garp_master_delay 1\n" in body
    assert "    garp_master_refresh 10\n" in body
    assert (
        "    virtual_ipaddress {\n"
        f"        169.254.253.{plan.vrid}/32 scope link\n"
        "    }\n"
        "    virtual_ipaddress_excluded {\n"
        "        192.0.2.200/32\n"
        "    }\n"
    ) in body
    assert "nopreempt" not in body
    assert 'vrrp_notify_fifo "/state/notify.fifo"' in r.text
    assert "    router_id n1\n" in r.text


def test_ipv6_instance_uses_a_link_local_anchor_and_host_routes() -> None:
    r = render_on("n2", [group("default/web6", "2001:db8::200")])
    (plan,) = r.instances
    assert plan.family is Family.V6
    body = block(r.text, plan.name)
    assert f"        fe80::7e1b:{plan.vrid:x}/128\n" in body
    assert "        2001:db8::200/128\n" in body
    assert plan.name.endswith(f"-v6-vrid{plan.vrid}")


def test_same_inputs_in_any_order_render_the_same_text() -> None:
    groups = [group(f"ns/s{i}", f"192.0.2.{10 + i}", nodes=NODES[: 1 + i % 3]) for i in range(9)]
    a = render_on("n1", groups)
    b = render_on("n1", list(reversed(groups)))
    assert a.text == b.text
    assert a.vrids == b.vrids


def test_groups_with_the_same_nodes_share_an_instance_and_local_policy_gets_its_own() -> None:
    groups = [
        group("ns/a", "192.0.2.10"),
        group("ns/b", "192.0.2.11"),
        group("ns/local", "192.0.2.12", local_traffic_policy=True),
        group("ns/v6", "2001:db8::12"),
    ]
    r = render_on("n1", groups)
    by_groups = {plan.groups: plan for plan in r.instances}
    assert set(by_groups) == {("ns/a", "ns/b"), ("ns/local",), ("ns/v6",)}
    shared = by_groups[("ns/a", "ns/b")]
    assert [str(v) for v in shared.vips] == ["192.0.2.10", "192.0.2.11"]


def test_all_nodes_agree_on_vrids_and_priorities_and_priorities_are_distinct() -> None:
    nodes = [f"node-{i}" for i in range(7)]
    groups = [group(f"ns/s{i}", f"192.0.2.{20 + i}", nodes=nodes) for i in range(3)]
    renders = [render_on(n, groups) for n in nodes]
    for i, _ in enumerate(groups):
        plans = [r.instances_for_group(f"ns/s{i}")[0] for r in renders]
        assert len({p.vrid for p in plans}) == 1
        assert len({tuple(sorted(p.priorities.items())) for p in plans}) == 1
        own = [p.priority for p in plans]
        assert len(set(own)) == len(nodes), "two nodes share a priority"
        assert own == [plans[0].priorities[n] for n in nodes]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 64, 200, 254])
def test_priorities_are_distinct_and_valid_for_any_candidate_count(count: int) -> None:
    key = InstanceKey.of(group("ns/x", nodes=[f"n{i}" for i in range(count)]))
    prios = node_priorities(key, 7)
    assert len(set(prios.values())) == count
    assert all(1 <= p <= PRIORITY_MAX for p in prios.values())
    assert max(prios.values()) == PRIORITY_MAX


def test_masters_of_different_instances_spread_over_the_nodes() -> None:
    tops = set()
    for i in range(30):
        key = InstanceKey.of(group(f"ns/s{i}", nodes=NODES))
        prios = node_priorities(key, vrid=1 + i)
        tops.add(max(prios, key=lambda n: prios[n]))
    assert tops == set(NODES)


def test_adding_a_service_keeps_every_existing_vrid_given_the_previous_allocation() -> None:
    before = [
        group(f"ns/s{i}", nodes=NODES[: 1 + i % 3], interface=f"eth{i % 2}") for i in range(6)
    ]
    first = render_on("n1", before)
    # Many new instances, so some of them prefer a VRID an old one holds.
    added = [group(f"ns/new{i}", nodes=(f"x{i}", "n1")) for i in range(40)]
    second = render_on("n1", before + added, previous_vrids=first.vrids)
    for token, vrid in first.vrids.items():
        assert second.vrids[token] == vrid


def test_a_node_joining_keeps_the_vrid_name_and_the_order_of_the_other_nodes() -> None:
    before = render_on("n1", [group("ns/a", "192.0.2.10")])
    after = render_on(
        "n1", [group("ns/a", "192.0.2.10", nodes=(*NODES, "n4"))], previous_vrids=before.vrids
    )
    (old,) = before.instances
    (new,) = after.instances
    assert (new.name, new.vrid) == (old.name, old.vrid)
    order = sorted(old.priorities, key=lambda n: -old.priorities[n])
    new_order = [n for n in sorted(new.priorities, key=lambda n: -new.priorities[n]) if n != "n4"]
    assert new_order == order
    # Only the vanished instance's VRID is inherited, and only once.
    assert set(after.vrids.values()) == set(before.vrids.values())


def test_changing_the_vips_of_an_instance_keeps_its_name_vrid_and_advertised_address() -> None:
    one = render_on("n1", [group("ns/a", "192.0.2.10")])
    two = render_on("n1", [group("ns/a", "192.0.2.10"), group("ns/b", "192.0.2.11")])
    (a,) = one.instances
    (b,) = two.instances
    assert (a.name, a.vrid) == (b.name, b.vrid)
    advertised = re.compile(r"virtual_ipaddress \{.*?\}", re.S)
    assert advertised.findall(block(one.text, a.name)) == advertised.findall(
        block(two.text, b.name)
    )


def test_explicit_vrids_that_collide_are_reported_and_the_rest_is_rendered() -> None:
    groups = [
        group("ns/first", "192.0.2.10", nodes=("n1", "n2"), vrid=42),
        group("ns/second", "192.0.2.11", nodes=("n1", "n3"), vrid=42),
        group("ns/other", "192.0.2.12"),
        # Another family or interface may reuse the VRID.
        group("ns/v6", "2001:db8::1", vrid=42),
        group("ns/eth1", "192.0.2.13", interface="eth1", vrid=42),
    ]
    r = render_on("n1", groups)
    (err,) = r.errors
    assert isinstance(err, VridCollision)
    assert (err.vrid, err.groups, err.holder_groups) == (42, ("ns/second",), ("ns/first",))
    assert "42" in str(err) and "ns/first" in str(err) and "ns/second" in str(err)
    rendered_groups = {g for p in r.instances for g in p.groups}
    assert rendered_groups == {"ns/first", "ns/other", "ns/v6", "ns/eth1"}


def test_an_automatic_vrid_moves_out_of_the_way_of_an_explicit_one() -> None:
    auto = group("ns/auto", "192.0.2.10")
    first = render_on("n1", [auto])
    taken = next(iter(first.vrids.values()))
    explicit = group("ns/pinned", "192.0.2.11", nodes=("n1", "n2"), vrid=taken)
    r = render_on("n1", [auto, explicit], previous_vrids=first.vrids)
    assert not r.errors
    assert r.instances_for_group("ns/pinned")[0].vrid == taken
    assert r.instances_for_group("ns/auto")[0].vrid != taken


def test_an_exhausted_vrid_range_is_a_typed_error_naming_the_groups() -> None:
    groups = [group(f"ns/s{i}", nodes=("n1", f"m{i}"), vrid_range=(10, 11)) for i in range(3)]
    r = render_on("n1", groups)
    (err,) = r.errors
    assert isinstance(err, VridRangeExhausted)
    assert err.vrid_range == (10, 11) and err.interface == "eth0"
    assert "10-11" in str(err) and err.groups[0] in str(err)
    assert sorted(p.vrid for p in r.instances) == [10, 11]


def test_a_missing_interface_skips_only_that_instance() -> None:
    groups = [group("ns/ok", "192.0.2.10"), group("ns/bad", "192.0.2.11", interface="eth9")]
    r = render_on("n1", groups, interfaces={"lo", "eth0"})
    (err,) = r.errors
    assert isinstance(err, InterfaceMissing)
    assert (err.node, err.interface, err.groups) == ("n1", "eth9", ("ns/bad",))
    assert [p.groups for p in r.instances] == [("ns/ok",)]
    assert "interface eth9" not in r.text
    # The skipped instance still holds its VRID, so nodes that have the interface agree.
    assert len(r.vrids) == 2


def test_a_node_renders_only_the_instances_it_is_a_candidate_for() -> None:
    groups = [group("ns/a", nodes=("n1", "n2")), group("ns/b", "192.0.2.11", nodes=("n2", "n3"))]
    assert [p.groups for p in render_on("n1", groups).instances] == [("ns/a",)]
    assert render_on("n4", groups).instances == ()


def test_local_policy_instance_tracks_a_file_that_can_fault_it() -> None:
    r = render_on("n1", [group("ns/local", local_traffic_policy=True)])
    (plan,) = r.instances
    assert plan.track_file is not None and plan.track_file.parent == PATHS.track_dir
    assert (
        f"track_file {plan.name}-local {{\n"
        f'    file "{plan.track_file}"\n'
        "    weight -254\n"
        "    init_file 1\n"
        "}"
    ) in r.text
    assert f"    track_file {{\n        {plan.name}-local\n    }}" in block(r.text, plan.name)


def test_cluster_policy_instance_tracks_nothing() -> None:
    r = render_on("n1", [group("ns/cluster")])
    assert r.instances[0].track_file is None
    assert "track_file" not in r.text


def test_unicast_lists_the_other_candidates_of_the_same_family_as_peers() -> None:
    addrs = {
        n: (ipaddress.ip_address(f"192.0.2.{i}"), ipaddress.ip_address(f"2001:db8::{i}"))
        for i, n in enumerate(NODES, start=1)
    }
    r = render_on(
        "n2",
        [group("ns/u", unicast=True), group("ns/u6", "2001:db8::99", unicast=True)],
        node_addresses=addrs,
    )
    v4 = r.instances_for_group("ns/u")[0]
    v6 = r.instances_for_group("ns/u6")[0]
    assert [str(p) for p in v4.unicast_peers] == ["192.0.2.1", "192.0.2.3"]
    assert [str(p) for p in v6.unicast_peers] == ["2001:db8::1", "2001:db8::3"]
    body = block(r.text, v4.name)
    assert "    unicast_src_ip 192.0.2.2\n" in body
    assert "    unicast_peer {\n        192.0.2.1\n        192.0.2.3\n    }\n" in body


def test_unicast_without_a_peer_address_is_an_error() -> None:
    r = render_on(
        "n1",
        [group("ns/u", unicast=True)],
        node_addresses={"n1": (ipaddress.ip_address("192.0.2.1"),)},
    )
    assert r.instances == ()
    assert {(e.node, e.family) for e in r.errors if isinstance(e, MissingNodeAddress)} == {
        ("n2", Family.V4),
        ("n3", Family.V4),
    }


def test_nopreempt_and_interval_are_rendered() -> None:
    r = render_on("n1", [group("ns/slow", preempt=False, advert_interval_s=1.0)])
    body = block(r.text, r.instances[0].name)
    assert "    nopreempt\n" in body
    assert "    advert_int 1\n" in body


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        ({"advert_interval_s": 0.005}, "advert_interval_s"),
        ({"advert_interval_s": 41.0}, "advert_interval_s"),
        ({"vrid_range": (0, 10)}, "vrid_range"),
        ({"vrid_range": (20, 10)}, "vrid_range"),
        ({"vrid": 256}, "vrid"),
        ({"candidate_nodes": ()}, "candidate_nodes"),
        ({"interface": "eth 0"}, "interface"),
        ({"interface": "eth/0"}, "interface"),
        ({"candidate_nodes": ("n1", "a,b")}, "candidate_nodes"),
        (
            {"vips": (ipaddress.ip_address("192.0.2.1"), ipaddress.ip_address("2001:db8::1"))},
            "vips",
        ),
    ],
)
def test_invalid_groups_name_the_field(change: dict[str, object], field_name: str) -> None:
    with pytest.raises(InvalidVipGroup) as info:
        replace(group("ns/bad"), **change)  # type: ignore[arg-type]
    assert info.value.field_name == field_name
    assert "ns/bad" in str(info.value)


_names = st.text(alphabet="abcdefgh", min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(st.tuples(_names, st.sampled_from(["eth0", "eth1"])), max_size=30),
    more=st.lists(st.tuples(_names, st.sampled_from(["eth0", "eth1"])), max_size=30),
    dropped=st.integers(min_value=0, max_value=10),
)
def test_allocation_has_no_duplicates_and_never_renumbers_with_previous(
    first: list[tuple[str, str]], more: list[tuple[str, str]], dropped: int
) -> None:
    def groups_of(specs: list[tuple[str, str]], prefix: str) -> list[VipGroup]:
        return [
            group(f"{prefix}{i}", nodes=(n, "z"), interface=iface, vrid_range=(1, 40))
            for i, (n, iface) in enumerate(specs)
        ]

    old = allocate_vrids(group_instances(groups_of(first, "a")))
    kept = groups_of(first, "a")[dropped:]  # some go away, freeing VRIDs to inherit
    new = allocate_vrids(group_instances(kept + groups_of(more, "b")), old.vrids)
    for alloc in (old, new):
        per_pool: dict[str, list[int]] = {}
        for token, vrid in alloc.vrids.items():
            assert 1 <= vrid <= 40
            per_pool.setdefault(token.split("/")[0], []).append(vrid)
        for vrids in per_pool.values():
            assert len(vrids) == len(set(vrids))
    for token, vrid in old.vrids.items():
        if token in {InstanceKey.of(g).token() for g in kept}:
            assert new.vrids[token] == vrid
