"""Provider proxy (issue 38) reports honestly: a Gateway-mode request is Programmed only
once the shared gateway's translation serves its ports on its addresses; before that it is
handed to the gateway (Pending), and what the gateway refuses is its Programmed reason
and a Warning Event. What the gateway can never serve (SCTP, a port without nodePort) is
refused at vetting, before an address is taken. The Service's IP comes as before: from
the status's addresses, whatever Programmed says.

Served is reachable only once the address is routed to the gateway nodes: with
`--gateway-service` the gateway control writes a copy of the gateway's Service per address
the request is served on (the request named on it, so the manager's book does not read it
as a second claim); without, Programmed says nothing in teapot-lb announces it."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address
from pathlib import Path
from typing import Any, cast

from structlog.testing import capture_logs

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.control.l7services import (
    ANNOTATION_ADDRESS_FOR,
    LABEL_ADDRESS_OF,
    address_services,
    carried_requests,
)
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.kube.client import KubeClient
from teapot_lb.kube.informer import EventType
from teapot_lb.kube.resources import SERVICES, TENANT_LOAD_BALANCERS
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.manager.providers import Providers
from teapot_lb.model.tenancy import PROGRAMMED, TenantLoadBalancer
from teapot_lb.tenancy.book import ManagementView, TenantBook
from teapot_lb.tenancy.l7vet import L7World
from teapot_lb.tenancy.request import ingress_of

from .builders import (
    CONFIG_NS,
    gateway_service_body,
    parsed,
    pool_body,
    pools,
    tenant,
    tenant_body,
    tlb_body,
)
from .test_provider_loop import NAMESPACE, WITHIN, management

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "tenant-acme/web"
GATEWAY = ip_address("203.0.113.10")


def acme() -> Any:
    return tenant("acme", modes=["Route", "Gateway"])


def request(status: dict[str, Any] | None = None, **spec: Any) -> TenantLoadBalancer:
    body = tlb_body("acme", "web", mode="Gateway", **spec)
    if status is not None:
        body["status"] = status
    obj = parsed(body)
    assert isinstance(obj, TenantLoadBalancer)
    return obj


def view(r: TenantLoadBalancer) -> ManagementView:
    return ManagementView(tenants={"acme": acme()}, requests={KEY: r}, pools=pools())


def manager(*, gateway_services: bool = True) -> tuple[Providers, TenantBook]:
    """Providers and book as the manager runs them (`--gateway-service` by default)."""
    providers = Providers({}, ManagerMetrics(), gateway_services=gateway_services)
    return providers, TenantBook(providers.vet, providers.progress)


def gateway_translation(*requests: TenantLoadBalancer, shared: Any = GATEWAY) -> Translation:
    """What the manager's gateway control translates (manager --gateway-address)."""
    return translate(L7World([acme()], [], {}, pools=pools()), [], [shared], requests)


def programmed(status: dict[str, Any] | None) -> tuple[str, str, str]:
    assert status is not None
    found = next(c for c in status["conditions"] if c["type"] == PROGRAMMED)
    return found["status"], found["reason"], found["message"]


COPY = f"{CONFIG_NS}/teapot-lb-gateway-198-51-100-0"  # the Service announcing 198.51.100.0


def test_a_proxy_request_is_handed_to_the_gateway_then_programmed_once_it_serves_it() -> None:
    providers, book = manager()
    providers.gateway_translated(gateway_translation())  # the control runs, nothing yet
    first = book.decide(view(request()), KEY, NOW)
    assert programmed(first.status) == (
        "False", "Pending", "handed to the shared gateway, not served yet"
    )  # fmt: skip
    written = request(first.status)
    assert ingress_of(written) == [{"ip": "198.51.100.0"}]  # the Service's IP, as before

    assert providers.gateway_translated(gateway_translation(written)) == [KEY]
    assert providers.proxy.copy_seen(COPY, (ip_address("198.51.100.0"), (KEY,))) == [KEY]
    served = book.decide(view(written), KEY, NOW)
    assert programmed(served.status) == (
        "True", "Programmed", "198.51.100.0:80/TCP served by the shared gateway"
    )  # fmt: skip
    assert served.event is not None and served.event.reason == "Programmed"


