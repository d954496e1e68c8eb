"""Provider proxy (issue 38) reports honestly: a Gateway-mode request is Programmed only
once the shared gateway's translation serves its ports on its addresses; before that it is
handed to the gateway (Pending), and what the gateway refuses is its Programmed reason
and a Warning Event. What the gateway can never serve (SCTP, a port without nodePort) is
refused at vetting, before an address is taken. The Service's IP comes as before: from
the status's addresses, whatever Programmed says."""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from teapot_lb.controller.kube_runner import running
from teapot_lb.gateway.control.kube_l7gateway import GatewayControl
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.manager.kube import KubeManager, ManagerConfig
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.manager.providers import Providers
from teapot_lb.model.tenancy import PROGRAMMED, TenantLoadBalancer
from teapot_lb.tenancy.book import ManagementView, TenantBook
from teapot_lb.tenancy.l7vet import L7World
from teapot_lb.tenancy.request import ingress_of

from .builders import CONFIG_NS, parsed, pools, tenant, tlb_body
from .test_provider_loop import WITHIN, management

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


def manager() -> tuple[Providers, TenantBook]:
    providers = Providers({}, ManagerMetrics())
    return providers, TenantBook(providers.vet, providers.progress)


def gateway_translation(*requests: TenantLoadBalancer, shared: Any = GATEWAY) -> Translation:
    """What the manager's gateway control translates (manager --gateway-address)."""
    return translate(L7World([acme()], [], {}, pools=pools()), [], [shared], requests)


def programmed(status: dict[str, Any] | None) -> tuple[str, str, str]:
    assert status is not None
    found = next(c for c in status["conditions"] if c["type"] == PROGRAMMED)
    return found["status"], found["reason"], found["message"]


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
    served = book.decide(view(written), KEY, NOW)
    assert programmed(served.status) == (
        "True", "Programmed", "198.51.100.0:80/TCP served by the shared gateway"
    )  # fmt: skip
    assert served.event is not None and served.event.reason == "Programmed"


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
            assert message == "198.51.100.0:80/TCP served by the shared gateway"

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
