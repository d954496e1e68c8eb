"""Services with the same sharing key on one IP (`lb.teapot.io/sharing-key`)."""

from __future__ import annotations

from ipam_builders import ip, ips_of, pool, svc

from teapot_lb.ipam import Allocator, IPFamily, RefusalReason, Refused, Result


def refusal(result: Result, reason: RefusalReason) -> str:
    assert isinstance(result, Refused), result
    assert result.reason is reason, result
    return result.message


def allocator() -> Allocator:
    return Allocator([pool("a", "192.0.2.0/28")])


def test_same_key_and_disjoint_ports_share_a_requested_ip() -> None:
    alloc = allocator()
    tcp = alloc.assign(svc("dns-tcp", ips="192.0.2.3", key="dns", ports="TCP/53"))
    udp = alloc.assign(svc("dns-udp", ips="192.0.2.3", key="dns", ports="UDP/53"))
    assert ips_of(tcp) == ips_of(udp) == ["192.0.2.3"]
    assert alloc.holders(ip("192.0.2.3")) == ("default/dns-tcp", "default/dns-udp")


def test_same_key_and_same_port_is_a_port_conflict_naming_the_holder() -> None:
    alloc = allocator()
    alloc.assign(svc("one", ips="192.0.2.3", key="k", ports="TCP/80"))
    message = refusal(
        alloc.assign(svc("two", ips="192.0.2.3", key="k", ports="TCP/80,TCP/443")),
        RefusalReason.PORT_CONFLICT,
    )
    assert "default/one" in message and "TCP/80" in message and "TCP/443" not in message


def test_a_different_key_may_not_share() -> None:
    alloc = allocator()
    alloc.assign(svc("one", ips="192.0.2.3", key="k1", ports="TCP/80"))
    message = refusal(
        alloc.assign(svc("two", ips="192.0.2.3", key="k2", ports="TCP/81")), RefusalReason.IP_IN_USE
    )
    assert "'k1'" in message and "'k2'" in message


def test_an_ip_held_without_a_key_is_never_shared() -> None:
    alloc = allocator()
    alloc.assign(svc("one", ips="192.0.2.3", ports="TCP/80"))
    refusal(
        alloc.assign(svc("two", ips="192.0.2.3", key="k", ports="TCP/81")), RefusalReason.IP_IN_USE
    )


def test_cluster_and_local_traffic_policies_may_not_share() -> None:
    alloc = allocator()
    alloc.assign(svc("one", ips="192.0.2.3", key="k", ports="TCP/80"))
    message = refusal(
        alloc.assign(svc("two", ips="192.0.2.3", key="k", ports="TCP/81", local=True)),
        RefusalReason.TRAFFIC_POLICY_MISMATCH,
    )
    assert "Cluster" in message and "Local" in message


def test_local_services_with_the_same_selector_share() -> None:
    alloc = allocator()
    same = {"app": "dns"}
    alloc.assign(svc("one", ips="192.0.2.3", key="k", ports="TCP/53", local=True, selector=same))
    two = alloc.assign(
        svc("two", ips="192.0.2.3", key="k", ports="UDP/53", local=True, selector=same)
    )
    assert ips_of(two) == ["192.0.2.3"]


def test_local_services_with_different_selectors_may_not_share() -> None:
    alloc = allocator()
    alloc.assign(svc("one", ips="192.0.2.3", key="k", ports="TCP/53", local=True))
    refusal(
        alloc.assign(svc("two", ips="192.0.2.3", key="k", ports="UDP/53", local=True)),
        RefusalReason.SELECTOR_MISMATCH,
    )


def test_automatic_assignment_with_a_key_joins_a_compatible_holder() -> None:
    alloc = allocator()
    first = alloc.assign(svc("one", key="k", ports="TCP/80"))
    alloc.assign(svc("unrelated"))
    second = alloc.assign(svc("two", key="k", ports="TCP/443"))
    assert ips_of(first) == ips_of(second) == ["192.0.2.0"]


def test_automatic_assignment_with_a_clashing_port_gets_its_own_ip() -> None:
    alloc = allocator()
    first = alloc.assign(svc("one", key="k", ports="TCP/80"))
    second = alloc.assign(svc("two", key="k", ports="TCP/80"))
    assert ips_of(first) == ["192.0.2.0"] and ips_of(second) == ["192.0.2.1"]


def test_a_shared_ip_stays_held_until_its_last_holder_releases_it() -> None:
    alloc = allocator()
    alloc.assign(svc("one", key="k", ports="TCP/80"))
    alloc.assign(svc("two", key="k", ports="TCP/81"))
    alloc.release("default/one")
    assert ips_of(alloc.assign(svc("other"))) == ["192.0.2.1"]
    alloc.release("default/two")
    assert ips_of(alloc.assign(svc("later"))) == ["192.0.2.0"]


def test_a_shared_ip_counts_once_in_the_pool_usage() -> None:
    alloc = allocator()
    alloc.assign(svc("one", key="k", ports="TCP/80"))
    alloc.assign(svc("two", key="k", ports="TCP/81"))
    use = alloc.usage()["a"][IPFamily.V4]
    assert (use.assigned, use.available) == (1, 15)


def test_a_sharer_changing_its_ports_into_a_clash_moves_to_another_ip() -> None:
    alloc = allocator()
    alloc.assign(svc("one", key="k", ports="TCP/80"))
    alloc.assign(svc("two", key="k", ports="TCP/81"))
    moved = alloc.assign(svc("two", key="k", ports="TCP/80"))
    assert ips_of(moved) == ["192.0.2.1"]
    assert ips_of(alloc.assign(svc("one", key="k", ports="TCP/80"))) == ["192.0.2.0"]