def test_served_but_not_announced_yet_is_not_programmed_until_its_service_is_there() -> None:
    """With --gateway-service: Programmed once a Service announces each address it is
    served on; that Service gone, not any more."""
    providers, book = manager()
    written = request(book.decide(view(request()), KEY, NOW).status)
    providers.gateway_translated(gateway_translation(written))
    status, reason, message = programmed(book.decide(view(written), KEY, NOW).status)
    assert (status, reason) == ("False", "NotAnnounced")
    assert message.startswith(
        "198.51.100.0:80/TCP served by the shared gateway; not announced yet: no Service "
        "announces 198.51.100.0"
    )
    other = (ip_address("198.51.100.1"), (KEY,))  # a stale copy, of another address
    providers.proxy.copy_seen(f"{CONFIG_NS}/stale", other)
    assert programmed(book.decide(view(written), KEY, NOW).status)[1] == "NotAnnounced"
    providers.proxy.copy_seen(COPY, (ip_address("198.51.100.0"), ("tenant-acme/dns", KEY)))
    assert programmed(book.decide(view(written), KEY, NOW).status)[1] == "Programmed"
    assert providers.proxy.copy_seen(COPY, None) == ["tenant-acme/dns", KEY]
    assert programmed(book.decide(view(written), KEY, NOW).status)[1] == "NotAnnounced"


def test_served_without_gateway_service_says_nothing_in_teapot_lb_announces_the_address() -> None:
    providers, book = manager(gateway_services=False)
    written = request(book.decide(view(request()), KEY, NOW).status)
    providers.gateway_translated(gateway_translation(written))
    assert programmed(book.decide(view(written), KEY, NOW).status) == (
        "True", "Programmed",
        "198.51.100.0:80/TCP served by the shared gateway; nothing in teapot-lb announces "
        "198.51.100.0 (the manager runs without --gateway-service): the operator routes it "
        "to the gateway nodes",
    )  # fmt: skip


def test_a_port_the_gateway_refuses_is_the_programmed_reason_and_a_warning() -> None:
    providers, book = manager()
    written = request(book.decide(view(request()), KEY, NOW).status)
    # The gateway's own address is the one assigned (an operator's overlap).
    providers.gateway_translated(gateway_translation(written, shared=ip_address("198.51.100.0")))
    outcome = book.decide(view(written), KEY, NOW)
    status, reason, message = programmed(outcome.status)
    assert (status, reason) == ("False", "AddressNotUsable")
    assert "status.addresses[0]: 198.51.100.0:80/TCP is a shared address of the gateway" in message
    assert "nothing of it is served" in message
    assert outcome.event is not None and outcome.event.type.value == "Warning"


def test_a_request_the_gateway_translated_with_other_ports_is_pending_again() -> None:
    providers, book = manager()
    written = request(book.decide(view(request()), KEY, NOW).status)
    providers.gateway_translated(gateway_translation(written))
    moved = request(written.status.model_dump(by_alias=True) if written.status else None,
                    ports=[{"protocol": "TCP", "port": 8080, "nodePort": 30080}])  # fmt: skip
    assert programmed(book.decide(view(moved), KEY, NOW).status)[:2] == ("False", "Pending")


def test_no_ready_backend_is_listened_on_but_not_programmed() -> None:
    providers, book = manager()
    local = {"externalTrafficPolicy": "Local", "ready": False}
    written = request(book.decide(view(request(**local)), KEY, NOW).status, **local)
    providers.gateway_translated(gateway_translation(written))
    status, reason, message = programmed(book.decide(view(written), KEY, NOW).status)
    assert (status, reason) == ("False", "NoReadyBackends")
    assert message.startswith("198.51.100.0:80/TCP listened on by the shared gateway")


