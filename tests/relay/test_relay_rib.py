"""The relay's tables: accepted routes become paths keyed by session (ECMP over a tenant's
nodes), rejected ones are kept with their reason, withdrawals and sessions going take
their paths along, a Tenant change re-judges the Adj-RIB-In and changes only the
difference, and max-prefix acts as configured."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import ip_address, ip_network

from tests.relay.builders import ASN, OPTIONS, path, policies, relay_tenant

from teapot_lb.bgp.rib import encode_prefix
from teapot_lb.bgp.wire import IPV4_UNICAST, IPV6_UNICAST, pack_path_id
from teapot_lb.bgp.wire.aspath import SegmentType
from teapot_lb.model.bgp import WELL_KNOWN_COMMUNITIES
from teapot_lb.relay.policy import MaxPrefixAction, MaxPrefixCount, Reason, WellKnownCommunities
from teapot_lb.relay.rib import RelayRib

A, B = ASN["acme"], ASN["bolt"]
N1, N2, N3 = "192.0.2.11", "192.0.2.12", "192.0.2.13"
BOLT1 = "192.0.2.71"


def enc(*prefixes: str) -> list[bytes]:
    return [encode_prefix(ip_network(p)) for p in prefixes]


def rib(**options: object) -> RelayRib:
    opts = replace(OPTIONS, **options)  # type: ignore[arg-type]
    r = RelayRib(opts, policies(opts))
    for addr in (N1, N2, N3, "2001:db8:a::11"):
        r.open_session(addr, "acme")
    r.open_session(BOLT1, "bolt")
    return r


def hops(r: RelayRib, prefix: str) -> set[str]:
    return {str(a.next_hop) for a in r.paths_of(ip_network(prefix)).values()}


def test_one_prefix_from_three_nodes_is_one_prefix_with_three_paths() -> None:
    r = rib()
    for n in (N1, N2, N3):
        out = r.learn(n, IPV4_UNICAST, enc("198.51.100.5/32"), path(n, A))
        assert out.changed and not out.rejected
    assert hops(r, "198.51.100.5/32") == {N1, N2, N3}
    compiled = r.compiled()
    assert len(compiled.with_path_ids(IPV4_UNICAST)) == 3
    assert r.prefix_count() == 1 and r.path_count() == 3


def test_ipv6_routes_keep_their_next_hop() -> None:
    r = rib()
    r.learn("2001:db8:a::11", IPV6_UNICAST, enc("2001:db8:100::5/128"), path("2001:db8:a::11", A))
    assert hops(r, "2001:db8:100::5/128") == {"2001:db8:a::11"}


def test_a_rejected_route_is_counted_by_tenant_and_reason_and_explained() -> None:
    r = rib()
    out = r.learn(N1, IPV4_UNICAST, enc("198.51.100.20/32", "198.51.100.5/32"), path(N1, A))
    assert out.rejected == {("acme", Reason.OUTSIDE_ALLOCATION.value): 1}
    assert hops(r, "198.51.100.20/32") == set()
    verdicts = {str(v.prefix): v.reason for v in r.verdicts("acme")}
    assert verdicts == {"198.51.100.20/32": "outside-allocation", "198.51.100.5/32": None}


def test_a_withdrawal_of_another_tenants_route_changes_nothing_and_is_counted() -> None:
    r = rib()
    r.learn(BOLT1, IPV4_UNICAST, enc("198.51.100.20/32"), path(BOLT1, B))
    out = r.withdraw(N1, IPV4_UNICAST, enc("198.51.100.20/32"))
    assert not out.changed
    assert out.rejected == {("acme", "withdraw-not-sent"): 1}
    assert hops(r, "198.51.100.20/32") == {BOLT1}


def test_a_session_going_takes_only_its_own_paths() -> None:
    r = rib()
    for n in (N1, N2):
        r.learn(n, IPV4_UNICAST, enc("198.51.100.5/32"), path(n, A))
    assert r.drop_session(N1).changed
    assert hops(r, "198.51.100.5/32") == {N2}
    r.drop_session(N2)
    assert r.prefix_count() == 0 and not r.compiled().by_family[IPV4_UNICAST]


def test_add_path_from_a_tenant_gives_one_path_per_path_identifier() -> None:
    r = rib()
    e = enc("198.51.100.5/32")[0]
    r.learn(N1, IPV4_UNICAST, [pack_path_id(1) + e], path(N1, A), add_path=True)
    r.learn(N1, IPV4_UNICAST, [pack_path_id(2) + e], path(N2, A), add_path=True)
    assert hops(r, "198.51.100.5/32") == {N1, N2}
    r.withdraw(N1, IPV4_UNICAST, [pack_path_id(1) + e])
    assert hops(r, "198.51.100.5/32") == {N2}


def test_a_shrunk_allocation_withdraws_the_difference_without_touching_the_rest() -> None:
    r = rib()
    r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32", "198.51.100.9/32"), path(N1, A))
    r.learn(BOLT1, IPV4_UNICAST, enc("198.51.100.20/32"), path(BOLT1, B))
    shrunk = relay_tenant(
        "acme",
        allocations=[
            {"addressPool": "shared-v4", "cidrs": ["198.51.100.0/29"]},
            {"addressPool": "shared-v6", "cidrs": ["2001:db8:100::/124"]},
        ],
    )
    out = r.set_policies(policies(acme=shrunk, bolt=relay_tenant("bolt")))
    assert out.changed and out.rejected == {("acme", "outside-allocation"): 1}
    assert hops(r, "198.51.100.5/32") == {N1}
    assert hops(r, "198.51.100.9/32") == set()
    assert hops(r, "198.51.100.20/32") == {BOLT1}
    # Grown back: the route held in the Adj-RIB-In comes back without the tenant resending.
    r.set_policies(policies())
    assert hops(r, "198.51.100.9/32") == {N1}


def test_a_tenant_removed_loses_its_routes() -> None:
    r = rib()
    r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32"), path(N1, A))
    r.learn(BOLT1, IPV4_UNICAST, enc("198.51.100.20/32"), path(BOLT1, B))
    r.set_policies(policies(bolt=relay_tenant("bolt")))
    assert hops(r, "198.51.100.5/32") == set()
    assert hops(r, "198.51.100.20/32") == {BOLT1}


def test_blackhole_is_scrubbed_and_counted_and_no_export_passed_on() -> None:
    r = rib()
    sent = (WELL_KNOWN_COMMUNITIES["blackhole"], WELL_KNOWN_COMMUNITIES["no-export"])
    out = r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32"), path(N1, A, communities=sent))
    assert out.scrubbed == {"acme": 1}
    (attrs,) = r.paths_of(ip_network("198.51.100.5/32")).values()
    assert attrs.communities == (WELL_KNOWN_COMMUNITIES["no-export"],)
    assert attrs.as_path == (A,) and attrs.next_hop == ip_address(N1)


def test_rtbh_adds_no_export_and_scrubs_nothing() -> None:
    r = rib(rtbh=True)
    blackhole = WELL_KNOWN_COMMUNITIES["blackhole"]
    out = r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32"), path(N1, A, communities=(blackhole,)))
    assert not out.scrubbed
    (attrs,) = r.paths_of(ip_network("198.51.100.5/32")).values()
    assert attrs.communities == (blackhole, WELL_KNOWN_COMMUNITIES["no-export"])


def test_a_route_the_policy_now_refuses_withdraws_the_sessions_earlier_path() -> None:
    """Treat-as-withdraw of a confederation segment (RFC 7606 §7.2), and a NO_EXPORT
    honoured: the session's earlier path for the prefix leaves the network's table."""
    r = rib(well_known=WellKnownCommunities.HONOUR)
    good = path(N1, A)
    for later, reason in (
        (path(N1, A, confed=(SegmentType.AS_CONFED_SEQUENCE, (A,))), Reason.AS_CONFED),
        (path(N1, A, communities=(WELL_KNOWN_COMMUNITIES["no-export"],)),
         Reason.NO_EXPORT_HONOURED),
    ):  # fmt: skip
        r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32"), good)
        assert hops(r, "198.51.100.5/32") == {N1}
        out = r.learn(N1, IPV4_UNICAST, enc("198.51.100.5/32"), later)
        assert out.changed and out.rejected == {("acme", reason.value): 1}
        assert hops(r, "198.51.100.5/32") == set()
        assert [v.reason for v in r.verdicts("acme")] == [reason.value]


def many(n: int) -> list[bytes]:
    return [encode_prefix(ip_network(f"198.51.100.{i}/32")) for i in range(n)]


def junk(n: int) -> list[bytes]:
    return [encode_prefix(ip_network(f"10.0.0.{i}/32")) for i in range(n)]  # bogons


def test_max_prefix_drop_rejects_the_excess_with_its_reason() -> None:
    for counts in MaxPrefixCount:
        r = rib(max_prefixes=5, max_prefix_action=MaxPrefixAction.DROP, max_prefix_count=counts)
        out = r.learn(N1, IPV4_UNICAST, many(8), path(N1, A))
        assert r.prefix_count() == 5, counts
        assert out.rejected == {("acme", "max-prefix"): 3}, counts
        assert len(out.over_limit) == 1 and not out.teardown


def test_max_prefix_teardown_asks_for_the_session_to_go() -> None:
    for counts in MaxPrefixCount:
        r = rib(max_prefixes=5, max_prefix_action=MaxPrefixAction.TEARDOWN, max_prefix_count=counts)
        out = r.learn(N1, IPV4_UNICAST, many(8), path(N1, A))
        assert [t.address for t in out.teardown] == [N1], counts


def test_max_prefix_counts_accepted_routes_by_default_so_junk_costs_no_valid_route() -> None:
    r = rib(max_prefixes=5, max_prefix_action=MaxPrefixAction.TEARDOWN)
    assert r.options.max_prefix_count is MaxPrefixCount.ACCEPTED
    assert not r.learn(N1, IPV4_UNICAST, many(5), path(N1, A)).teardown
    out = r.learn(N1, IPV4_UNICAST, junk(50), path(N1, A))
    assert not out.teardown and out.rejected == {("acme", "bogon"): 50}
    assert r.prefix_count() == 5
    # The sixth accepted route is one too many.
    assert r.learn(N1, IPV4_UNICAST, many(6)[5:], path(N1, A)).teardown


def test_max_prefix_counting_received_routes_counts_rejected_ones_too() -> None:
    r = rib(
        max_prefixes=5,
        max_prefix_action=MaxPrefixAction.TEARDOWN,
        max_prefix_count=MaxPrefixCount.RECEIVED,
    )
    assert r.learn(N1, IPV4_UNICAST, junk(8), path(N1, A)).teardown


def test_max_prefix_drop_of_accepted_routes_is_explained() -> None:
    r = rib(max_prefixes=2, max_prefix_action=MaxPrefixAction.DROP)
    r.learn(N1, IPV4_UNICAST, many(3) + junk(2), path(N1, A))
    verdicts = {str(v.prefix): v.reason for v in r.verdicts("acme")}
    assert sorted(verdicts.values(), key=str) == [None, None, "bogon", "bogon", "max-prefix"]


def test_max_prefix_warn_accepts_everything_and_says_so_once() -> None:
    r = rib(max_prefixes=5, max_prefix_action=MaxPrefixAction.WARN)
    out = r.learn(N1, IPV4_UNICAST, many(8), path(N1, A))
    assert r.prefix_count() == 8 and len(out.over_limit) == 1
    assert not r.learn(N1, IPV4_UNICAST, many(10)[8:], path(N1, A)).over_limit


def test_a_grown_allocation_that_takes_a_session_over_its_limit_tears_it_down_once() -> None:
    shrunk = relay_tenant(
        "acme",
        allocations=[
            {"addressPool": "shared-v4", "cidrs": ["198.51.100.0/29"]},
            {"addressPool": "shared-v6", "cidrs": ["2001:db8:100::/124"]},
        ],
    )
    r = rib(max_prefixes=3, max_prefix_action=MaxPrefixAction.TEARDOWN)
    r.set_policies(policies(acme=shrunk, bolt=relay_tenant("bolt")))
    for prefixes in (("198.51.100.1/32",), ("198.51.100.9/32",), ("198.51.100.10/32",),
                     ("198.51.100.11/32",)):  # fmt: skip
        assert not r.learn(N1, IPV4_UNICAST, enc(*prefixes), path(N1, A)).teardown
    out = r.set_policies(policies())
    assert [t.address for t in out.teardown] == [N1]
