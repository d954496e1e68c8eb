"""KubeClient verbs and error mapping, through the real client against the fake server."""

from __future__ import annotations

from pathlib import Path

import pytest

from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import AlreadyExists, Conflict, Gone, NotFound, Unreachable
from teapot_lb.kube.resources import (
    ADDRESS_POOLS,
    ENDPOINT_SLICES,
    LEASES,
    NAMESPACES,
    SERVICES,
    key_of,
    object_key,
    split_key,
)
from teapot_lb.lab.fakeapi import FakeApiServer


async def test_create_get_list_across_namespaces(fake_api: FakeApiServer, kube: KubeClient) -> None:
    await kube.create(NAMESPACES, {"metadata": {"name": "team-a"}})
    for ns in ("default", "team-a"):
        await kube.create(SERVICES, {"metadata": {"name": "s", "namespace": ns}, "spec": {}})
    everywhere = await kube.list(SERVICES)
    assert sorted(key_of(o) for o in everywhere.items) == ["default/s", "team-a/s"]
    assert int(everywhere.resource_version) > 0
    one = await kube.list(SERVICES, namespace="team-a")
    assert [key_of(o) for o in one.items] == ["team-a/s"]
    got = await kube.get(SERVICES, "s", "team-a")
    assert got["kind"] == "Service" and got["apiVersion"] == "v1"


async def test_endpoint_slices_and_leases_use_their_typed_apis(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    slice_ = {
        "metadata": {"name": "web-abc", "namespace": "default", "labels": {"svc": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["192.0.2.7"], "conditions": {"ready": True}}],
    }
    await kube.create(ENDPOINT_SLICES, slice_)
    listed = await kube.list(ENDPOINT_SLICES, label_selector="svc=web")
    assert listed.items[0]["endpoints"][0]["addresses"] == ["192.0.2.7"]
    await kube.create(LEASES, {"metadata": {"name": "l", "namespace": "default"}, "spec": {}})
    assert fake_api.count_requests("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases")


async def test_errors_map_to_our_exception_classes(kube: KubeClient) -> None:
    with pytest.raises(NotFound):
        await kube.get(SERVICES, "nope", "default")
    created = await kube.create(SERVICES, {"metadata": {"name": "s", "namespace": "default"}})
    with pytest.raises(AlreadyExists):
        await kube.create(SERVICES, {"metadata": {"name": "s", "namespace": "default"}})
    await kube.patch(SERVICES, "s", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    with pytest.raises(Conflict):
        await kube.replace(SERVICES, created)
    with pytest.raises(Conflict):
        await kube.delete(
            SERVICES, "s", "default", resource_version=created["metadata"]["resourceVersion"]
        )


async def test_watch_from_compacted_history_raises_gone(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    listed = await kube.list(SERVICES)
    await kube.create(SERVICES, {"metadata": {"name": "s", "namespace": "default"}})
    fake_api.faults.compact()
    with pytest.raises(Gone):
        async for _ in kube.watch(SERVICES, resource_version=listed.resource_version):
            pass


async def test_json_patch_on_custom_resource(fake_api: FakeApiServer, kube: KubeClient) -> None:
    await kube.create(
        ADDRESS_POOLS, {"metadata": {"name": "p", "namespace": "default"}, "spec": {"a": 1}}
    )
    patched = await kube.patch(
        ADDRESS_POOLS, "p", [{"op": "replace", "path": "/spec/a", "value": 2}], namespace="default"
    )
    assert patched["spec"] == {"a": 2}


async def test_unreachable_server_raises_unreachable(fake_api: FakeApiServer) -> None:
    client = await connect(fake_api.kubeconfig_path, request_timeout_s=2.0)
    try:
        await fake_api.stop()
        with pytest.raises(Unreachable):
            await client.list(SERVICES)
    finally:
        await client.close()


def test_keys_round_trip() -> None:
    assert split_key("ns/name") == ("ns", "name")
    assert split_key("node1") == (None, "node1")
    assert split_key(object_key("ns", "name")) == ("ns", "name")
    assert key_of({"metadata": {"name": "n"}}) == "n"


async def test_connect_takes_the_namespace_of_the_kubeconfig_context(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    path = fake_api.write_kubeconfig(tmp_path / "kc-team", namespace="team-a")
    async with await connect(path) as client:
        assert client.namespace == "team-a"
