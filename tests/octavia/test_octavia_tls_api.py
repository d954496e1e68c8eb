"""TERMINATED_HTTPS through the real Octavia 19 API: Octavia resolves the listener's TLS
container references with its certificate manager (the test stack's
`local_cert_manager`; Barbican in production) and hands the driver their PEM; the
driver writes them as TLS Secrets in the Tenant's namespace (the key never in the tree
annotation) and refuses a certificate outside the Tenant's DNS domains by name. Plus the
VIP orphan sweep and the failure paths (the management API or the manager failing, the
manager refusing). One stack per module; tests use their own load balancers."""

from __future__ import annotations

import base64
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from teapot_lb.lab.gateway_lab import make_certificate
from teapot_lb.lab.octavia import PROJECT, Rest, Stack, missing, store_certificate
from teapot_lb.lab.octavia_stack import API_SWEEP_GRACE_S, TINY_NS, TINY_PROJECT, active
from teapot_lb.lab.wait import wait_for

from .test_octavia_api import SUBNET, make_lb, refusal

pytestmark = [
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),  # the SDK's own deprecations
]

WITHIN = 20.0
SECRETS = "/api/v1/namespaces/tenant-acme/secrets"


GRACE_S = API_SWEEP_GRACE_S


@pytest.fixture
def stack(api_stack: tuple[Stack, Rest, Any]) -> tuple[Stack, Rest, Any]:
    return api_stack  # shared with test_octavia_api (conftest)


def certificate_ref(stack: Stack, hostname: str) -> str:
    """A certificate for `hostname` stored where Octavia's certificate manager finds it."""
    cert, key, _ = make_certificate(stack.work / "made", hostname)
    return store_certificate(stack, cert.read_text(), key.read_text())


def secrets_of(rest: Rest, lb_id: str) -> dict[str, dict[str, Any]]:
    selector = f"?labelSelector=octavia.lb.teapot.io%2Floadbalancer%3D{lb_id}"
    found = rest.get(SECRETS + selector) or {}
    return {s["metadata"]["name"]: s for s in found.get("items") or []}


def test_a_terminated_https_listener_becomes_active_with_its_certificates_as_secrets(
    stack: tuple[Stack, Rest, Any],
) -> None:
    st, rest, conn = stack
    lbs = conn.load_balancer
    www, api = certificate_ref(st, "www.acme.example"), certificate_ref(st, "api.acme.example")
    lb = make_lb(conn, "tls")
    pool = lbs.create_pool(
        loadbalancer_id=lb.id, protocol="HTTP", lb_algorithm="ROUND_ROBIN", project_id=PROJECT
    )
    active(conn, lb.id)
    listener = lbs.create_listener(
        loadbalancer_id=lb.id, protocol="TERMINATED_HTTPS", protocol_port=443,
        default_tls_container_ref=www, sni_container_refs=[api], project_id=PROJECT,
    )  # fmt: skip
    active(conn, lb.id)
    found = lbs.get_listener(listener.id)
    assert (found.provisioning_status, found.operating_status) == ("ACTIVE", "ONLINE")
    policy = lbs.create_l7_policy(
        listener_id=listener.id, action="REDIRECT_TO_POOL", redirect_pool_id=pool.id,
        project_id=PROJECT,
    )  # fmt: skip
    active(conn, lb.id)
    lbs.create_l7_rule(policy.id, type="HOST_NAME", compare_type="EQUAL_TO",
                       value="www.acme.example", project_id=PROJECT)  # fmt: skip
    active(conn, lb.id)

    secrets = secrets_of(rest, lb.id)
    assert len(secrets) == 2, sorted(secrets)
    served = {base64.b64decode(s["data"]["tls.crt"]).decode() for s in secrets.values()}
    stored = {(st.work / "certificates" / f"{ref}.crt").read_text().strip() for ref in (www, api)}
    assert {pem.strip() for pem in served} == stored
    assert all(s["type"] == "kubernetes.io/tls" and s["data"]["tls.key"] for s in secrets.values())
    # The Gateway's HTTPS listener refers to them; the key is nowhere in the request.
    gateway = rest.get(
        "/apis/gateway.networking.k8s.io/v1/namespaces/tenant-acme/gateways"
        f"?labelSelector=octavia.lb.teapot.io%2Floadbalancer%3D{lb.id}"
    )["items"][0]
    # The default certificate's Gateway listener, and one per hostname an SNI certificate
    # serves (none here: only www.acme.example has a policy), each offered for its own
    # names; never two alike on one port (the Gateway CRD refuses them).
    entries = gateway["spec"]["listeners"]
    assert [e["name"] for e in entries] == [listener.id]
    for entry in entries:
        assert (entry["protocol"], entry["port"]) == ("HTTPS", 443)
        assert entry["tls"]["mode"] == "Terminate" and len(entry["tls"]["certificateRefs"]) == 1
    tlb = rest.tlb(lb.id)
    assert tlb is not None
    text = repr(tlb)
    assert "PRIVATE KEY" not in text
    for secret in secrets.values():
        assert secret["data"]["tls.key"] not in text

    lbs.delete_load_balancer(lb.id, cascade=True)
    wait_for(lambda: not secrets_of(rest, lb.id) and rest.tlb(lb.id) is None
             and lbs.find_load_balancer(lb.id) is None, timeout=WITHIN,
             what="the load balancer, its Secrets and its request deleted")  # fmt: skip


