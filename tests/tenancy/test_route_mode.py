"""Route mode in the speaker's plan: a management speaker announces every Programmed
TenantLoadBalancer address with one path per tenant next hop (pure; statuses written by
the manager's own book, as the manager would)."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import yaml

from model.builders import bgp_advertisement, parse, peer
from teapot_lb.announce.announcement import BGPRoute, Mode
from teapot_lb.announce.election import EXCLUDE_LABEL
from teapot_lb.announce.plan import plan
from teapot_lb.cluster import ClusterView, Store
from teapot_lb.model.kinds import TENANCY_KINDS
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer
from teapot_lb.tenancy.book import ManagementView, TenantBook
from teapot_lb.tenancy.programmed import programmed_routes

from .builders import TENANTS, parsed, pool_body, tenant_body, tlb_body

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ACME = TENANTS["acme"]
HOPS = ACME["node_ips"]
MANAGEMENT = ("m1", "m2")


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def config(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        pool_body("shared-v4", ["198.51.100.0/26"]),
        pool_body("shared-v6", ["2001:db8:100::/120"]),
        peer("router", "192.0.2.1"),
        bgp_advertisement("shared", "shared-v4", "shared-v6"),
        *(node(n) for n in MANAGEMENT),
        tenant_body("acme"),
        tenant_body("bolt"),
        *extra,
    ]


def managed(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The documents with each TenantLoadBalancer's status as the manager decides it."""
    objs = [parsed(d) for d in docs]
    mview = ManagementView(
        tenants={o.name: o for o in objs if isinstance(o, Tenant)},
        requests={f"{o.namespace}/{o.name}": o for o in objs if isinstance(o, TenantLoadBalancer)},
        pools={o.name: o for o in objs if isinstance(o, AddressPool)},
    )
    book = TenantBook()
    out = []
    for d in docs:
        if d["kind"] == "TenantLoadBalancer":
            key = f"{d['metadata']['namespace']}/{d['metadata']['name']}"
            d = {**d, "status": book.decide(mview, key, NOW).status}
        out.append(d)
    return out


def view(docs: list[dict[str, Any]]) -> ClusterView:
    store = Store()
    for d in docs:
        store.put_object(parse(d))
    return store.view()


def routes_of(v: ClusterView, node_name: str = "m1") -> set[tuple[str, str, str, str]]:
    """(peer, prefix, path key, next hop) of every BGP route the node announces."""
    return {
        (r.peer, r.prefix, r.path, str(r.attributes.next_hop))
        for r in plan(v, node_name).of_mode(Mode.BGP)
        if isinstance(r, BGPRoute)
    }


def paths(prefix: str, hops: list[str], peer_name: str = "router") -> set[tuple[str, ...]]:
    return {(peer_name, prefix, h, h) for h in hops}


def test_a_programmed_request_is_announced_with_a_path_per_tenant_node() -> None:
    v = view(managed(config(tlb_body("acme", "web"))))
    assert routes_of(v) == paths("198.51.100.0/32", HOPS)


def test_every_management_speaker_announces_the_same_paths() -> None:
    v = view(managed(config(tlb_body("acme", "web"))))
    m1, m2 = (plan(v, n).of_mode(Mode.BGP) for n in MANAGEMENT)
    assert m1 == m2 and len(m1) == 3


def test_dual_stack_gives_each_family_its_own_next_hops() -> None:
    dual = {"addressPool": "dual", "cidrs": ["198.51.100.32/28", "2001:db8:100::20/124"]}
    body = tlb_body("acme", "web", ipFamilies=["IPv4", "IPv6"], ipFamilyPolicy="RequireDualStack")
    body["spec"]["backends"][0]["addresses"].append("2001:db8:a::11")
    docs = [
        d for d in config() if d["kind"] != "Tenant" or d["metadata"]["name"] != "acme"
    ]  # the same, with acme given a dual-stack pool (IPAM takes both families from one)
    docs += [
        pool_body("dual", ["198.51.100.32/28", "2001:db8:100::20/124"]),
        bgp_advertisement("dual", "dual"),
        tenant_body("acme", allocations=[dual]),
        body,
    ]
    got = routes_of(view(managed(docs)))
    assert got == paths("198.51.100.32/32", HOPS) | paths(
        "2001:db8:100::20/128", ["2001:db8:a::11"]
    )


def test_a_backend_that_is_no_longer_ready_loses_its_path_under_local_policy() -> None:
    body = tlb_body("acme", "web", externalTrafficPolicy="Local")
    assert routes_of(view(managed(config(body)))) == paths("198.51.100.0/32", HOPS)
    body["spec"]["backends"][1]["ready"] = False
    rest = [HOPS[0], HOPS[2]]
    assert routes_of(view(managed(config(body)))) == paths("198.51.100.0/32", rest)


def test_a_refused_request_is_not_announced() -> None:
    body = tlb_body("acme", "web")
    body["spec"]["backends"][0]["addresses"] = [TENANTS["bolt"]["node_ips"][0]]
    v = view(managed(config(body)))
    assert programmed_routes(v) == ()
    assert routes_of(v) == set()


