"""Octavia's L7 listeners, policies and rules → the gateway's objects: the mapping, what
is refused by name, and that the objects pass the gateway's own vetting and translate
into the routes the data plane's routing table serves as Octavia would."""

from __future__ import annotations

import base64
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from gateway.control.builders import make_certificate, tenant
from octavia.builders import LB_ID, LISTENER_ID, POOL_ID, load_balancer, member, pool
from teapot_lb.gateway import routing
from teapot_lb.gateway.config import GatewayConfig, Protocol, problems
from teapot_lb.gateway.routing import Request
from teapot_lb.gateway.translate import Translation, translate
from teapot_lb.model.manifest import parse_object
from teapot_lb.octavia import l7
from teapot_lb.octavia.mapping import Answer, desired_request, status_update
from teapot_lb.octavia.tree import LoadBalancer, Mode, load_balancer_from_provider
from teapot_lb.octavia.unsupported import ObjectKind
from teapot_lb.tenancy.l7vet import L7Object, L7World, vet_object

NAMESPACE = "tenant-acme"
GATEWAY_IP = "203.0.113.1"
API_POOL = "66666666-6666-4666-8666-666666666666"
HOST = "www.acme.example"


def rule(n: int, type_: str, compare: str, value: str, **over: Any) -> dict[str, Any]:
    return {
        "l7rule_id": f"88888888-8888-4888-8888-8888888888{n:02d}",
        "type": type_,
        "compare_type": compare,
        "value": value,
        "key": None,
        "invert": False,
        "admin_state_up": True,
        **over,
    }


def policy(n: int, action: str, rules: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    return {
        "l7policy_id": f"99999999-9999-4999-8999-9999999999{n:02d}",
        "listener_id": LISTENER_ID,
        "action": action,
        "position": n,
        "redirect_pool_id": None,
        "redirect_url": None,
        "redirect_prefix": None,
        "redirect_http_code": None,
        "admin_state_up": True,
        "rules": rules,
        **over,
    }


def http_lb(policies: list[dict[str, Any]], **listener_over: Any) -> LoadBalancer:
    """An HTTP listener on 80 with a default pool (members .10, .11 on 8080), a second pool
    (member .20 on 9090), and `policies`."""
    d = load_balancer(
        pools=[
            pool([member(0, port=8080), member(1, port=8080)], protocol="HTTP", hm=False),
            pool([member(10, port=9090)], pool_id=API_POOL, protocol="HTTP", hm=False),
        ]
    )
    d["listeners"][0].update({"protocol": "HTTP", "l7policies": policies, **listener_over})
    return load_balancer_from_provider(d, Mode.ROUTE)


def served_policies() -> list[dict[str, Any]]:
    return [
        policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                                       rule(2, "PATH", "STARTS_WITH", "/api")],
               redirect_pool_id=API_POOL),
        policy(2, "REDIRECT_TO_URL", [rule(3, "PATH", "EQUAL_TO", "/old")],
               redirect_url="https://acme.example/new", redirect_http_code=301),
        policy(3, "REDIRECT_PREFIX", [rule(4, "HEADER", "EQUAL_TO", "staging", key="X-Env")],
               redirect_prefix="https://staging.acme.example"),
    ]  # fmt: skip


def objects_of(bodies: list[dict[str, Any]]) -> tuple[list[L7Object], list[dict[str, Any]]]:
    """The gateway's kinds parsed as the control plane parses them, and the slices."""
    parsed: list[L7Object] = []
    slices = [b for b in bodies if b["kind"] == "EndpointSlice"]
    for body in bodies:
        if body["kind"] in ("EndpointSlice", "Secret"):
            continue
        obj, found = parse_object(body)
        assert obj is not None and not found, found
        parsed.append(obj)  # type: ignore[arg-type]
    return parsed, slices


def secrets_of(bodies: list[dict[str, Any]]) -> dict[str, dict[str, bytes]]:
    return {
        f"{b['metadata']['namespace']}/{b['metadata']['name']}": {
            k: base64.b64decode(v) for k, v in b["data"].items()
        }
        for b in bodies
        if b["kind"] == "Secret"
    }