def test_a_certificate_outside_the_tenants_dns_domains_is_refused_by_name(
    stack: tuple[Stack, Rest, Any],
) -> None:
    st, rest, conn = stack
    lbs = conn.load_balancer
    lb = make_lb(conn, "tls-foreign")
    www = certificate_ref(st, "www.acme.example")
    # A certificate for another tenant's domain is refused in the call, by name.
    foreign = certificate_ref(st, "www.bolt.example")
    said = refusal(lambda: lbs.create_listener(
        loadbalancer_id=lb.id, protocol="TERMINATED_HTTPS", protocol_port=443,
        default_tls_container_ref=foreign, project_id=PROJECT))  # fmt: skip
    assert "default_tls_container_ref" in said and foreign in said, said
    assert "www.bolt.example" in said and "HostnameNotAllowed" in said, said
    active(conn, lb.id)
    assert lbs.get_load_balancer(lb.id).listeners == []
    # As an SNI certificate (whose PEM Octavia gives only once the listener is stored):
    # the listener goes to ERROR, the load balancer back to ACTIVE, nothing served.
    bad = lbs.create_listener(
        loadbalancer_id=lb.id, protocol="TERMINATED_HTTPS", protocol_port=443,
        default_tls_container_ref=www, sni_container_refs=[foreign], project_id=PROJECT,
    )  # fmt: skip
    wait_for(lambda: lbs.get_listener(bad.id).provisioning_status == "ERROR", timeout=WITHIN,
             what="the listener with a foreign SNI certificate in ERROR")  # fmt: skip
    active(conn, lb.id)
    assert secrets_of(rest, lb.id) == {}


# ------------------------------------------------------------------ the VIP orphan sweep


def test_a_vip_request_left_by_a_create_octavia_rolled_back_is_swept(
    stack: tuple[Stack, Rest, Any],
) -> None:
    _, rest, conn = stack
    lbs = conn.load_balancer
    before = {t["metadata"]["name"] for t in rest.tlbs()}
    # Octavia refuses this graph (an unnamed pool) after create_vip_port has run, rolls
    # back and calls nothing more on the driver.
    unnamed = {"protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}
    listeners = [{"protocol": "TCP", "protocol_port": 80, "default_pool": unnamed}]
    said = refusal(lambda: lbs.create_load_balancer(
        vip_subnet_id=SUBNET, project_id=PROJECT, listeners=listeners))  # fmt: skip
    assert "Pools must be named" in said, said
    [orphan] = [t for t in rest.tlbs() if t["metadata"]["name"] not in before]
    lb_id = orphan["metadata"]["labels"]["octavia.lb.teapot.io/loadbalancer"]
    assert orphan["status"]["addresses"], orphan  # an address held for nobody
    assert lbs.find_load_balancer(lb_id) is None

    def swept() -> bool:
        # Octavia makes a driver for each call that reaches it: this one is the cheapest.
        list(lbs.provider_flavor_capabilities("teapot"))
        return rest.tlb(lb_id) is None

    wait_for(swept, timeout=GRACE_S + WITHIN, what="the orphaned VIP request swept", every=0.5)
    assert all(t["metadata"]["name"] in before for t in rest.tlbs())


# ------------------------------------------------------------------ failure paths


def pid_of(st: Stack, name: str) -> int:
    return st.procs[name].pid


def paused(st: Stack, name: str, call: Callable[[], Any]) -> tuple[str, float]:
    """`call`'s refusal text while process `name` is stopped (SIGSTOP), and its duration."""
    pid = pid_of(st, name)
    os.kill(pid, signal.SIGSTOP)
    start = time.monotonic()
    try:
        return refusal(call), time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)


def test_the_management_api_unreachable_fails_a_create_naming_it_and_leaves_nothing_pending(
    stack: tuple[Stack, Rest, Any],
) -> None:
    st, _, conn = stack
    lbs = conn.load_balancer
    said, took = paused(st, "fakeapi", lambda: lbs.create_load_balancer(
        name="unreachable", vip_subnet_id=SUBNET, project_id=PROJECT))  # fmt: skip
    assert "teapot-lb management API" in said, said
    assert took < 40, took  # the driver's deadline, not Octavia's or the client's
    assert [lb for lb in lbs.load_balancers() if lb.name == "unreachable"] == []
    # The API back, the next create works.
    lb = make_lb(conn, "reachable")
    assert lb.provisioning_status == "ACTIVE"
    assert not any(lb.provisioning_status.startswith("PENDING") for lb in lbs.load_balancers())


