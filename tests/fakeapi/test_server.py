"""The fake API server's semantics, exercised through the real kubernetes_asyncio client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiException

from teapot_lb.lab.fakeapi import FakeApiServer, custom_kind
from teapot_lb.lab.wait import wait_for_async

LB = ("lb.teapot.io", "v1alpha1")
MERGE = "application/merge-patch+json"


@pytest_asyncio.fixture
async def api(fake_api: FakeApiServer) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(fake_api.kubeconfig_path))
    try:
        yield api_client
    finally:
        await api_client.close()


def service(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}], **spec},
    }


def pool(name: str, cidr: str = "192.0.2.0/28") -> dict[str, Any]:
    return {
        "apiVersion": "lb.teapot.io/v1alpha1",
        "kind": "AddressPool",
        "metadata": {"name": name},
        "spec": {"addresses": [cidr]},
    }


def status_of(err: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(err.body)
    return body


async def raw(api: client.ApiClient, method: str, path: str, **kwargs: Any) -> Any:
    """One request through the client's own HTTP session; returns the decoded body."""
    resp = await api.rest_client.pool_manager.request(
        method, api.configuration.host + path, **kwargs
    )
    async with resp:
        return resp.status, await resp.json()


class WatchStream:
    """Reads a watch response line by line (as an informer would)."""

    def __init__(self, response: Any) -> None:
        self.response = response

    async def next(self, wait: float = 5.0) -> dict[str, Any] | None:
        line = await asyncio.wait_for(self.response.content.readline(), wait)
        return json.loads(line) if line else None

    async def next_of(self, *types: str, wait: float = 5.0) -> dict[str, Any]:
        while True:
            event = await self.next(wait)
            assert event is not None, "stream ended"
            if event["type"] in types:
                return event

    def close(self) -> None:
        self.response.release()


async def watch_services(api: client.ApiClient, **kwargs: Any) -> WatchStream:
    core = client.CoreV1Api(api)
    resp = await core.list_namespaced_service(
        "default", watch=True, _preload_content=False, **kwargs
    )
    return WatchStream(resp)