def through_gateway(
    bodies: list[dict[str, Any]],
    *,
    gateway_ip: str = GATEWAY_IP,
    notes: bool = False,
    **acme: Any,
) -> Translation:
    """Vet each object as the gateway does (nothing refused) and translate them all
    (`acme`: changes to the Tenant acme's spec; `notes`: results may carry notes)."""
    objects, slices = objects_of(bodies)
    world = L7World([tenant("acme", **acme), tenant("bolt")], objects, secrets_of(bodies))
    for obj in objects:
        assert vet_object(obj, world) == [], obj.name
    result = translate(world, slices, [ip_address(gateway_ip)])
    assert problems(result.config) == []
    assert all(r.accepted and (notes or not r.notes) for r in result.results.values())
    return result


def served(config: GatewayConfig, request: Request, protocol: Protocol = Protocol.HTTP) -> str:
    """What the data plane's routing table does with `request`: the endpoints it sends
    to, 'redirect <location>', or '404'."""
    listener = next(x.name for x in config.listeners if x.protocol is protocol)
    entry = routing.winner(routing.table(config, listener), request)
    if entry is None:
        return "404"
    redirect = entry.rule.redirect
    if redirect is not None:
        return f"redirect {redirect.status_code} {redirect.scheme}://{redirect.hostname}" + (
            redirect.path or ""
        )
    backend = config.backend(entry.rule.backends[0].backend)
    assert backend is not None
    return " ".join(f"{e.address}:{e.port}" for e in backend.endpoints)


def test_an_http_listener_with_policies_is_served_as_octavia_routes_it() -> None:
    lb = http_lb(served_policies())
    assert l7.l7_refusals(lb) == []
    config = through_gateway(l7.gateway_objects(lb, NAMESPACE)).config
    default, api = "192.0.2.10:8080 192.0.2.11:8080", "192.0.2.20:9090"
    assert served(config, Request(HOST, "/")) == default
    assert served(config, Request(HOST, "/api/v1")) == api
    assert served(config, Request(HOST, "/old")) == "redirect 301 https://acme.example/new"
    assert served(config, Request(HOST, "/older")) == default
    staging = Request(HOST, "/x", headers={"X-Env": "staging"})
    assert served(config, staging) == "redirect 302 https://staging.acme.example"
    assert served(config, Request("other.acme.example", "/")) == "404"


def test_the_objects_are_a_gateway_routes_per_hostname_and_slices_labelled_as_mirrored() -> None:
    bodies = l7.gateway_objects(http_lb(served_policies()), NAMESPACE)
    kinds = sorted(b["kind"] for b in bodies)
    assert kinds == ["EndpointSlice", "EndpointSlice", "Gateway", "HTTPRoute"]
    gateway = next(b for b in bodies if b["kind"] == "Gateway")
    assert gateway["spec"]["gatewayClassName"] == "teapot"
    assert gateway["spec"]["listeners"] == [{"name": LISTENER_ID, "port": 80, "protocol": "HTTP"}]
    for body in bodies:
        labels = body["metadata"]["labels"]
        assert labels[l7.LABEL_LOADBALANCER] == LB_ID
        assert body["metadata"]["namespace"] == NAMESPACE
    [route] = [b for b in bodies if b["kind"] == "HTTPRoute"]
    assert route["spec"]["hostnames"] == [HOST]
    # Octavia's order: the policies by position, then the default pool.
    assert len(route["spec"]["rules"]) == 4
    assert route["spec"]["rules"][-1]["backendRefs"] == [
        {"name": l7.service_name(POOL_ID), "port": 8080}
    ]


def test_a_member_down_or_at_weight_0_is_an_endpoint_not_ready() -> None:
    d = load_balancer(pools=[pool([member(0, port=8080, weight=0), member(1, port=8080)],
                                  protocol="HTTP", hm=False)])  # fmt: skip
    d["listeners"][0].update(protocol="HTTP", l7policies=[
        policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)],
               redirect_pool_id=POOL_ID)])  # fmt: skip
    lb = load_balancer_from_provider(d, Mode.ROUTE)
    [eps] = [b for b in l7.gateway_objects(lb, NAMESPACE) if b["kind"] == "EndpointSlice"]
    assert [(e["addresses"], e["conditions"]["ready"]) for e in eps["endpoints"]] == [
        (["192.0.2.10"], False),
        (["192.0.2.11"], True),
    ]