def test_without_a_gateway_control_the_manager_says_it_cannot_know() -> None:
    _, book = manager()
    status, reason, message = programmed(book.decide(view(request()), KEY, NOW).status)
    assert (status, reason) == ("False", "Pending")
    assert "this manager runs no gateway control, --gateway-address" in message


def test_sctp_and_a_port_without_node_port_are_refused_at_vetting_naming_the_field() -> None:
    _, book = manager()
    ports = [{"protocol": "SCTP", "port": 9, "nodePort": 30009}, {"protocol": "TCP", "port": 81}]
    outcome = book.decide(view(request(ports=ports)), KEY, NOW)
    assert outcome.status is not None and outcome.status["addresses"] == []
    accepted = next(c for c in outcome.status["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "ProviderRefused")
    assert (
        "provider proxy: spec.ports[0].protocol: SCTP is not served by the shared gateway"
        in (accepted["message"])
    )
    assert "spec.ports[1].nodePort: port 81/TCP has no nodePort" in accepted["message"]


# ------------------------------------------------------------------ the manager's process


async def test_the_manager_beside_its_gateway_control_programs_once_the_gateway_serves(
    tmp_path: Path,
) -> None:
    """As `teapot-lb manager --gateway-address` runs them (the fake API server): a request
    is Programmed with the gateway's words; one without a ready node is not, with a
    Warning; one with an SCTP port is refused before an address."""
    modes = {"modes": ["Route", "Gateway"], "providers": ["route", "proxy"]}
    async with management(tmp_path, **modes) as world:
        manager = KubeManager(world.admin, ManagerConfig(config_namespace=CONFIG_NS),
                              watch_timeout_s=30)  # fmt: skip
        control = GatewayControl(
            world.admin, [GATEWAY], statuses=lambda: manager.is_leader,
            on_translation=manager.gateway_translated, config_namespace=CONFIG_NS,
            watch_timeout_s=30,
        )  # fmt: skip
        async with running(manager), running(control):
            await world.admin.create(TENANT_LOAD_BALANCERS, tlb_body("acme", "web", mode="Gateway"))
            message = await world.until("web", PROGRAMMED, "True", "Programmed")
            assert message.startswith("198.51.100.0:80/TCP served by the shared gateway; ")
            assert "nothing in teapot-lb announces 198.51.100.0" in message  # no --gateway-service

            idle = tlb_body("acme", "idle", mode="Gateway", ready=False,
                            externalTrafficPolicy="Local")  # fmt: skip
            await world.admin.create(TENANT_LOAD_BALANCERS, idle)
            await world.until("idle", PROGRAMMED, "False", "NoReadyBackends")
            await wait_for_async(lambda: world.events("NoReadyBackends"), within=WITHIN,
                                 what="a NoReadyBackends Warning")  # fmt: skip

            sctp = tlb_body("acme", "sctp", mode="Gateway",
                            ports=[{"protocol": "SCTP", "port": 9, "nodePort": 30009}])  # fmt: skip
            await world.admin.create(TENANT_LOAD_BALANCERS, sctp)
            refused = await world.until("sctp", "Accepted", "False", "ProviderRefused")
            assert "spec.ports[0].protocol: SCTP is not served by the shared gateway" in refused


# ------------------------------------------------------------------ announced


def copies(translation: Translation) -> dict[str, Any]:
    """The Services announcing gateway addresses the control wants for `translation`."""
    return address_services((), gateway_service_body(str(GATEWAY)),
                            translation.load_balancers.values())  # fmt: skip


def test_each_address_a_request_is_served_on_gets_a_copy_of_the_gateway_service_naming_it() -> None:
    dual = {"addresses": ["198.51.100.0", "2001:db8:100::"]}
    wanted = copies(gateway_translation(request(dual)))
    assert sorted(wanted) == ["teapot-lb-gateway-198-51-100-0", "teapot-lb-gateway-2001-db8-100"]
    v4 = wanted["teapot-lb-gateway-198-51-100-0"]
    assert v4["metadata"]["labels"] == {LABEL_ADDRESS_OF: "acme"}
    assert v4["metadata"]["annotations"] == {
        "lb.teapot.io/ips": "198.51.100.0", ANNOTATION_ADDRESS_FOR: KEY,
    }  # fmt: skip
    assert carried_requests(v4) == (KEY,)
    spec = v4["spec"]
    assert (spec["type"], spec["externalTrafficPolicy"]) == ("LoadBalancer", "Local")
    assert spec["selector"] == {"app.kubernetes.io/component": "gateway"}  # the gateway nodes
    assert wanted["teapot-lb-gateway-2001-db8-100"]["spec"]["ipFamilies"] == ["IPv6"]


def test_requests_sharing_an_address_get_one_copy_naming_both() -> None:
    held = {"addresses": ["198.51.100.0"]}
    web = request(held, sharingKey="s")
    dns = parsed(tlb_body("acme", "dns", mode="Gateway", sharingKey="s",
                          ports=[{"protocol": "UDP", "port": 53, "nodePort": 30053}]) | {
        "status": held})  # fmt: skip
    assert isinstance(dns, TenantLoadBalancer)
    (copy_,) = copies(gateway_translation(web, dns)).values()
    assert carried_requests(copy_) == ("tenant-acme/dns", KEY)


def test_no_copy_for_a_request_gone_or_not_served_on_its_address() -> None:
    assert copies(gateway_translation()) == {}  # gone: the control deletes its copy
    held = request({"addresses": ["198.51.100.0"]})
    # Its address the gateway's own (AddressNotUsable): served nowhere, announced nowhere.
    refused = gateway_translation(held, shared=ip_address("198.51.100.0"))
    assert refused.load_balancers[held.ref].refusals
    assert copies(refused) == {}
    sctp = request({"addresses": ["198.51.100.0"]},
                   ports=[{"protocol": "SCTP", "port": 9, "nodePort": 30009}])  # fmt: skip
    assert copies(gateway_translation(sctp)) == {}


def test_a_copy_is_no_claim_and_a_stale_one_is_ignored_and_said() -> None:
    """The manager reads a copy carrying a request's address as no dedicated address: the
    book never holds it for the gateway (the request's usage counts it once); a copy
    naming a request that does not hold the address is ignored, with a warning."""
    mgr = KubeManager(cast(KubeClient, object()),
                      ManagerConfig(config_namespace=CONFIG_NS, gateway_services=True))  # fmt: skip
    mgr._on_pool(
        EventType.ADDED, f"{CONFIG_NS}/shared-v4", pool_body("shared-v4", ["198.51.100.0/26"])
    )
    mgr._on_tenant(EventType.ADDED, "acme", tenant_body("acme", modes=["Gateway"]))
    mgr._on_request(EventType.ADDED, KEY, tlb_body("acme", "web", mode="Gateway"))
    mgr._request_informer._synced.set()  # the requests listed (before, a copy is not judged)
    written = mgr.book.decide(mgr.view(), KEY, NOW)
    body = tlb_body("acme", "web", mode="Gateway") | {"status": written.status}
    mgr._on_request(EventType.MODIFIED, KEY, body)
    wanted = copies(gateway_translation(request(written.status)))
    ((name, copy_),) = wanted.items()
    with capture_logs() as logs:
        mgr._on_gateway_service(EventType.ADDED, f"{CONFIG_NS}/{name}", copy_)
        stale = copy_ | {
            "metadata": copy_["metadata"]
            | {
                "name": "stale",
                "annotations": {
                    "lb.teapot.io/ips": "198.51.100.1",
                    ANNOTATION_ADDRESS_FOR: "tenant-acme/gone",
                },
            }
        }
        mgr._on_gateway_service(EventType.ADDED, f"{CONFIG_NS}/stale", stale)
    assert mgr.view().gateway_addresses == {}
    mgr.book.reserve(mgr.view())
    assert mgr.book.usage("acme").addresses == 1
    assert mgr.book.decide(mgr.view(), KEY, NOW).status == written.status  # still the request's
    warned = [e for e in logs if e["event"].startswith("gateway service stale")]
    assert [(e["request"], e["address"]) for e in warned] == [("tenant-acme/gone", "198.51.100.1")]


async def test_with_gateway_service_the_requests_address_is_announced_and_counted_once(
    tmp_path: Path,
) -> None:
    """As `teapot-lb manager --gateway-address --gateway-service` runs (the fake API
    server): the served request's address gets its copy of the gateway's Service, the
    Tenant's usage counts the address once with the copy there, and the copy goes with
    the request. A stale copy left from before (naming a request that is gone) is deleted
    by the control, and the address it pinned counted nowhere."""
    modes = {"modes": ["Gateway"], "providers": ["proxy"]}
    async with management(tmp_path, **modes) as world:
        world.api.seed(gateway_service_body(str(GATEWAY)))
        stale = gateway_service_body("198.51.100.9", name="teapot-lb-gateway-198-51-100-9")
        stale["metadata"]["labels"] = {LABEL_ADDRESS_OF: "acme"}
        stale["metadata"]["annotations"] = {
            "lb.teapot.io/ips": "198.51.100.9",
            ANNOTATION_ADDRESS_FOR: "tenant-acme/gone",
        }
        world.api.seed(stale)
        config = ManagerConfig(config_namespace=CONFIG_NS, gateway_services=True)
        manager = KubeManager(world.admin, config, watch_timeout_s=30)
        control = GatewayControl(
            world.admin, [GATEWAY], statuses=lambda: manager.is_leader,
            on_translation=manager.gateway_translated, config_namespace=CONFIG_NS,
            address_service=f"{CONFIG_NS}/teapot-lb-gateway", watch_timeout_s=30,
        )  # fmt: skip
        name = "teapot-lb-gateway-198-51-100-0"
        async with running(manager), running(control):
            await world.admin.create(TENANT_LOAD_BALANCERS, tlb_body("acme", "web", mode="Gateway"))
            message = await world.until("web", PROGRAMMED, "True", "Programmed")
            assert message == "198.51.100.0:80/TCP served by the shared gateway"
            copy_ = await wait_for_async(
                lambda: world.api.get("services", name, CONFIG_NS), within=WITHIN,
                what="the Service announcing the request's address",
            )  # fmt: skip
            assert copy_["metadata"]["annotations"][ANNOTATION_ADDRESS_FOR] == KEY
            assert copy_["metadata"]["annotations"]["lb.teapot.io/ips"] == "198.51.100.0"
            services = next(i for i in manager.informers if i.resource == SERVICES)
            await wait_for_async(lambda: services.get(f"{CONFIG_NS}/{name}"), within=WITHIN,
                                 what="the manager reading the copy")  # fmt: skip
            assert manager.view().gateway_addresses == {}  # no second claim
            usage = await wait_for_async(
                lambda: (world.api.get("tenants", "acme") or {}).get("status", {}).get("usage"),
                within=WITHIN, what="acme's usage",
            )  # fmt: skip
            assert usage["addresses"] == 1 and manager.book.usage("acme").addresses == 1
            await wait_for_async(
                lambda: world.api.get("services", stale["metadata"]["name"], CONFIG_NS) is None
                or None, within=WITHIN, what="the stale copy deleted by the control",
            )  # fmt: skip

            await world.admin.delete(TENANT_LOAD_BALANCERS, "web", NAMESPACE)
            await wait_for_async(
                lambda: world.api.get("services", name, CONFIG_NS) is None or None,
                within=WITHIN, what="the copy gone with the request",
            )  # fmt: skip
            assert world.api.get("services", "teapot-lb-gateway", CONFIG_NS)  # the template stays


def test_source_ranges_are_refused_at_vetting_before_an_address_is_taken() -> None:
    _, book = manager()
    outcome = book.decide(view(request(loadBalancerSourceRanges=["203.0.113.0/24"])), KEY, NOW)
    assert outcome.status is not None and outcome.status["addresses"] == []
    accepted = next(c for c in outcome.status["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "ProviderRefused")
    assert accepted["message"].startswith(
        "provider proxy: spec.loadBalancerSourceRanges: the shared gateway does not filter"
    )
