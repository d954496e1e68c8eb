"""The octavia provider without Octavia: its config, the tree it wants, the calls it plans
from what Octavia holds, its refusals, and an Octavia it cannot reach."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from providers.builders import TENANT, member, noauth_config, spec
from teapot_lb.addresses import IPFamily, IPFamilyPolicy
from teapot_lb.model.common import ObjectMeta
from teapot_lb.model.service import Protocol
from teapot_lb.model.tenancy import (
    SourceService,
    Tenant,
    TenantLoadBalancer,
    TenantLoadBalancerSpec,
    TenantSpec,
)
from teapot_lb.providers.base import Listener, Phase, owner_tag
from teapot_lb.providers.octavia import OctaviaError, OctaviaProvider, load
from teapot_lb.providers.octavia_config import ConfigError, HealthMonitor, read
from teapot_lb.providers.octavia_plan import (
    Existing,
    Step,
    create,
    existing,
    out_of_service,
    plan,
    wanted,
)

SUBNET = "subnet-1"
PROJECT = "project-1"
MONITOR = HealthMonitor()
OCTAVIA_URL = "http://127.0.0.1:9876/v2/lbaas/loadbalancers"


def config(**more: Any) -> dict[str, Any]:
    return noauth_config("http://127.0.0.1:9876", SUBNET, PROJECT, **more)


def problems(body: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        read(body)
    return caught.value.problems


# -- config -----------------------------------------------------------------------------


def test_a_noauth_config_names_the_endpoint_subnet_and_projects() -> None:
    parsed = read(config())

    assert parsed.auth is not None and parsed.auth.endpoint == "http://127.0.0.1:9876"
    assert parsed.vip_subnet == SUBNET
    assert parsed.project_of(TENANT) == PROJECT
    assert parsed.project_of("other") is None
    assert parsed.provider == "ovn"


def test_a_config_file_is_read_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "octavia.yaml"
    path.write_text("cloud: mycloud\nvipNetwork: net-1\ntenants:\n  acme: {project: p1}\n")

    parsed = read(path)

    assert (parsed.cloud, parsed.vip_network, parsed.project_of("acme")) == (
        "mycloud",
        "net-1",
        "p1",
    )


def test_noauth_without_an_endpoint_is_refused_naming_the_field() -> None:
    body = config(auth={"type": "noauth"})

    assert problems(body) == ["octavia config: auth: auth type noauth needs endpoint"]


def test_password_auth_names_every_missing_field() -> None:
    body = config(auth={"type": "password", "authUrl": "http://keystone:5000/v3"})

    assert problems(body) == [
        "octavia config: auth: auth type password needs username, password, projectName"
    ]


def test_a_tenant_without_a_project_and_an_unknown_field_are_named() -> None:
    body = config(tenants={"acme": {"memberSubnet": "s"}}, vipPort=1)

    assert problems(body) == [
        "octavia config: tenants.acme.project: required field is missing",
        "octavia config: vipPort: unknown field",
    ]


def test_both_or_neither_of_cloud_and_auth_is_refused() -> None:
    assert problems(config(cloud="mycloud")) == [
        "octavia config: name exactly one of cloud (a clouds.yaml cloud) and auth"
    ]


def test_a_monitor_timeout_longer_than_its_delay_is_refused_naming_the_field() -> None:
    body = config(healthMonitor={"delay": 2, "timeout": 3})

    assert problems(body) == [
        "octavia config: healthMonitor: timeout (3) must not be longer than delay (2): "
        "Octavia refuses such a monitor"
    ]


def test_a_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("auth: [\n")

    [problem] = problems(path)

    assert problem.startswith(f"{path}: not YAML or JSON")


# -- the wanted tree and the plan --------------------------------------------------------


def two_members() -> Any:
    return spec("u1", "198.51.100.60", member("m1", "198.51.100.41"),
                member("m2", "198.51.100.42"))  # fmt: skip


def built(want: Any, lb_id: str = "lb-1", down: Mapping[str, str] | None = None) -> Existing:
    """What Octavia holds once `want` was built as asked, the members named in `down` with
    that operating status (the others ONLINE)."""
    down = down or {}
    listeners, pools, members, monitors = [], [], {}, []
    for n, li in enumerate(want.listeners):
        pool_id, monitor_id = f"pool-{n}", f"hm-{n}" if li.monitor else None
        listeners.append({"id": f"li-{n}", "protocol": li.protocol,
                          "protocol_port": li.port, "default_pool_id": pool_id})  # fmt: skip
        pools.append({"id": pool_id, "protocol": li.protocol, "healthmonitor_id": monitor_id})
        members[pool_id] = [{"id": f"mem-{m.node}", "name": m.node, "address": str(m.address),
                             "protocol_port": m.port,
                             "operating_status": down.get(m.node, "ONLINE")}
                            for m in li.members]  # fmt: skip
        if monitor_id:
            monitors.append({"id": monitor_id, "type": li.monitor, "delay": 5, "timeout": 3,
                             "max_retries": 2, "max_retries_down": 3})  # fmt: skip
    lb = {"id": lb_id, "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
          "vip_address": want.vip_address}  # fmt: skip
    return existing(lb, listeners, pools, members, monitors)


def test_a_tcp_listener_wants_a_source_ip_port_pool_and_a_tcp_monitor() -> None:
    want = wanted(two_members(), PROJECT, MONITOR)

    [listener] = want.listeners
    assert (listener.protocol, listener.port, listener.monitor) == ("TCP", 80, "TCP")
    assert {str(m.address) for m in listener.members} == {"198.51.100.41", "198.51.100.42"}
    assert want.tag == owner_tag("u1")


def test_udp_is_monitored_by_udp_connect_and_sctp_not_at_all() -> None:
    udp = Listener(Protocol.UDP, 53, (member("m1", "198.51.100.41", 30053),))
    want = wanted(spec("u1", "198.51.100.60", protocol=Protocol.SCTP, extra=(udp,)),
                  PROJECT, MONITOR)  # fmt: skip

    assert [(li.protocol, li.monitor) for li in want.listeners] == [
        ("UDP", "UDP-CONNECT"), ("SCTP", None)
    ]  # fmt: skip


def test_members_of_the_other_family_are_left_out_and_named() -> None:
    want = wanted(spec("u1", "198.51.100.60", member("m1", "198.51.100.41"),
                       member("m6", "2001:db8::6")), PROJECT, MONITOR)  # fmt: skip

    assert {m.node for m in want.listeners[0].members} == {"m1"}
    assert want.left_out == ("m6 (2001:db8::6)",)


def test_nothing_built_is_one_fully_populated_create() -> None:
    want = wanted(two_members(), PROJECT, MONITOR)
    step = create(want, "ovn", {"vip_subnet_id": SUBNET}, SUBNET, MONITOR)

    body = step.body["loadbalancer"]  # type: ignore[index]
    assert (step.method, step.path) == ("POST", "/lbaas/loadbalancers")
    assert (body["vip_address"], body["provider"], body["project_id"]) == (
        "198.51.100.60", "ovn", PROJECT)  # fmt: skip
    pool = body["listeners"][0]["default_pool"]
    assert pool["lb_algorithm"] == "SOURCE_IP_PORT"
    assert [m["address"] for m in pool["members"]] == ["198.51.100.41", "198.51.100.42"]
    assert pool["healthmonitor"]["type"] == "TCP"
    assert owner_tag("u1") in body["tags"] and owner_tag("u1") in pool["members"][0]["tags"]


def test_the_monitor_and_the_members_subnet_are_sent_as_the_ovn_provider_needs_them() -> None:
    # ovn-octavia-provider finds a monitored member's Logical_Switch_Port on the network
    # of the member's subnet_id; OVN's failure_count is the monitor's max_retries_down.
    fast = HealthMonitor(delay=2, timeout=1, max_retries=1, max_retries_down=2)
    step = create(wanted(two_members(), PROJECT, fast), "ovn", {"vip_subnet_id": SUBNET},
                  "members-subnet", fast)  # fmt: skip

    pool = step.body["loadbalancer"]["listeners"][0]["default_pool"]  # type: ignore[index]
    assert {m["subnet_id"] for m in pool["members"]} == {"members-subnet"}
    monitor = pool["healthmonitor"]
    assert (monitor["delay"], monitor["timeout"], monitor["max_retries"],
            monitor["max_retries_down"]) == (2, 1, 1, 2)  # fmt: skip


def test_members_whose_monitor_fails_are_out_of_service_and_named() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR), down={"m2": "ERROR"})

    assert out_of_service(have) == ("m2 (198.51.100.42 port 8080) ERROR",)
    assert out_of_service(built(wanted(two_members(), PROJECT, MONITOR))) == ()


def test_a_tree_built_as_wanted_needs_no_call() -> None:
    want = wanted(two_members(), PROJECT, MONITOR)

    assert plan(want, built(want), SUBNET, MONITOR) == []


def test_one_member_removed_and_nothing_else_is_that_members_own_delete() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    want = wanted(spec("u1", "198.51.100.60", member("m1", "198.51.100.41")), PROJECT, MONITOR)

    [step] = plan(want, have, SUBNET, MONITOR)

    assert (step.method, step.path) == ("DELETE", "/lbaas/pools/pool-0/members/mem-m2")
    assert "0 in, 1 out" in step.what


def test_two_members_removed_are_one_batch_update_of_the_pool() -> None:
    three = spec("u1", "198.51.100.60", member("m1", "198.51.100.41"),
                 member("m2", "198.51.100.42"), member("m3", "198.51.100.43"))  # fmt: skip
    have = built(wanted(three, PROJECT, MONITOR))
    want = wanted(spec("u1", "198.51.100.60", member("m1", "198.51.100.41")), PROJECT, MONITOR)

    [step] = plan(want, have, SUBNET, MONITOR)

    assert (step.method, step.path) == ("PUT", "/lbaas/pools/pool-0/members")
    assert [m["address"] for m in step.body["members"]] == ["198.51.100.41"]  # type: ignore[index]
    assert "0 in, 2 out" in step.what


def test_a_member_octavia_is_deleting_counts_as_gone_and_is_not_asked_out_again() -> None:
    want = wanted(spec("u1", "198.51.100.60", member("m1", "198.51.100.41")), PROJECT, MONITOR)
    listeners = [{"id": "li-0", "protocol": "TCP", "protocol_port": 80,
                  "default_pool_id": "pool-0"}]  # fmt: skip
    pools = [{"id": "pool-0", "protocol": "TCP", "healthmonitor_id": "hm-0"}]
    members = {"pool-0": [
        {"id": "mem-m1", "name": "m1", "address": "198.51.100.41", "protocol_port": 8080,
         "provisioning_status": "ACTIVE"},
        {"id": "mem-m2", "name": "m2", "address": "198.51.100.42", "protocol_port": 8080,
         "provisioning_status": "PENDING_DELETE"},
    ]}  # fmt: skip
    lb = {"id": "lb-1", "provisioning_status": "ACTIVE", "vip_address": "198.51.100.60"}
    have = existing(lb, listeners, pools, members, [{"id": "hm-0", "type": "TCP"}])

    assert plan(want, have, SUBNET, MONITOR) == []


def test_a_member_whose_port_changed_is_one_batch_update() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    want = wanted(spec("u1", "198.51.100.60", member("m1", "198.51.100.41"),
                       member("m2", "198.51.100.42", 9090)), PROJECT, MONITOR)  # fmt: skip

    [step] = plan(want, have, SUBNET, MONITOR)

    assert step.method == "PUT" and "1 in, 1 out" in step.what


def test_a_listener_port_changed_is_deleted_with_its_pool_and_made_again() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    moved = spec("u1", "198.51.100.60", member("m1", "198.51.100.41"), port=8443)

    steps = plan(wanted(moved, PROJECT, MONITOR), have, SUBNET, MONITOR)

    assert [(s.method, s.path) for s in steps] == [
        ("DELETE", "/lbaas/listeners/li-0"),
        ("DELETE", "/lbaas/pools/pool-0"),
        ("POST", "/lbaas/listeners"),
    ]
    body = steps[2].body["listener"]  # type: ignore[index]
    assert (body["protocol_port"], body["loadbalancer_id"]) == (8443, "lb-1")


def test_a_monitor_turned_off_is_deleted() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    off = HealthMonitor(enabled=False)

    [step] = plan(wanted(two_members(), PROJECT, off), have, SUBNET, off)

    assert (step.method, step.path) == ("DELETE", "/lbaas/healthmonitors/hm-0")


def test_a_monitor_setting_changed_is_one_update_of_the_monitor() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    faster = HealthMonitor(delay=2, timeout=1, max_retries_down=2)

    [step] = plan(wanted(two_members(), PROJECT, faster), have, SUBNET, faster)

    assert (step.method, step.path) == ("PUT", "/lbaas/healthmonitors/hm-0")
    assert step.body == {"healthmonitor": {"delay": 2, "timeout": 1, "max_retries": 2,
                                           "max_retries_down": 2}}  # fmt: skip
    assert step.what == ("health monitor of tcp-80: delay 5 -> 2, timeout 3 -> 1, "
                         "max_retries_down 3 -> 2")  # fmt: skip


def test_a_vip_changed_deletes_the_load_balancer_to_build_it_again() -> None:
    have = built(wanted(two_members(), PROJECT, MONITOR))
    elsewhere = spec("u1", "198.51.100.70", member("m1", "198.51.100.41"))

    [step] = plan(wanted(elsewhere, PROJECT, MONITOR), have, SUBNET, MONITOR)

    assert step.path == "/lbaas/loadbalancers/lb-1?cascade=true"
    assert "198.51.100.70" in step.what


# -- refusals ---------------------------------------------------------------------------


def request(**spec_fields: Any) -> TenantLoadBalancer:
    return TenantLoadBalancer(
        metadata=ObjectMeta(name="web", namespace="tenant-acme"),
        spec=TenantLoadBalancerSpec(
            source=SourceService(cluster="c1", namespace="default", name="web"), **spec_fields
        ),
    )


def tenant(name: str = TENANT) -> Tenant:
    return Tenant(metadata=ObjectMeta(name=name), spec=TenantSpec(namespace=f"tenant-{name}"))


def test_a_plain_request_is_not_refused() -> None:
    assert load(config()).refuse(request(), tenant()) == []


def test_a_tenant_without_a_project_is_refused_naming_the_config_field() -> None:
    [why] = load(config()).refuse(request(), tenant("bolt"))

    assert "tenants.bolt.project" in why


def test_dual_stack_and_a_shared_address_are_refused_naming_the_field() -> None:
    dual = request(ip_families=[IPFamily.V4, IPFamily.V6],
                   ip_family_policy=IPFamilyPolicy.REQUIRE_DUAL_STACK, sharing_key="k")  # fmt: skip

    refused = load(config()).refuse(dual, tenant())

    assert [why.split(":")[0] for why in refused] == ["spec.ipFamilies", "spec.sharingKey"]


def test_source_ranges_are_refused_not_built_open() -> None:
    # The OVN provider refuses allowed_cidrs, and behind Octavia the tenant's kube-proxy
    # sees Octavia's connections to the nodePort: nobody would filter the clients.
    [why] = load(config()).refuse(request(load_balancer_source_ranges=["203.0.113.0/24"]),
                                  tenant())  # fmt: skip

    assert why.startswith("spec.loadBalancerSourceRanges: ")
    assert "use provider route" in why


# -- an Octavia that cannot be reached ---------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_unreachable_octavia_is_an_error_status_with_a_retry() -> None:
    provider = OctaviaProvider(read(noauth_config(f"http://127.0.0.1:{closed_port()}",
                                                  SUBNET, PROJECT)))  # fmt: skip

    status = await provider.ensure(two_members())

    assert status.phase is Phase.ERROR
    assert status.reason == "OctaviaUnreachable"
    assert "cannot be reached" in status.message and "127.0.0.1" in status.message
    assert status.retry_after == 5.0
    assert status.tenant_message == (
        "the load balancer could not be built or changed yet: the operator's load-balancer "
        "service is unreachable; retrying, ask the operator if this lasts"
    )
    assert (await provider.delete("acme/u1", "u1")).phase is Phase.ERROR  # type: ignore[union-attr]
    assert await provider.sweep({}) == []


async def test_a_tenant_without_a_project_is_an_error_status_at_ensure() -> None:
    status = await load(config()).ensure(spec("u1", "198.51.100.60", tenant="bolt"))

    assert (status.phase, status.reason) == (Phase.ERROR, "NoOctaviaProject")
    assert status.tenant_message is not None
    assert "ask the operator" in status.tenant_message
    assert "tenants.bolt" not in status.tenant_message  # the operator's config, not theirs


class Answering:
    """An Octavia that answers every call with `status` and a fault naming its insides."""

    def __init__(self, status: int) -> None:
        self.status = status

    def tagged(self, tag: str) -> list[dict[str, Any]]:
        fault = f"Octavia answered {self.status} to GET {OCTAVIA_URL}: project {PROJECT}"
        reason = "OctaviaUnavailable" if self.status >= 500 else "OctaviaRefused"
        raise OctaviaError(reason, fault, self.status)


@pytest.mark.parametrize(
    ("code", "said"),
    [(503, "answered with an error (HTTP 503)"), (403, "refused a change (HTTP 403)")],
)
async def test_an_octavia_error_answer_tells_the_tenant_its_kind_and_code_only(
    code: int, said: str
) -> None:
    provider = OctaviaProvider(read(config()), api=Answering(code))  # type: ignore[arg-type]

    status = await provider.ensure(two_members())

    assert status.phase is Phase.ERROR and OCTAVIA_URL in status.message
    assert status.tenant_message == (
        f"the load balancer could not be built or changed yet: the operator's load-balancer "
        f"service {said}; retrying, ask the operator if this lasts"
    )


# -- what an active load balancer reports ---------------------------------------------


class HeldTree:
    """An Octavia that holds one load balancer built as `want` asks (members `down` as
    given) and takes no call."""

    def __init__(self, want: Any, down: Mapping[str, str]) -> None:
        health = "DEGRADED" if down else "ONLINE"
        self.tree_held = replace(built(want, down=down), operating_status=health)
        self.lb = {"id": "lb-1", "provisioning_status": "ACTIVE", "operating_status": health,
                   "vip_address": want.vip_address}  # fmt: skip

    def tagged(self, tag: str) -> list[dict[str, Any]]:
        return [self.lb]

    def tree(self, lb: Mapping[str, Any], tag: str) -> Existing:
        return self.tree_held

    def call(self, step: Step) -> Any:
        raise AssertionError(f"no call expected: {step.what}")


async def ensured(request: Any, down: Mapping[str, str]) -> Any:
    parsed = read(config())
    api = HeldTree(wanted(request, PROJECT, parsed.health_monitor), down)
    return await OctaviaProvider(parsed, api=api).ensure(request)  # type: ignore[arg-type]


async def test_a_member_out_of_service_makes_the_load_balancer_degraded_naming_it() -> None:
    status = await ensured(two_members(), {"m1": "ERROR"})

    assert (status.phase, status.reason) == (Phase.ACTIVE, "Degraded")
    assert "operating status DEGRADED" in status.message
    assert (
        "out of service (their health monitor's probes fail): m1 (198.51.100.41 port 8080) ERROR"
        in status.message
    )


async def test_the_tenant_reads_which_of_its_backends_fail_and_none_of_octavias_ids() -> None:
    status = await ensured(two_members(), {"m1": "ERROR"})

    assert status.tenant_message == (
        "the load balancer serves 198.51.100.60 (80/TCP); 1 of 2 backends fail their health "
        "check and get no new connections: 198.51.100.41:8080 (m1); look at the Service's "
        "pods on those nodes"
    )
    for insides in ("lb-1", "mem-m1", "pool-0", PROJECT, SUBNET, "ovn", "Octavia"):
        assert insides not in status.tenant_message


async def test_every_member_in_service_is_active() -> None:
    status = await ensured(two_members(), {})

    assert (status.phase, status.reason) == (Phase.ACTIVE, "Active")
    assert "out of service" not in status.message
    assert status.tenant_message == "the load balancer serves 198.51.100.60 (80/TCP)"


async def test_a_health_check_node_port_not_probed_is_said() -> None:
    local = Listener(Protocol.TCP, 80, (member("m1", "198.51.100.41"),), health_check_port=32000)
    request = spec("u1", "198.51.100.60", port=81, extra=(local,))

    status = await ensured(request, {})

    assert "healthCheckNodePort 32000 is not probed" in status.message
    assert status.tenant_message is not None
    assert "healthCheckNodePort 32000 is not probed" in status.tenant_message