def test_l7_listeners_are_not_ports_of_the_tenant_load_balancer() -> None:
    lb = http_lb(served_policies())
    request = desired_request(lb, NAMESPACE)
    assert request.spec.ports == [] and request.spec.backends == []


def test_statuses_cover_policies_and_rules_and_the_gateways_pools() -> None:
    lb = http_lb(served_policies())
    answer = Answer(True, "", ("198.51.100.1",), frozenset(), True)
    update = status_update(lb, answer)
    assert {e["id"] for e in update["l7policies"]} == {p["l7policy_id"] for p in served_policies()}
    assert len(update["l7rules"]) == 4
    assert all(e["provisioning_status"] == "ACTIVE" for k in update.values() for e in k)
    assert {e["operating_status"] for e in update["pools"]} == {"ONLINE"}
    assert {e["operating_status"] for e in update["members"]} == {"NO_MONITOR"}


def test_terminated_https_serves_the_listeners_certificate(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path, HOST)
    container = {"certificate": cert, "private_key": key, "intermediates": []}
    lb = http_lb(
        [policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)],
                redirect_pool_id=API_POOL)],
        protocol="TERMINATED_HTTPS", protocol_port=443, default_tls_container_data=container,
    )  # fmt: skip
    assert l7.l7_refusals(lb) == []
    bodies = l7.gateway_objects(lb, NAMESPACE) + l7.tls_secrets(
        lb, LISTENER_ID, [container], NAMESPACE
    )
    config = through_gateway(bodies).config
    [https] = [x for x in config.listeners if x.protocol is Protocol.HTTPS]
    [certificate] = config.certificates
    assert certificate.hostnames == (HOST,) and certificate.cert_pem == cert.decode()
    assert https.certificates == (certificate.name,)
    # the policy takes every request for its hostname, before the default pool
    assert served(config, Request(HOST, "/x"), Protocol.HTTPS) == "192.0.2.20:9090"


REFUSED = [
    ("invert", [policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                rule(2, "PATH", "STARTS_WITH", "/a", invert=True)], redirect_pool_id=API_POOL)]),
    ("compare_type", [policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                      rule(2, "PATH", "REGEX", "^/a")], redirect_pool_id=API_POOL)]),
    ("compare_type", [policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "ENDS_WITH",
                      ".acme.example")], redirect_pool_id=API_POOL)]),
    ("type", [policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
              rule(2, "COOKIE", "EQUAL_TO", "1", key="beta")], redirect_pool_id=API_POOL)]),
    ("action", [policy(1, "REJECT", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)])]),
    ("redirect_prefix", [policy(1, "REDIRECT_PREFIX", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)],
                         redirect_prefix="https://acme.example/sub")]),
    ("redirect_url", [policy(1, "REDIRECT_TO_URL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST)],
                      redirect_url="ftp://acme.example/")]),
    ("default_pool_id", []),
]  # fmt: skip


@pytest.mark.parametrize(("option", "policies"), REFUSED, ids=[o for o, _ in REFUSED])
def test_what_the_gateway_cannot_serve_is_refused_by_its_option(
    option: str, policies: list[dict[str, Any]]
) -> None:
    [refused] = l7.l7_refusals(http_lb(policies))
    assert refused.option == option
    assert option in str(refused) and "not supported by the teapot provider" in str(refused)


def test_listener_ports_policies_on_passthrough_and_re_encryption_are_refused_by_name() -> None:
    policies = served_policies()[:1]
    [port] = l7.l7_refusals(http_lb(policies, protocol_port=8080))
    assert (port.kind, port.option, port.value) == (ObjectKind.LISTENER, "protocol_port", 8080)
    # HTTPS passes TLS through on the VIP (a TCP port): not the gateway's, no L7 policies
    assert l7.l7_refusals(http_lb([], protocol="HTTPS", protocol_port=443)) == []
    on_passthrough = l7.l7_refusals(http_lb(policies, protocol="HTTPS", protocol_port=443))
    assert ("listener_id", ObjectKind.L7POLICY) in {(r.option, r.kind) for r in on_passthrough}
    lb = http_lb(policies)
    re_encrypting = lb.model_copy(
        update={"pools": tuple(p.model_copy(update={"protocol": "HTTPS"}) for p in lb.pools)}
    )
    found = {(r.kind, r.option, r.value) for r in l7.l7_refusals(re_encrypting)}
    assert (ObjectKind.POOL, "protocol", "HTTPS") in found
    no_cert = l7.l7_refusals(http_lb(policies, protocol="TERMINATED_HTTPS", protocol_port=443))
    assert [r.option for r in no_cert] == ["default_tls_container_ref"]