async def test_create_assigns_uid_generation_and_increasing_resource_versions(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    a = await core.create_namespaced_service("default", service("a"))
    b = await core.create_namespaced_service("default", service("b"))
    assert a.metadata.uid and b.metadata.uid and a.metadata.uid != b.metadata.uid
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    assert a.metadata.generation == 1
    assert a.metadata.creation_timestamp is not None
    listed = await core.list_namespaced_service("default")
    assert int(listed.metadata.resource_version) >= int(b.metadata.resource_version)
    assert [s.metadata.name for s in listed.items] == ["a", "b"]


async def test_create_twice_is_409_already_exists(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_service("default", service("a"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"


async def test_missing_object_is_404_with_status_body(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(api).read_namespaced_service("nope", "default")
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["details"]["name"] == "nope"


async def test_create_in_missing_namespace_is_404(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(api).create_namespaced_service("ghost", service("a"))
    assert err.value.status == 404


async def test_update_with_stale_resource_version_is_409_conflict(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    svc = await core.create_namespaced_service("default", service("a"))
    svc.spec.ports[0].port = 81
    await core.replace_namespaced_service("a", "default", svc)  # rv now stale in `svc`
    svc.spec.ports[0].port = 82
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_service("a", "default", svc)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"


async def test_patch_with_stale_resource_version_is_409_and_without_it_applies(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    svc = await core.create_namespaced_service("default", service("a"))
    old_rv = svc.metadata.resource_version
    await core.patch_namespaced_service("a", "default", {"metadata": {"labels": {"k": "1"}}})
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_service(
            "a",
            "default",
            {"metadata": {"resourceVersion": old_rv, "labels": {"k": "2"}}},
            _content_type=MERGE,
        )
    assert err.value.status == 409
    fresh = await core.read_namespaced_service("a", "default")
    assert fresh.metadata.labels == {"k": "1"}


async def test_generation_bumps_on_spec_change_only(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    await co.create_namespaced_custom_object(*LB, "default", "addresspools", pool("p"))
    labelled = await co.patch_namespaced_custom_object(
        *LB,
        "default",
        "addresspools",
        "p",
        {"metadata": {"labels": {"a": "b"}}},
        _content_type=MERGE,
    )
    assert labelled["metadata"]["generation"] == 1
    changed = await co.patch_namespaced_custom_object(
        *LB,
        "default",
        "addresspools",
        "p",
        {"spec": {"addresses": ["192.0.2.16/28"]}},
        _content_type=MERGE,
    )
    assert changed["metadata"]["generation"] == 2


async def test_noop_write_keeps_resource_version(api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    created = await co.create_namespaced_custom_object(*LB, "default", "addresspools", pool("p"))
    again = await co.replace_namespaced_custom_object(*LB, "default", "addresspools", "p", created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_custom_resource_put_without_resource_version_is_invalid(
    api: client.ApiClient,
) -> None:
    co = client.CustomObjectsApi(api)
    created = await co.create_namespaced_custom_object(*LB, "default", "addresspools", pool("p"))
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:
        await co.replace_namespaced_custom_object(*LB, "default", "addresspools", "p", created)
    assert err.value.status == 422


async def test_status_is_ignored_on_main_resource_and_spec_on_status(
    api: client.ApiClient,
) -> None:
    co = client.CustomObjectsApi(api)
    body = pool("p")
    body["status"] = {"assigned": 99}
    created = await co.create_namespaced_custom_object(*LB, "default", "addresspools", body)
    assert "status" not in created  # create drops status

    created["status"] = {"assigned": 1}
    created["spec"] = {"addresses": ["198.51.100.0/24"]}
    via_status = await co.replace_namespaced_custom_object_status(
        *LB, "default", "addresspools", "p", created
    )
    assert via_status["status"] == {"assigned": 1}
    assert via_status["spec"] == {"addresses": ["192.0.2.0/28"]}

    via_status["status"] = {"assigned": 7}
    via_status["spec"] = {"addresses": ["203.0.113.0/24"]}
    via_main = await co.replace_namespaced_custom_object(
        *LB, "default", "addresspools", "p", via_status
    )
    assert via_main["status"] == {"assigned": 1}
    assert via_main["spec"] == {"addresses": ["203.0.113.0/24"]}


async def test_service_status_patch_through_status_subresource(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
    ignored = await core.patch_namespaced_service("a", "default", ingress, _content_type=MERGE)
    assert not ignored.status or not ignored.status.load_balancer
    patched = await core.patch_namespaced_service_status(
        "a", "default", ingress, _content_type=MERGE
    )
    assert patched.status.load_balancer.ingress[0].ip == "192.0.2.10"


async def test_merge_patch_null_deletes_and_json_patch_applies_operations(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a", {"x": "1", "y": "2"}))
    merged = await core.patch_namespaced_service(
        "a", "default", {"metadata": {"labels": {"x": None}}}, _content_type=MERGE
    )
    assert merged.metadata.labels == {"y": "2"}
    patched = await core.patch_namespaced_service(
        "a",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/y", "value": "2"},
            {"op": "add", "path": "/metadata/labels/z", "value": "3"},
            {"op": "replace", "path": "/spec/ports/0/port", "value": 443},
        ],
    )
    assert patched.metadata.labels == {"y": "2", "z": "3"}
    assert patched.spec.ports[0].port == 443


async def test_failed_json_patch_test_is_422_and_changes_nothing(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    svc = await core.create_namespaced_service("default", service("a", {"y": "2"}))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_service(
            "a",
            "default",
            [
                {"op": "add", "path": "/metadata/labels/z", "value": "3"},
                {"op": "test", "path": "/metadata/labels/y", "value": "nope"},
            ],
        )
    assert err.value.status == 422
    again = await core.read_namespaced_service("a", "default")
    assert again.metadata.resource_version == svc.metadata.resource_version


async def test_json_patch_resource_version_test_gives_conflict_semantics(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_service(
            "a",
            "default",
            [{"op": "replace", "path": "/metadata/resourceVersion", "value": "1"}],
        )
    assert err.value.status == 409


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web1", "web2"]),
        ("app==web", ["web1", "web2"]),
        ("app!=web", ["db", "plain"]),
        ("app in (web,db)", ["db", "web1", "web2"]),
        ("app notin (web)", ["db", "plain"]),
        ("tier", ["web1"]),
        ("!tier", ["db", "plain", "web2"]),
        ("app=web,!tier", ["web2"]),
    ],
)
async def test_label_selectors_select_like_the_api_server(
    api: client.ApiClient, selector: str, expected: list[str]
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("web1", {"app": "web", "tier": "f"}))
    await core.create_namespaced_service("default", service("web2", {"app": "web"}))
    await core.create_namespaced_service("default", service("db", {"app": "db"}))
    await core.create_namespaced_service("default", service("plain"))
    listed = await core.list_namespaced_service("default", label_selector=selector)
    assert sorted(s.metadata.name for s in listed.items) == expected


async def test_field_selectors_filter_and_unsupported_fields_are_400(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    await core.create_namespaced_service("default", service("b", type="ClusterIP"))
    by_name = await core.list_service_for_all_namespaces(field_selector="metadata.name=a")
    assert [s.metadata.name for s in by_name.items] == ["a"]
    by_type = await core.list_namespaced_service("default", field_selector="spec.type!=ClusterIP")
    assert [s.metadata.name for s in by_type.items] == ["a"]
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_service("default", field_selector="spec.ports=80")
    assert err.value.status == 400


async def test_delete_with_finalizer_marks_then_removing_last_finalizer_deletes(
    api: client.ApiClient,
) -> None:
    co = client.CustomObjectsApi(api)
    body = pool("p")
    body["metadata"]["finalizers"] = ["lb.teapot.io/a", "lb.teapot.io/b"]
    await co.create_namespaced_custom_object(*LB, "default", "addresspools", body)
    marked = await co.delete_namespaced_custom_object(*LB, "default", "addresspools", "p")
    assert marked["metadata"]["deletionTimestamp"]
    still = await co.get_namespaced_custom_object(*LB, "default", "addresspools", "p")
    assert still["metadata"]["finalizers"] == ["lb.teapot.io/a", "lb.teapot.io/b"]

    with pytest.raises(ApiException) as err:  # no new finalizers while deleting
        await co.patch_namespaced_custom_object(
            *LB,
            "default",
            "addresspools",
            "p",
            {"metadata": {"finalizers": ["lb.teapot.io/a", "lb.teapot.io/b", "x/c"]}},
            _content_type=MERGE,
        )
    assert err.value.status == 422

    await co.patch_namespaced_custom_object(
        *LB,
        "default",
        "addresspools",
        "p",
        {"metadata": {"finalizers": ["lb.teapot.io/b"]}},
        _content_type=MERGE,
    )
    await co.patch_namespaced_custom_object(
        *LB,
        "default",
        "addresspools",
        "p",
        {"metadata": {"finalizers": None}},
        _content_type=MERGE,
    )
    with pytest.raises(ApiException) as gone:
        await co.get_namespaced_custom_object(*LB, "default", "addresspools", "p")
    assert gone.value.status == 404


async def test_delete_precondition_on_resource_version(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_service(
            "a", "default", body={"preconditions": {"resourceVersion": "1"}}
        )
    assert err.value.status == 409


async def test_cluster_scoped_custom_kind_can_be_registered(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    fake_api.register_kind(
        custom_kind("lb.teapot.io", "v1alpha1", "tenants", "Tenant", namespaced=False)
    )
    co = client.CustomObjectsApi(api)
    body = {"apiVersion": "lb.teapot.io/v1alpha1", "kind": "Tenant", "metadata": {"name": "t1"}}
    await co.create_cluster_custom_object("lb.teapot.io", "v1alpha1", "tenants", body)
    got = await co.get_cluster_custom_object("lb.teapot.io", "v1alpha1", "tenants", "t1")
    assert "namespace" not in got["metadata"]
    assert fake_api.get("tenants", "t1") is not None


async def test_watch_from_resource_version_streams_later_changes(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("before"))
    listed = await core.list_namespaced_service("default")
    stream = await watch_services(api, resource_version=listed.metadata.resource_version)
    try:
        await core.create_namespaced_service("default", service("a"))
        await core.patch_namespaced_service("a", "default", {"metadata": {"labels": {"x": "1"}}})
        await core.delete_namespaced_service("a", "default")
        types = [(await stream.next_of("ADDED", "MODIFIED", "DELETED")) for _ in range(3)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in types] == [
            ("ADDED", "a"),
            ("MODIFIED", "a"),
            ("DELETED", "a"),
        ]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in types]
        assert rvs == sorted(rvs) and len(set(rvs)) == 3
    finally:
        stream.close()


async def test_watch_without_resource_version_starts_with_current_state(
    api: client.ApiClient,
) -> None:
    await client.CoreV1Api(api).create_namespaced_service("default", service("a"))
    stream = await watch_services(api)
    try:
        first = await stream.next_of("ADDED")
        assert first["object"]["metadata"]["name"] == "a"
    finally:
        stream.close()


async def test_watch_from_compacted_history_gets_410_error_event(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    listed = await core.list_namespaced_service("default")
    await core.create_namespaced_service("default", service("a"))
    fake_api.faults.compact()
    stream = await watch_services(api, resource_version=listed.metadata.resource_version)
    try:
        event = await stream.next()
        assert event is not None and event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
        assert await stream.next() is None
    finally:
        stream.close()


class TestSmallHistory:
    @pytest.fixture
    def fake_api_options(self) -> dict[str, Any]:
        return {"history_size": 3}

    async def test_bounded_history_expires_old_resource_versions(
        self, api: client.ApiClient
    ) -> None:
        core = client.CoreV1Api(api)
        listed = await core.list_namespaced_service("default")
        for i in range(5):
            await core.create_namespaced_service("default", service(f"s{i}"))
        stream = await watch_services(api, resource_version=listed.metadata.resource_version)
        try:
            event = await stream.next()
            assert event is not None and event["object"]["code"] == 410
        finally:
            stream.close()

    async def test_recent_versions_are_still_served(self, api: client.ApiClient) -> None:
        core = client.CoreV1Api(api)
        for i in range(5):
            created = await core.create_namespaced_service("default", service(f"s{i}"))
        await core.create_namespaced_service("default", service("last"))
        stream = await watch_services(api, resource_version=created.metadata.resource_version)
        try:
            event = await stream.next()
            assert event is not None and event["type"] == "ADDED"
            assert event["object"]["metadata"]["name"] == "last"
        finally:
            stream.close()


async def test_watch_sends_bookmarks_with_current_resource_version(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_service("default", service("a"))
    stream = await watch_services(
        api, resource_version=created.metadata.resource_version, allow_watch_bookmarks=True
    )
    try:
        bookmark = await stream.next_of("BOOKMARK")
        rv = int(bookmark["object"]["metadata"]["resourceVersion"])
        assert rv >= int(created.metadata.resource_version)
    finally:
        stream.close()


async def test_watch_ends_after_timeout_seconds(api: client.ApiClient) -> None:
    stream = await watch_services(api, timeout_seconds=1)
    try:
        assert await stream.next(wait=10) is None
    finally:
        stream.close()


async def test_selector_watch_turns_label_changes_into_added_and_deleted(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    created = await core.create_namespaced_service("default", service("a"))
    stream = await watch_services(
        api, resource_version=created.metadata.resource_version, label_selector="app=web"
    )
    try:
        await core.patch_namespaced_service(
            "a", "default", {"metadata": {"labels": {"app": "web"}}}
        )
        assert (await stream.next_of("ADDED", "MODIFIED", "DELETED"))["type"] == "ADDED"
        await core.patch_namespaced_service("a", "default", {"metadata": {"labels": {"app": "db"}}})
        assert (await stream.next_of("ADDED", "MODIFIED", "DELETED"))["type"] == "DELETED"
    finally:
        stream.close()


async def test_fault_drop_watches_ends_open_streams(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    stream = await watch_services(api)
    try:
        await wait_for_async(lambda: fake_api.open_watches == 1, within=5, what="one open watch")
        assert fake_api.faults.drop_watches() == 1
        assert await stream.next() is None
    finally:
        stream.close()


async def test_fault_fail_next_answers_500_then_recovers(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    fake_api.faults.fail_next(2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await core.list_namespaced_service("default")
        assert err.value.status == 500
    await core.list_namespaced_service("default")


async def test_fault_fail_for_filters_by_method(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    fake_api.faults.fail_for(30, method="POST")
    await core.list_namespaced_service("default")
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_service("default", service("a"))
    assert err.value.status == 500
    fake_api.faults.clear()
    await core.create_namespaced_service("default", service("a"))


async def test_fault_delay_holds_the_response(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    fake_api.faults.delay(5, count=1)
    with pytest.raises(asyncio.TimeoutError):
        await core.list_namespaced_service("default", _request_timeout=0.3)
    await core.list_namespaced_service("default", _request_timeout=5)


async def test_seed_helpers_bypass_http_and_keep_status(fake_api: FakeApiServer) -> None:
    seeded = fake_api.seed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.5"}]},
        }
    )
    assert seeded["status"]["addresses"][0]["address"] == "192.0.2.5"
    got = fake_api.get("nodes", "n1")
    assert got is not None and got["metadata"]["uid"] == seeded["metadata"]["uid"]
    assert [n["metadata"]["name"] for n in fake_api.list("nodes")] == ["n1"]


async def test_builtin_list_items_omit_kind_like_the_real_server(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service("default", service("a"))
    status, body = await raw(api, "GET", "/api/v1/namespaces/default/services")
    assert status == 200 and body["kind"] == "ServiceList"
    assert "kind" not in body["items"][0]


async def test_service_create_applies_server_defaults(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    single = await core.create_namespaced_service("default", service("a"))
    assert single.spec.ip_families == ["IPv4"] and single.spec.ip_family_policy == "SingleStack"
    assert single.spec.ports[0].protocol == "TCP"
    assert single.spec.external_traffic_policy == "Cluster"
    dual = await core.create_namespaced_service(
        "default", service("b", ipFamilyPolicy="RequireDualStack")
    )
    assert dual.spec.ip_families == ["IPv4", "IPv6"]


async def test_invalid_object_name_is_422(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(api).create_namespaced_service("default", service("Bad_Name"))
    assert err.value.status == 422


async def test_generate_name_creates_unique_names(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body = service("")
    body["metadata"] = {"generateName": "web-"}
    a = await core.create_namespaced_service("default", body)
    b = await core.create_namespaced_service("default", body)
    assert a.metadata.name.startswith("web-") and a.metadata.name != b.metadata.name


async def test_remove_helper_deletes_despite_finalizers_and_emits_delete(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    body = service("a")
    body["metadata"]["finalizers"] = ["x.io/f"]
    created = await core.create_namespaced_service("default", body)
    stream = await watch_services(api, resource_version=created.metadata.resource_version)
    try:
        fake_api.remove("services", "a", "default")
        event = await stream.next_of("DELETED")
        assert event["object"]["metadata"]["name"] == "a"
        assert fake_api.get("services", "a", "default") is None
    finally:
        stream.close()


async def test_watch_of_a_client_that_went_away_is_closed(
    fake_api: FakeApiServer, api: client.ApiClient
) -> None:
    stream = await watch_services(api)
    await wait_for_async(lambda: fake_api.open_watches == 1, within=5, what="one open watch")
    stream.response.close()  # drop the connection without reading on
    await wait_for_async(lambda: fake_api.open_watches == 0, within=5, what="no open watch")


async def test_configuration_helper_reaches_the_server(fake_api: FakeApiServer) -> None:
    async with client.ApiClient(fake_api.configuration()) as api_client:
        namespaces = await client.CoreV1Api(api_client).list_namespace()
    names = [n.metadata.name for n in namespaces.items]
    assert "default" in names
    assert namespaces.items[0].status.phase == "Active"


async def test_every_custom_kind_of_the_registry_is_served(api: client.ApiClient) -> None:
    from teapot_lb.model.kinds import KINDS

    co = client.CustomObjectsApi(api)
    for r in (info.resource for info in KINDS if info.resource.custom):
        if r.namespaced:
            listed = await co.list_namespaced_custom_object(r.group, r.version, "default", r.plural)
        else:
            listed = await co.list_cluster_custom_object(r.group, r.version, r.plural)
        assert listed["kind"] == f"{r.kind}List", r
