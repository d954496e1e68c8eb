"""Providers, the pure part: which provider a request has, the refusals of the provider
step of vetting (backward compatible for Tenants without `providers`), the spec an
external provider is given, its status as the `Programmed` condition, the retry delays,
the table, and the agent carrying the Service's provider annotation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import click
import pytest

from teapot_lb.cli.manager import external_providers
from teapot_lb.cluster import ClusterView
from teapot_lb.model.event import Event, EventType
from teapot_lb.model.manifest import parse_object
from teapot_lb.model.service import Node, Protocol, Service
from teapot_lb.model.tenancy import (
    PROGRAMMED,
    PROGRAMMED_FOR_TENANT,
    TenantLoadBalancer,
    TenantLoadBalancerStatus,
)
from teapot_lb.providers import table
from teapot_lb.providers.base import Member, Phase, ProviderStatus
from teapot_lb.providers.plan import BUILDING, load_balancer_spec, programmed, retry_delay
from teapot_lb.providers.route import RouteProvider
from teapot_lb.tenancy.book import ManagementView, Programmed, TenantBook
from teapot_lb.tenancy.programmed import TenantBounds, request_routes
from teapot_lb.tenancy.request import desired_request
from teapot_lb.tenancy.vet import Refusal, Rule, vet

from .builders import parsed, pools, tenant, tenant_body, tlb, tlb_body
from .world import node, service

NOW = datetime(2026, 1, 1, tzinfo=UTC)
V4 = ip_address("198.51.100.1")
V6 = ip_address("2001:db8:100::1")


def view(*requests: TenantLoadBalancer, **spec: Any) -> ManagementView:
    return ManagementView(
        tenants={"acme": tenant("acme", **spec)},
        requests={f"{r.namespace}/{r.name}": r for r in requests},
        pools=pools(),
    )


def conditions(status: dict[str, Any] | None) -> dict[str, tuple[str, str, str]]:
    assert status is not None
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def only_memlb(request: TenantLoadBalancer, _tenant: Any, name: str) -> list[Refusal[Rule]]:
    """A manager running memlb besides the built-ins; memlb cannot build UDP."""
    if name in ("route", "proxy"):
        return []
    if name != "memlb":
        return [Refusal(Rule.PROVIDER_UNAVAILABLE, "spec.provider", f"{name} is not run here")]
    return [
        Refusal(Rule.PROVIDER_REFUSED, "", f"spec.ports[{i}].protocol: UDP is not supported")
        for i, p in enumerate(request.spec.ports)
        if p.protocol is Protocol.UDP
    ]


# ------------------------------------------------------------------ which provider


def test_a_tenant_without_providers_may_use_the_providers_of_its_modes() -> None:
    assert tenant("acme").spec.allowed_providers() == ["route"]
    both = tenant("acme", modes=["Route", "Gateway"])
    assert both.spec.allowed_providers() == ["route", "proxy"]


def test_a_request_naming_no_provider_has_the_tenants_default_else_its_modes() -> None:
    assert tenant("acme").provider_for(tlb("acme", "web")) == "route"
    gateway = tenant("acme", modes=["Gateway"])
    assert gateway.provider_for(tlb("acme", "web", mode="Gateway")) == "proxy"
    external = tenant("acme", providers=["route", "memlb"], defaultProvider="memlb")
    assert external.provider_for(tlb("acme", "web")) == "memlb"
    assert external.provider_for(tlb("acme", "web", provider="route")) == "route"


def test_a_default_provider_the_tenant_does_not_list_is_refused_with_the_list() -> None:
    obj, problems = parse_object(tenant_body("acme", providers=["route"], defaultProvider="x"))
    assert obj is None
    assert "defaultProvider 'x' is not one of the Tenant's providers (route)" in str(problems)


# ------------------------------------------------------------------ vetting


def test_a_tenant_of_today_refuses_a_mode_exactly_as_before() -> None:
    refusals = vet(tlb("acme", "web", mode="Gateway"), tenant("acme"), pools())
    assert [(r.rule, r.field, r.message) for r in refusals] == [
        (
            Rule.MODE_NOT_ALLOWED,
            "spec.mode",
            "Tenant acme may not use mode Gateway (allowed: Route)",
        )
    ]


def test_a_provider_the_tenant_does_not_list_is_refused_naming_the_field_and_the_allowed() -> None:
    refusals = vet(tlb("acme", "web", provider="memlb"), tenant("acme"), pools())
    assert [(r.rule, r.field, r.message) for r in refusals] == [
        (
            Rule.PROVIDER_NOT_ALLOWED,
            "spec.provider",
            "Tenant acme may not use provider memlb (allowed: route)",
        )
    ]


def test_a_built_in_provider_must_agree_with_the_requests_mode() -> None:
    acme = tenant("acme", modes=["Route", "Gateway"])
    refusals = vet(tlb("acme", "web", provider="proxy"), acme, pools())
    assert [(r.rule, r.field) for r in refusals] == [(Rule.INVALID_REQUEST, "spec.mode")]
    assert "provider proxy serves mode Gateway, not Route" in refusals[0].message


def test_a_provider_this_manager_does_not_run_is_refused_before_an_address_is_taken() -> None:
    request = tlb("acme", "web", provider="octavia")
    v = view(request, providers=["route", "octavia"])
    outcome = TenantBook(only_memlb).decide(v, "tenant-acme/web", NOW)
    assert conditions(outcome.status)["Accepted"][:2] == ("False", "ProviderUnavailable")
    assert outcome.status is not None and outcome.status["addresses"] == []
    assert [r.rule for r in outcome.refusals] == [Rule.PROVIDER_UNAVAILABLE]


def test_a_book_without_external_providers_names_the_ones_it_runs() -> None:
    request = tlb("acme", "web", provider="octavia")
    outcome = TenantBook().decide(view(request, providers=["octavia"]), "tenant-acme/web", NOW)
    accepted = conditions(outcome.status)["Accepted"]
    assert accepted[1] == "ProviderUnavailable"
    assert "provider octavia does not run in this manager (running: proxy, route)" in accepted[2]


def test_the_providers_own_refusals_refuse_the_request_in_its_words() -> None:
    request = tlb("acme", "dns", provider="memlb", ports=[{"protocol": "UDP", "port": 53}])
    book = TenantBook(only_memlb)
    outcome = book.decide(view(request, providers=["memlb"]), "tenant-acme/dns", NOW)
    accepted = conditions(outcome.status)["Accepted"]
    assert accepted == ("False", "ProviderRefused", "spec.ports[0].protocol: UDP is not supported")
    assert book.assigned("tenant-acme/dns") == ()


def test_an_external_providers_request_gets_addresses_no_routes_and_waits_for_its_word() -> None:
    request = tlb("acme", "web", provider="memlb")
    v = view(request, providers=["route", "memlb"])
    words: dict[str, Programmed] = {}
    book = TenantBook(only_memlb, lambda key, _r, _n: words.get(key))
    outcome = book.decide(v, "tenant-acme/web", NOW)
    assert outcome.routes == () and book.routes() == []
    assert outcome.status is not None and outcome.status["nextHops"] == []
    assert book.assigned("tenant-acme/web") == (ip_address("198.51.100.0"),)
    assert conditions(outcome.status)[PROGRAMMED] == (
        "False",
        "Pending",
        "198.51.100.0 assigned; provider memlb is building it",
    )
    assert PROGRAMMED_FOR_TENANT not in conditions(outcome.status)  # nothing to tell yet
    # Building is work going as it should: a Normal Event, not a Warning on every create.
    assert outcome.event is not None
    assert (outcome.event.type, outcome.event.reason) == (EventType.NORMAL, "Pending")
    words["tenant-acme/web"] = Programmed(
        True,
        "Active",
        "it serves 198.51.100.0",
        "it serves 198.51.100.0",
        "memlb lb-1 serves 198.51.100.0",
    )
    outcome = book.decide(v, "tenant-acme/web", NOW)
    assert conditions(outcome.status)[PROGRAMMED] == ("True", "Active", "it serves 198.51.100.0")
    assert conditions(outcome.status)[PROGRAMMED_FOR_TENANT] == (
        "True",
        "Active",
        "it serves 198.51.100.0",
    )
    assert outcome.event is not None and outcome.event.message == "it serves 198.51.100.0"
    # The operator's detail is no part of the request (its tenant's agent reads it).
    assert "lb-1" not in json.dumps(outcome.status)
    assert outcome.operator_event == Event(
        EventType.NORMAL, "Programmed", "tenant-acme/web: memlb lb-1 serves 198.51.100.0"
    )


def test_a_decision_the_status_already_has_tells_neither_the_tenant_nor_the_operator() -> None:
    """A restarted manager decides what the status says already: no Event on the request,
    none on the Tenant (the operator's Event comes with a change of the status only)."""
    request = tlb("acme", "web", provider="memlb")
    v = view(request, providers=["route", "memlb"])
    word = Programmed(
        False, "MemUnreachable", "down", "down", "https://memlb.mgmt.example: refused"
    )
    book = TenantBook(only_memlb, lambda _k, _r, _n: word)
    first = book.decide(v, "tenant-acme/web", NOW)
    assert first.operator_event is not None and first.event is not None
    written = TenantLoadBalancerStatus.model_validate(first.status)
    request = request.model_copy(update={"status": written})

    again = book.decide(view(request, providers=["route", "memlb"]), "tenant-acme/web", NOW)

    assert again.status == first.status
    assert again.event is None and again.operator_event is None


def test_route_requests_keep_their_routes_and_status() -> None:
    request = tlb("acme", "web")
    outcome = TenantBook(only_memlb).decide(view(request), "tenant-acme/web", NOW)
    assert [r.prefix for r in outcome.routes] == ["198.51.100.0/32"]
    assert conditions(outcome.status)[PROGRAMMED] == (
        "True",
        "Programmed",
        "198.51.100.0 assigned",
    )
    # (the operator's AddressPool is not the tenant's to read: not in the request)
    assert outcome.status is not None and "shared-v4" not in json.dumps(outcome.status)


def test_the_speakers_announce_no_request_of_another_provider_whatever_its_status() -> None:
    status = {
        "addresses": ["198.51.100.0"],
        "nextHops": ["192.0.2.11"],
        "conditions": [{"type": "Programmed", "status": "True", "reason": "Active",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }  # fmt: skip
    bounds = TenantBounds.of(tenant("acme"), pools())
    for provider, routes in (("memlb", 0), ("route", 1)):
        body = tlb_body("acme", "web", provider=provider) | {"status": status}
        request = parsed(body)
        assert isinstance(request, TenantLoadBalancer)
        assert len(request_routes("tenant-acme/web", request, bounds)) == routes


# ------------------------------------------------------------------ the spec


def test_members_are_the_backends_addresses_at_each_ports_node_port() -> None:
    request = tlb(
        "acme",
        "web",
        ports=[{"protocol": "TCP", "port": 80, "nodePort": 30080}, {"port": 443}],
        ready=False,
    )
    spec = load_balancer_spec("tenant-acme/web", request, "acme", (V4,))
    assert (spec.key, spec.uid, spec.tenant, spec.addresses) == (
        "tenant-acme/web",
        "",
        "acme",
        (V4,),
    )
    http, https = spec.listeners
    assert (http.protocol, http.port, http.health_check_port) == (Protocol.TCP, 80, None)
    assert http.members == (
        Member("n0", ip_address("192.0.2.11"), 30080),
        Member("n1", ip_address("192.0.2.12"), 30080),
        Member("n2", ip_address("192.0.2.13"), 30080),
    )
    assert https.members == ()  # no nodePort: nowhere to send it


def test_local_traffic_policy_keeps_the_ready_nodes_and_the_health_check_port() -> None:
    request = tlb(
        "acme",
        "web",
        externalTrafficPolicy="Local",
        healthCheckNodePort=32000,
        backends=[
            {"node": "n0", "addresses": ["192.0.2.11", "2001:db8:a::11"], "ready": True},
            {"node": "n1", "addresses": ["192.0.2.12"], "ready": False},
        ],
    )
    (listener,) = load_balancer_spec("k", request, "acme", (V6,)).listeners
    assert listener.members == (Member("n0", ip_address("2001:db8:a::11"), 30080),)
    assert listener.health_check_port == 32000


@pytest.mark.parametrize(
    ("phase", "ok"), [(Phase.ACTIVE, True), (Phase.PROVISIONING, False), (Phase.ERROR, False)]
)
def test_a_providers_status_is_the_programmed_condition_in_the_tenants_words(
    phase: Phase, ok: bool
) -> None:
    status = ProviderStatus(
        phase, "OctaviaUnreachable", "keystone: connection refused", tenant_message="down"
    )
    assert programmed(status) == (
        ok, "OctaviaUnreachable", "down", None if phase is Phase.PROVISIONING else "down",
        "keystone: connection refused",
    )  # fmt: skip


def test_a_status_without_words_for_the_tenant_shows_the_sentence_of_its_phase() -> None:
    building = ProviderStatus(Phase.PROVISIONING, "Provisioning", "lb 7f3e PENDING_CREATE")
    assert programmed(building).message == BUILDING
    assert programmed(building).detail == "lb 7f3e PENDING_CREATE"
    failed = ProviderStatus(Phase.ERROR, "ProviderFailed", "ConnectError: http://10.0.0.5")
    assert programmed(failed).message == programmed(failed).told
    assert "10.0.0.5" not in (programmed(failed).message or "")


def test_the_tenant_is_told_the_providers_tenant_message_never_its_operators() -> None:
    status = ProviderStatus(
        Phase.ERROR, "OctaviaUnreachable", "http://10.0.0.5:9876: refused", tenant_message="down"
    )
    assert programmed(status).told == "down"


@pytest.mark.parametrize(
    ("phase", "reason", "told"),
    [
        (Phase.ERROR, "ProviderFailed", "the load balancer could not be built yet: the "
         "operator's provider reported ProviderFailed; it is retried, ask the operator if "
         "this lasts"),
        (Phase.ACTIVE, "Active", "the load balancer is built and serves"),
        (Phase.ACTIVE, "Degraded", "the load balancer serves, but some of its backends are "
         "out of service"),
        (Phase.PROVISIONING, "Provisioning", None),
    ],
)  # fmt: skip
def test_a_status_without_a_tenant_message_tells_the_plain_sentence_of_its_phase(
    phase: Phase, reason: str, told: str | None
) -> None:
    status = ProviderStatus(phase, reason, "provider x failed (ConnectError: http://10.0.0.5)")
    assert programmed(status).told == told


def test_errors_back_off_from_retry_after_up_to_the_cap() -> None:
    error = ProviderStatus(Phase.ERROR, "Down", "", retry_after=2.0)
    delays = [retry_delay(error, n, base_s=1.0, cap_s=20.0) for n in range(6)]
    assert delays == [2.0, 2.0, 4.0, 8.0, 16.0, 20.0]


def test_provisioning_is_polled_and_never_left_without_a_retry() -> None:
    polled = ProviderStatus(Phase.PROVISIONING, "Provisioning", "", retry_after=3.0)
    assert retry_delay(polled, 5) == 3.0
    silent = ProviderStatus(Phase.PROVISIONING, "Provisioning", "")
    assert retry_delay(silent, 0, base_s=1.5) == 1.5
    assert retry_delay(ProviderStatus(Phase.ACTIVE, "Active", ""), 3) is None
    assert retry_delay(None, 3) is None


async def test_the_route_provider_reports_what_route_mode_reports() -> None:
    request = tlb("acme", "web", externalTrafficPolicy="Local", ready=False)
    spec = load_balancer_spec("k", request, "acme", (V4,))
    status = await RouteProvider().ensure(spec)
    assert (status.phase, status.reason) == (Phase.PROVISIONING, "NoReadyBackends")
    assert await RouteProvider().delete("k", "uid") is None


# ------------------------------------------------------------------ the table


def test_the_table_runs_the_built_ins_and_names_what_it_holds() -> None:
    assert sorted(table.builtin()) == ["proxy", "route"]
    with pytest.raises(table.UnknownProvider, match=r"no provider 'f5' \(providers: octavia, "):
        table.factory("f5")


def test_the_manager_option_names_the_provider_and_file_of_a_bad_configuration(
    tmp_path: Path,
) -> None:
    with pytest.raises(click.BadParameter, match="is not NAME=CONFIG_FILE"):
        external_providers(("octavia",))
    with pytest.raises(click.BadParameter, match="provider 'route': built in, always run"):
        external_providers(("route=x.yaml",))
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n")
    with pytest.raises(click.BadParameter, match=r"list\.yaml is not a mapping of options"):
        external_providers((f"f5={listed}",))


# ------------------------------------------------------------------ the agent


def _request_of(body: dict[str, Any]) -> dict[str, Any]:
    svc = Service.model_validate(body)
    nodes = {"acme-n0": Node.model_validate(node("acme-n0", "192.0.2.11"))}
    spec: dict[str, Any] = desired_request(svc, ClusterView(nodes=nodes), "c1", "tenant-acme")[
        "spec"
    ]
    return spec


def test_the_agent_carries_the_services_provider_and_health_check_node_port() -> None:
    body = service(
        "web",
        annotations={"lb.teapot.io/provider": "memlb"},
        externalTrafficPolicy="Local",
        healthCheckNodePort=32000,
    )
    spec = _request_of(body)
    assert (spec["provider"], spec["mode"], spec["healthCheckNodePort"]) == (
        "memlb",
        "Route",
        32000,
    )
    request = parsed(tlb_body("acme", "w", **spec))
    assert isinstance(request, TenantLoadBalancer) and request.spec.provider == "memlb"


def test_the_agent_gives_a_built_in_provider_its_mode_and_no_provider_as_today() -> None:
    assert _request_of(service("web", annotations={"lb.teapot.io/provider": "proxy"}))["mode"] == (
        "Gateway"
    )
    today = _request_of(service("web", healthCheckNodePort=32000))
    assert "provider" not in today and "healthCheckNodePort" not in today  # Cluster: none
    assert today["mode"] == "Route"


def test_the_agent_carries_source_ranges_as_networks_each_once() -> None:
    spec = _request_of(service("web", loadBalancerSourceRanges=[
        "203.0.113.7/24", " 2001:db8::/32", "203.0.113.0/24"]))  # fmt: skip
    assert spec["loadBalancerSourceRanges"] == ["203.0.113.0/24", "2001:db8::/32"]
    assert "loadBalancerSourceRanges" not in _request_of(service("web"))


def test_a_source_range_that_is_no_network_is_named_with_its_index() -> None:
    with pytest.raises(ValueError, match=r"spec\.loadBalancerSourceRanges\[1\]: 'everyone'"):
        _request_of(service("web", loadBalancerSourceRanges=["203.0.113.0/24", "everyone"]))


def test_route_mode_takes_source_ranges_the_tenants_kube_proxy_filters_them() -> None:
    request = tlb("acme", "web", loadBalancerSourceRanges=["203.0.113.0/24"])
    outcome = TenantBook().decide(view(request), "tenant-acme/web", NOW)
    assert conditions(outcome.status)["Accepted"][0] == "True"
    assert outcome.status is not None and outcome.status["addresses"] != []