def test_policy_and_rule_edits_keep_octavias_position_order() -> None:
    from teapot_lb.octavia import tree as t

    lb = http_lb(served_policies())
    first = t.l7policy_from_provider(served_policies()[0])
    moved = first.model_copy(update={"position": 9})
    lb = t.put_l7policy(lb, LISTENER_ID, moved)
    listener = lb.listener(LISTENER_ID)
    assert listener is not None and listener.l7policies[-1].id == first.id
    path = first.rules[1]
    lb = t.drop_l7rule(lb, first.id, path.id)
    listener = lb.listener(LISTENER_ID)
    assert listener is not None
    assert [r.id for r in listener.l7policies[-1].rules] == [first.rules[0].id]
    lb = t.drop_l7policy(lb, first.id)
    assert l7.listener_hostnames(lb.listener(LISTENER_ID)) == []  # type: ignore[arg-type]


def test_a_second_hostname_on_a_policy_is_refused_by_its_rules_and_never_served_silently() -> None:
    """Octavia ANDs a policy's rules: two HOST_NAME names never match together. Such a
    policy would be served as nothing (and its second name vetted by nobody), so it is
    refused in the call, naming both hostnames."""
    two = policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                                         rule(2, "HOST_NAME", "EQUAL_TO", "www.bolt.example")],
                 redirect_pool_id=API_POOL)  # fmt: skip
    [refused] = [u for u in l7.l7_refusals(http_lb([two])) if u.kind is ObjectKind.L7POLICY]
    assert refused.option == "rules"
    assert "www.acme.example, www.bolt.example" in str(refused)
    assert "give each hostname its own policy" in str(refused)
    # The same name twice, or a second one disabled, is one hostname: served.
    same = policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                                          rule(2, "HOST_NAME", "EQUAL_TO", HOST.upper())],
                  redirect_pool_id=API_POOL)  # fmt: skip
    off = policy(1, "REDIRECT_TO_POOL",
                 [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                  rule(2, "HOST_NAME", "EQUAL_TO", "www.bolt.example", admin_state_up=False)],
                 redirect_pool_id=API_POOL)  # fmt: skip
    for served in (same, off):
        lb = http_lb([served])
        assert l7.l7_refusals(lb) == []
        assert l7.listener_hostnames(lb.listeners[0]) == [HOST]


def test_a_policy_inserted_at_a_taken_position_moves_the_others_down_as_octavia_does() -> None:
    from teapot_lb.octavia import tree as t

    lb = http_lb(served_policies())
    first = t.l7policy_from_provider(
        policy(7, "REDIRECT_TO_POOL", [rule(9, "HOST_NAME", "EQUAL_TO", HOST)],
               redirect_pool_id=API_POOL, position=1)
    )  # fmt: skip
    lb = t.put_l7policy(lb, LISTENER_ID, first)
    listener = lb.listener(LISTENER_ID)
    assert listener is not None
    ids = [p.id for p in listener.l7policies]
    assert ids == [first.id, *(p["l7policy_id"] for p in served_policies())]
    assert [p.position for p in listener.l7policies] == [1, 2, 3, 4]
    lb = t.drop_l7policy(lb, first.id)
    listener = lb.listener(LISTENER_ID)
    assert listener is not None and [p.position for p in listener.l7policies] == [1, 2, 3]


def test_a_failover_keeps_the_certificates_written_before() -> None:
    from teapot_lb.octavia import tree as t

    kept = http_lb(served_policies(), protocol="TERMINATED_HTTPS", protocol_port=443,
                   default_tls_container_data={"certificate": "c", "private_key": "k"})  # fmt: skip
    rebuilt = http_lb(served_policies(), protocol="TERMINATED_HTTPS", protocol_port=443)
    assert rebuilt.listeners[0].certificates == 0
    assert t.keep_certificates(rebuilt, kept).listeners[0].certificates == 1
    assert l7.secret_names(t.keep_certificates(rebuilt, kept)) == l7.secret_names(kept)