def test_the_manager_silent_during_a_change_puts_the_object_in_error_not_pending(
    stack: tuple[Stack, Rest, Any],
) -> None:
    st, _, conn = stack
    lbs = conn.load_balancer
    lb = make_lb(conn, "silent")
    os.kill(pid_of(st, "manager"), signal.SIGSTOP)
    try:
        listener = lbs.create_listener(loadbalancer_id=lb.id, protocol="TCP", protocol_port=81,
                                       project_id=PROJECT)  # fmt: skip
        wait_for(lambda: lbs.get_listener(listener.id).provisioning_status == "ERROR",
                 timeout=WITHIN + 10, what="the listener in ERROR")  # fmt: skip
    finally:
        os.kill(pid_of(st, "manager"), signal.SIGCONT)
    # The load balancer is usable again (Octavia keeps a PENDING_* one immutable).
    assert active(conn, lb.id).provisioning_status == "ACTIVE"
    assert "did not answer" in st.tail("octavia-api", 400)


AGENT_DOWN_S = 5.0  # how long the driver agent stays down (the outage of issue 39)


def test_a_create_while_the_driver_agent_is_down_ends_active_once_it_is_back_and_deletes(
    stack: tuple[Stack, Rest, Any],
) -> None:
    """Octavia keeps a PENDING_* load balancer immutable (a delete is refused, 409): the
    driver's status update waits for the driver agent instead of giving up, so a create
    made while the agent is down ends ACTIVE once it is back, and deletes."""
    st, rest, conn = stack
    lbs = conn.load_balancer
    with st.down("driver-agent"):
        lb = lbs.create_load_balancer(
            name="agent-down", vip_subnet_id=SUBNET, project_id=PROJECT,
            listeners=[{"name": "agent-down-l", "protocol": "TCP", "protocol_port": 80,
                        "default_pool": {"name": "agent-down-p", "protocol": "TCP",
                                         "lb_algorithm": "ROUND_ROBIN",
                                         "members": [{"address": "192.0.2.71",
                                                      "protocol_port": 80}]}}],
        )  # fmt: skip
        # The request is written and answered; the statuses wait for the agent.
        wait_for(lambda: (rest.tlb(lb.id) or {}).get("status", {}).get("addresses"),
                 timeout=WITHIN, what="the VIP assigned")  # fmt: skip
        wait_for(lambda: "driver agent not answering" in st.tail("octavia-api", 400),
                 timeout=WITHIN, what="the driver trying the stopped driver agent")  # fmt: skip
        outage = time.monotonic() + AGENT_DOWN_S
        while time.monotonic() < outage:  # (the outage itself: nothing to wait on)
            assert lbs.get_load_balancer(lb.id).provisioning_status == "PENDING_CREATE"
            time.sleep(0.5)
    found = active(conn, lb.id, within=WITHIN + 30)
    assert found.operating_status == "ONLINE"
    [member] = lbs.members(lb.pools[0]["id"])
    assert member.provisioning_status == "ACTIVE"
    assert "driver agent answering again" in st.tail("octavia-api", 400)
    # Octavia has the statuses of the request's generation: recorded on the request.
    tlb = rest.tlb(lb.id) or {}
    reported = tlb["metadata"]["annotations"].get("octavia.lb.teapot.io/reported")
    assert reported == str(tlb["metadata"]["generation"])
    lbs.delete_load_balancer(lb.id, cascade=True)
    wait_for(lambda: rest.tlb(lb.id) is None, timeout=WITHIN, what="the VIP's request deleted")
    wait_for(lambda: not [x for x in lbs.load_balancers() if x.id == lb.id],
             timeout=WITHIN, what="the load balancer gone from Octavia")  # fmt: skip


def test_the_managers_refusals_are_errors_with_the_reason(
    stack: tuple[Stack, Rest, Any],
) -> None:
    st, rest, conn = stack
    lbs = conn.load_balancer
    first = make_lb(conn, "tiny-1", project=TINY_PROJECT)
    assert first.vip_address == "203.0.113.8"
    # The Tenant's one address is taken: the VIP is refused in the call, with the reason.
    said = refusal(lambda: lbs.create_load_balancer(
        name="tiny-2", vip_subnet_id=SUBNET, project_id=TINY_PROJECT))  # fmt: skip
    assert "no VIP" in said and first.id not in said, said
    assert [lb.name for lb in lbs.load_balancers(project_id=TINY_PROJECT)] == ["tiny-1"]
    assert len(rest.tlbs(TINY_NS)) == 1  # the refused request deleted at once
    # A change the manager refuses after the call (the Tenant's one port is used): the
    # listener in ERROR, the load balancer ACTIVE with its last good request.
    lbs.create_listener(loadbalancer_id=first.id, protocol="TCP", protocol_port=80,
                        project_id=TINY_PROJECT)  # fmt: skip
    active(conn, first.id)
    second = lbs.create_listener(loadbalancer_id=first.id, protocol="TCP", protocol_port=81,
                                 project_id=TINY_PROJECT)  # fmt: skip
    wait_for(lambda: lbs.get_listener(second.id).provisioning_status == "ERROR",
             timeout=WITHIN, what="the refused listener in ERROR")  # fmt: skip
    assert active(conn, first.id).provisioning_status == "ACTIVE"
    request = rest.tlb(first.id, TINY_NS) or {}
    assert [p["port"] for p in request["spec"]["ports"]] == [80]
    assert "change refused" in st.tail("octavia-api", 400)
