"""The controller against the fake API server, over HTTP, with the real client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fakeapi.wait import until
from model.builders import NS, pool, service
from teapot_lb.controller import ANNOTATION_ALLOCATED_FROM, ControllerOptions
from teapot_lb.controller.kube_runner import KubeController, RunnerConfig, running
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.leader import LeaseConfig
from teapot_lb.kube.resources import ADDRESS_POOLS, NAMESPACES, SERVICES
from teapot_lb.lab.fakeapi import FakeApiServer

DEADLINE = 15.0


async def make_controller(
    fake_api: FakeApiServer,
    identity: str = "solo",
    *,
    elected: bool = False,
    release_on_exit: bool = True,
    options: ControllerOptions | None = None,
) -> KubeController:
    """A controller with its own client (its user agent names it in the request log)."""
    client = await connect(
        fake_api.kubeconfig_path, user_agent=f"teapot-lb/{identity}", request_timeout_s=5.0
    )
    lease = (
        LeaseConfig(
            "kube-system",
            "teapot-lb-controller",
            identity,
            lease_duration_s=1.5,
            renew_deadline_s=1.0,
            retry_period_s=0.2,
            release_on_exit=release_on_exit,
        )
        if elected
        else None
    )
    config = RunnerConfig(
        options=options or ControllerOptions(), lease=lease, pool_status_delay_s=0.1
    )
    return KubeController(client, config, max_backoff_s=0.5)


@contextlib.asynccontextmanager
async def controller(
    fake_api: FakeApiServer, identity: str = "solo", **kwargs: Any
) -> AsyncIterator[KubeController]:
    runner = await make_controller(fake_api, identity, **kwargs)
    try:
        async with running(runner):
            yield runner
    finally:
        await runner.client.close()


def seed_config_namespace(fake_api: FakeApiServer) -> None:
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})


def ips_of(fake_api: FakeApiServer, name: str, namespace: str = "default") -> list[str]:
    obj = fake_api.get("services", name, namespace)
    if obj is None:
        return []
    ingress = (obj.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return [entry["ip"] for entry in ingress if "ip" in entry]


def events_of(fake_api: FakeApiServer, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in fake_api.list("events")
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


async def create(kube: KubeClient, *documents: dict[str, Any]) -> None:
    for doc in documents:
        resource = SERVICES if doc["kind"] == "Service" else ADDRESS_POOLS
        await kube.create(resource, doc)


async def assigned(fake_api: FakeApiServer, *names: str, within: float = DEADLINE) -> None:
    await until(
        lambda: all(ips_of(fake_api, n) for n in names), within, f"IPs for {', '.join(names)}"
    )


async def test_a_created_service_gets_an_ip_annotation_and_event(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))
    async with controller(fake_api):
        await create(kube, service("web"))
        await assigned(fake_api, "web")
        assert ips_of(fake_api, "web") == ["192.0.2.0"]
        await until(lambda: events_of(fake_api, "web", "IPAllocated"), DEADLINE, "event")
        svc = fake_api.get("services", "web", "default")
        assert svc is not None
        assert svc["metadata"]["annotations"][ANNOTATION_ALLOCATED_FROM] == "blue"
        await until(
            lambda: (
                (fake_api.get("addresspools", "blue", NS) or {})
                .get("status", {})
                .get("assignedIPv4")
                == 1
            ),
            DEADLINE,
            "pool status counts the assignment",
        )


async def test_requested_ip_requested_pool_and_dual_stack(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(
        kube,
        pool("v4", "192.0.2.0/28"),
        pool("dual", "198.51.100.0/28", "2001:db8::/124", autoAssign=False),
    )
    async with controller(fake_api):
        await create(kube, service("pinned", ips="192.0.2.9"), service("named", pool="dual"))
        await assigned(fake_api, "pinned", "named")
        await create(
            kube,
            service(
                "both",
                pool="dual",
                ipFamilyPolicy="RequireDualStack",
                ipFamilies=["IPv4", "IPv6"],
            ),
        )
        await assigned(fake_api, "pinned", "named", "both")
        assert ips_of(fake_api, "pinned") == ["192.0.2.9"]
        assert ips_of(fake_api, "named") == ["198.51.100.0"]
        assert ips_of(fake_api, "both") == ["198.51.100.1", "2001:db8::1"]


async def test_sharing_key_shares_an_ip_and_a_port_clash_is_refused_with_an_event(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))
    async with controller(fake_api):
        await create(
            kube,
            service("dns-tcp", "53", ips="192.0.2.5", sharing_key="dns"),
            service("dns-udp", "53/UDP", ips="192.0.2.5", sharing_key="dns"),
        )
        await assigned(fake_api, "dns-tcp", "dns-udp")
        await create(kube, service("clash", "53", ips="192.0.2.5", sharing_key="dns"))
        await until(lambda: events_of(fake_api, "clash", "AllocationFailed"), DEADLINE, "refusal")
        (event,) = events_of(fake_api, "clash", "AllocationFailed")
        assert event["type"] == "Warning" and "PortConflict" in event["message"]
        assert ips_of(fake_api, "clash") == []
        assert ips_of(fake_api, "dns-tcp") == ips_of(fake_api, "dns-udp") == ["192.0.2.5"]


async def test_a_deleted_or_shrunk_pool_moves_its_services_with_an_event(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(
        kube,
        pool("first", "192.0.2.0/30", serviceAllocation={"priority": 1}),
        pool("second", "198.51.100.0/28", serviceAllocation={"priority": 2}),
    )
    async with controller(fake_api):
        await create(kube, service("a"), service("b"))
        await assigned(fake_api, "a", "b")
        assert sorted(ips_of(fake_api, "a") + ips_of(fake_api, "b")) == [
            "192.0.2.0",
            "192.0.2.1",
        ]
        # Shrink "first" to one address: exactly one Service has to move.
        await kube.patch(
            ADDRESS_POOLS, "first", {"spec": {"addresses": ["192.0.2.0/32"]}}, namespace=NS
        )
        await until(
            lambda: (
                sorted(ips_of(fake_api, "a") + ips_of(fake_api, "b"))
                == ["192.0.2.0", "198.51.100.0"]
            ),
            DEADLINE,
            "one Service moved to the second pool",
        )
        moved = "a" if ips_of(fake_api, "a") == ["198.51.100.0"] else "b"
        await until(lambda: events_of(fake_api, moved, "IPChanged"), DEADLINE, "IPChanged")
        assert "PoolGone" in events_of(fake_api, moved, "IPChanged")[0]["message"]
        # Delete "first": the other Service moves too.
        await kube.delete(ADDRESS_POOLS, "first", NS)
        await until(
            lambda: (
                sorted(ips_of(fake_api, "a") + ips_of(fake_api, "b"))
                == ["198.51.100.0", "198.51.100.1"]
            ),
            DEADLINE,
            "both in the second pool",
        )


async def test_namespace_labels_steer_new_assignments_and_valid_ips_are_kept(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    await create(
        kube,
        pool(
            "gold",
            "203.0.113.0/28",
            serviceAllocation={
                "priority": 1,
                "namespaceSelectors": [{"matchLabels": {"tier": "gold"}}],
            },
        ),
        pool("common", "192.0.2.0/28", serviceAllocation={"priority": 2}),
    )
    async with controller(fake_api) as runner:
        await create(kube, service("web", namespace="shop"))
        await until(lambda: ips_of(fake_api, "web", "shop") == ["192.0.2.0"], DEADLINE)
        await kube.patch(NAMESPACES, "shop", {"metadata": {"labels": {"tier": "gold"}}})
        # Still allowed in "common": a valid IP is kept (stability) ...
        await until(lambda: runner.queue is not None and runner.queue.pending == 0, DEADLINE)
        assert ips_of(fake_api, "web", "shop") == ["192.0.2.0"]
        # ... and a new Service there now gets a gold address.
        await create(kube, service("api", namespace="shop"))
        await until(lambda: ips_of(fake_api, "api", "shop") == ["203.0.113.0"], DEADLINE)
        await until(
            lambda: runner.metrics.pool_in_use.labels("gold", "IPv4")._value.get() == 1,
            DEADLINE,
            "pool metrics updated",
        )
        assert runner.metrics.pool_size.labels("gold", "IPv4")._value.get() == 16


async def test_a_deleted_services_ip_is_given_to_the_next_one(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("one", "192.0.2.7/32"))
    async with controller(fake_api):
        await create(kube, service("first"))
        await assigned(fake_api, "first")
        await create(kube, service("second"))
        await until(lambda: events_of(fake_api, "second", "AllocationFailed"), DEADLINE, "full")
        await kube.delete(SERVICES, "first", "default")
        await assigned(fake_api, "second")
        assert ips_of(fake_api, "second") == ["192.0.2.7"]


async def test_a_restarted_controller_keeps_every_ip(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/27"))
    names = [f"s{i}" for i in range(12)]
    async with controller(fake_api, "before"):
        await create(kube, *(service(n) for n in names))
        await assigned(fake_api, *names)
        before = {n: ips_of(fake_api, n) for n in names}
    # Make the old holders look "newer" than a fresh Service by deleting one in between.
    await kube.delete(SERVICES, "s0", "default")
    async with controller(fake_api, "after") as runner:
        await create(kube, service("late"))
        await assigned(fake_api, "late")
        await until(lambda: runner.queue is not None and runner.queue.pending == 0, DEADLINE)
        after = {n: ips_of(fake_api, n) for n in names[1:]}
    assert after == {n: before[n] for n in names[1:]}
    assert ips_of(fake_api, "late") == before["s0"]  # the only free one below the others


async def test_of_two_controllers_only_the_leader_writes_and_the_other_takes_over(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))

    def writes_by(identity: str) -> int:
        return sum(
            1
            for r in fake_api.requests
            if r.user_agent == f"teapot-lb/{identity}"
            and r.method in ("PATCH", "PUT")
            and "/services/" in r.path
        )

    alpha = await make_controller(fake_api, "alpha", elected=True, release_on_exit=False)
    alpha_task = asyncio.create_task(alpha.run())
    try:
        await until(lambda: alpha.is_leader, DEADLINE, "alpha leads")
        async with controller(fake_api, "beta", elected=True) as beta:
            await until(lambda: beta.synced, DEADLINE, "beta synced")
            await create(kube, service("one"), service("two"))
            await assigned(fake_api, "one", "two")
            assert writes_by("alpha") >= 2 and writes_by("beta") == 0
            assert not beta.is_leader
            # alpha crashes, leaving its lease to expire: beta takes over and writes.
            alpha_task.cancel()
            await until(lambda: beta.is_leader, DEADLINE, "beta takes over")
            await create(kube, service("three"))
            await assigned(fake_api, "three")
            assert writes_by("beta") >= 1
            ips = [ips_of(fake_api, n)[0] for n in ("one", "two", "three")]
            assert len(set(ips)) == 3
    finally:
        alpha_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await alpha_task
        await alpha.client.close()


async def test_a_leader_whose_lease_is_taken_stops_writing_at_once(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))
    async with controller(fake_api, "alpha", elected=True) as alpha:
        await until(lambda: alpha.is_leader and alpha.queue is not None, DEADLINE, "leads")
        lease = fake_api.get("leases", "teapot-lb-controller", "kube-system")
        assert lease is not None
        # Someone else holds the lease now, for an hour.
        lease["spec"] = {
            **lease["spec"],
            "holderIdentity": "intruder",
            "leaseDurationSeconds": 3600,
        }
        fake_api.put(lease)
        await until(lambda: not alpha.is_leader and alpha.queue is None, DEADLINE, "stepped down")
        assert alpha.metrics.leader._value.get() == 0
        await create(kube, service("late"))
        await until(lambda: alpha.store.view().services.get("default/late"), DEADLINE, "seen")
        assert ips_of(fake_api, "late") == []  # no worker left to write it


async def test_deletions_missed_during_a_compacted_watch_gap_leak_no_ip(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("pair", "192.0.2.8/31"))
    async with controller(fake_api) as runner:
        await create(kube, service("a"), service("b"))
        await assigned(fake_api, "a", "b")
        lists_before = runner.informers[next(iter(runner.informers))].lists
        # In one step (no await): watches drop, both Services go, history is compacted.
        fake_api.faults.drop_watches()
        fake_api.delete("services", "a", "default")
        fake_api.delete("services", "b", "default")
        fake_api.faults.compact()
        await until(
            lambda: runner.informers[next(iter(runner.informers))].lists > lists_before,
            DEADLINE,
            "re-list after 410",
        )
        await create(kube, service("c"), service("d"))
        await assigned(fake_api, "c", "d")
        assert sorted(ips_of(fake_api, "c") + ips_of(fake_api, "d")) == [
            "192.0.2.8",
            "192.0.2.9",
        ]


async def test_status_conflicts_are_retried(fake_api: FakeApiServer, kube: KubeClient) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/28"))
    fake_api.faults.conflict_next(3, path_contains="/services/web/status")
    async with controller(fake_api):
        await create(kube, service("web"))
        await assigned(fake_api, "web")
    conflicts = [
        r for r in fake_api.requests if r.status == 409 and r.path.endswith("/services/web/status")
    ]
    assert len(conflicts) == 3
    assert ips_of(fake_api, "web") == ["192.0.2.0"]


async def test_an_invalid_pool_that_slipped_in_gets_a_condition_and_the_rest_works(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    # Created without the webhook: one does not parse, one overlaps a good pool.
    await create(
        kube,
        pool("good", "192.0.2.0/28"),
        pool("overlap", "192.0.2.8/29"),
        pool("typo", "192.0.2.300/32"),
    )
    async with controller(fake_api):
        await create(kube, service("web"))
        await assigned(fake_api, "web")
        for name, words in (("overlap", "overlaps AddressPool 'good'"), ("typo", "192.0.2.300")):

            def condition(name: str = name) -> dict[str, Any]:
                obj = fake_api.get("addresspools", name, NS) or {}
                conditions = obj.get("status", {}).get("conditions") or [{}]
                return dict(conditions[0])

            await until(lambda: condition().get("status") == "False", DEADLINE, f"{name} invalid")
            assert words in condition()["message"]
            assert condition()["reason"] == "InvalidConfiguration"
            await until(
                lambda name=name: events_of(fake_api, name, "InvalidConfiguration"),  # type: ignore[misc]
                DEADLINE,
                f"event on {name}",
            )
        assert ips_of(fake_api, "web") == ["192.0.2.0"]


async def test_a_failing_api_server_is_survived_without_duplicate_ips(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed_config_namespace(fake_api)
    await create(kube, pool("blue", "192.0.2.0/27"))
    async with controller(fake_api):
        await create(kube, *(service(f"early{i}") for i in range(5)))
        await assigned(fake_api, *(f"early{i}" for i in range(5)))
        fake_api.faults.fail_for(1.5, code=500)
        fake_api.faults.drop_watches()
        for i in range(10):  # created behind the controller's back while it sees 500s
            fake_api.seed(service(f"late{i}"))
        await asyncio.sleep(0)  # let the failure window start before waiting
        names = [f"early{i}" for i in range(5)] + [f"late{i}" for i in range(10)]
        await assigned(fake_api, *names, within=30.0)
        ips = [ip for n in names for ip in ips_of(fake_api, n)]
        assert len(ips) == len(set(ips)) == 15
    assert any(r.status == 500 for r in fake_api.requests)
