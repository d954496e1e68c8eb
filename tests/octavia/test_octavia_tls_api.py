"""TERMINATED_HTTPS through the real Octavia 19 API: Octavia resolves the listener's TLS
container references with its certificate manager (the test stack's
`local_cert_manager`; Barbican in production) and hands the driver their PEM; the
driver writes them as TLS Secrets in the Tenant's namespace (the key never in the tree
annotation) and refuses a certificate outside the Tenant's DNS domains by name. Plus the
VIP orphan sweep and the failure paths (the management API or the manager failing, the
manager refusing). One stack per module; tests use their own load balancers."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.lab import make_certificate
from teapot_lb.lab.wait import wait_for

from .stack import PROJECT, Rest, Stack, active, connection, missing, running, store_certificate
from .test_octavia_api import make_lb, refusal

pytestmark = [
    pytest.mark.skipif(bool(missing()), reason=missing() or ""),
    pytest.mark.filterwarnings("ignore::Warning:openstack"),  # the SDK's own deprecations
]

WITHIN = 20.0
SECRETS = "/api/v1/namespaces/tenant-acme/secrets"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Rest, Any]]:
    with running(tmp_path_factory.mktemp("octls")) as (stack, rest):
        yield stack, rest, connection(stack)


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
    [entry] = gateway["spec"]["listeners"]
    assert (entry["protocol"], entry["port"], entry["tls"]["mode"]) == ("HTTPS", 443, "Terminate")
    assert len(entry["tls"]["certificateRefs"]) == 2
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