def test_a_request_without_status_or_in_gateway_mode_is_not_announced() -> None:
    assert routes_of(view(config(tlb_body("acme", "web")))) == set()
    docs = managed(config(tlb_body("acme", "web", mode="Gateway")))
    docs = [tenant_body("acme", modes=["Route", "Gateway"]) if d["kind"] == "Tenant"
            and d["metadata"]["name"] == "acme" else d for d in docs]  # fmt: skip
    assert routes_of(view(docs)) == set()


def test_a_status_with_foreign_hops_or_addresses_is_not_trusted() -> None:
    """The speaker checks the status against the Tenant: whoever wrote it, another
    tenant's node or address is never announced."""
    docs = managed(config(tlb_body("acme", "web")))
    request = docs[-1]
    request["status"]["nextHops"] = [*HOPS[:1], TENANTS["bolt"]["node_ips"][0]]
    assert routes_of(view(docs)) == paths("198.51.100.0/32", HOPS[:1])
    request["status"]["addresses"] = ["198.51.100.17"]  # bolt's
    assert routes_of(view(docs)) == set()


def test_only_peers_of_the_advertisements_selecting_the_pool_get_the_paths() -> None:
    docs = managed(config(tlb_body("acme", "web"), peer("other", "192.0.2.2")))
    assert {r[0] for r in routes_of(view(docs))} == {"router", "other"}
    docs = [d for d in docs if d["kind"] != "BGPAdvertisement"]
    only = bgp_advertisement("shared", "shared-v4", "shared-v6", peers=["other"])
    assert routes_of(view([*docs, only])) == paths("198.51.100.0/32", HOPS, "other")


def test_decisions_explain_where_a_tenant_ip_is_and_is_not_announced() -> None:
    docs = managed(config(tlb_body("acme", "web"), node("m3", **{EXCLUDE_LABEL: ""})))
    v = view(docs)
    announced = plan(v, "m1")
    assert announced.decisions == ()  # tenant decisions never reach Service reporting
    [yes] = announced.tenant_decisions
    assert (yes.service, yes.ip, yes.announces, yes.peers) == (
        "tenant-acme/web",
        "198.51.100.0",
        True,
        ("router",),
    )
    [no] = plan(v, "m3").tenant_decisions
    assert not no.announces and EXCLUDE_LABEL in no.reason
    assert plan(v, "m3").announcements == frozenset()
    without = view([d for d in docs if d["kind"] != "BGPAdvertisement"])
    [none] = plan(without, "m1").tenant_decisions
    assert none.reason == "no BGPAdvertisement selects AddressPool shared-v4"


def test_the_path_key_is_the_next_hop_so_paths_survive_reordering() -> None:
    body = tlb_body("acme", "web")
    before = routes_of(view(managed(config(body))))
    body["spec"]["backends"].reverse()
    assert routes_of(view(managed(config(body)))) == before
    assert all(ip_address(key) for _, _, key, _ in before)


def test_the_speaker_tenancy_rbac_reads_exactly_the_management_kinds_for_the_speaker() -> None:
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    docs = [d for d in yaml.safe_load_all((deploy / "teapot" / "speaker-tenancy.yaml").read_text())]
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    [rule] = role["rules"]
    # The gateway's and the relay's kinds are management kinds the speaker never watches.
    watched = {info.resource.plural for info in TENANCY_KINDS if info.management}
    assert "tenantnodes" not in watched and "httproutes" not in watched
    assert set(rule["resources"]) == watched and rule["verbs"] == ["get", "list", "watch"]
    speakers = [
        d
        for d in yaml.safe_load_all((deploy / "teapot-lb.yaml").read_text())
        if d and d["kind"] == "DaemonSet"
    ]
    [account] = {d["spec"]["template"]["spec"]["serviceAccountName"] for d in speakers}
    assert [s["name"] for s in binding["subjects"]] == [account]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_explain_shows_every_node_for_a_programmed_request() -> None:
    from teapot_lb.announce.plan import explain_tenant
    from teapot_lb.cli.explain import tenant_json, tenant_text

    docs = managed(config(tlb_body("acme", "web"), node("m3", **{EXCLUDE_LABEL: ""})))
    v = view(docs)
    decisions = explain_tenant(v, "tenant-acme/web")
    assert [(d.node, d.announces) for d in decisions] == [
        ("m1", True),
        ("m2", True),
        ("m3", False),
    ]
    request = v.tenant_load_balancers["tenant-acme/web"]
    text = tenant_text("tenant-acme/web", request, decisions)
    assert "Programmed: True" in text and f"next hops: {', '.join(HOPS)}" in text
    assert "announced to router" in text and EXCLUDE_LABEL in text
    doc = yaml.safe_load(tenant_json("tenant-acme/web", request, decisions))
    assert doc["nextHops"] == HOPS and [d["node"] for d in doc["decisions"]] == ["m1", "m2", "m3"]


def test_explain_of_a_refused_request_gives_the_managers_reason() -> None:
    from teapot_lb.announce.plan import explain_tenant
    from teapot_lb.cli.explain import tenant_text

    body = tlb_body("acme", "web")
    body["spec"]["backends"][0]["addresses"] = [TENANTS["bolt"]["node_ips"][0]]
    v = view(managed(config(body)))
    assert explain_tenant(v, "tenant-acme/web") == []
    text = tenant_text("tenant-acme/web", v.tenant_load_balancers["tenant-acme/web"], [])
    assert "Accepted: False (BackendNotAllowed)" in text
    assert "not Programmed" in text
