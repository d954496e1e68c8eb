"""Paged lists (``limit``/``continue``) as the real API server serves them from etcd."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from teapot_lb.lab.fakeapi import FakeApiServer

SERVICES = "/api/v1/namespaces/default/services"


@pytest_asyncio.fixture
async def http(fake_api: FakeApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(fake_api.url) as session:
        yield session


async def get(http: aiohttp.ClientSession, path: str, **query: str) -> tuple[int, Any]:
    async with http.get(path, params=query) as resp:
        return resp.status, await resp.json()


def seed_services(
    fake_api: FakeApiServer, *names: str, labels: dict[str, str] | None = None
) -> None:
    for name in names:
        fake_api.seed(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
                "spec": {"ports": [{"port": 80}]},
            }
        )


def names(body: Any) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


async def test_a_limited_list_comes_in_pages_in_key_order(
    fake_api: FakeApiServer, http: aiohttp.ClientSession
) -> None:
    seed_services(fake_api, "e", "a", "d", "b", "c")
    status, first = await get(http, SERVICES, limit="2")
    assert status == 200 and names(first) == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 3
    status, second = await get(
        http, SERVICES, limit="2", **{"continue": first["metadata"]["continue"]}
    )
    assert status == 200 and names(second) == ["c", "d"]
    assert second["metadata"]["remainingItemCount"] == 1
    _, last = await get(http, SERVICES, limit="2", **{"continue": second["metadata"]["continue"]})
    assert names(last) == ["e"]
    assert "continue" not in last["metadata"] and "remainingItemCount" not in last["metadata"]
    _, whole = await get(http, SERVICES)
    assert names(whole) == ["a", "b", "c", "d", "e"] and "continue" not in whole["metadata"]


async def test_every_page_is_read_from_the_snapshot_of_the_first(
    fake_api: FakeApiServer, http: aiohttp.ClientSession
) -> None:
    seed_services(fake_api, "a", "b", "c", "d")
    _, first = await get(http, SERVICES, limit="2")
    version = first["metadata"]["resourceVersion"]
    before = fake_api.get("services", "c", "default")
    assert before is not None
    fake_api.put({**before, "metadata": {**before["metadata"], "labels": {"changed": "yes"}}})
    fake_api.remove("services", "d", "default")
    seed_services(fake_api, "bb")  # sorts into the pages still to come
    _, rest = await get(http, SERVICES, limit="2", **{"continue": first["metadata"]["continue"]})
    assert rest["metadata"]["resourceVersion"] == version
    assert names(rest) == ["c", "d"]
    assert rest["items"][0]["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    _, now = await get(http, SERVICES)
    assert names(now) == ["a", "b", "bb", "c"] and int(now["metadata"]["resourceVersion"]) > int(
        version
    )


async def test_a_selected_list_is_paged_without_a_remaining_count(
    fake_api: FakeApiServer, http: aiohttp.ClientSession
) -> None:
    seed_services(fake_api, "a", "b", "c", labels={"app": "x"})
    seed_services(fake_api, "other")
    _, first = await get(http, SERVICES, limit="2", labelSelector="app=x")
    assert names(first) == ["a", "b"] and "remainingItemCount" not in first["metadata"]
    _, rest = await get(
        http,
        SERVICES,
        limit="2",
        labelSelector="app=x",
        **{"continue": first["metadata"]["continue"]},
    )
    assert names(rest) == ["c"] and "continue" not in rest["metadata"]


@pytest.mark.parametrize("expire", ["fault", "compact", "too_many_tokens"])
async def test_an_expired_continue_token_gets_410_expired(
    fake_api: FakeApiServer, http: aiohttp.ClientSession, expire: str
) -> None:
    seed_services(fake_api, "a", "b", "c")
    _, first = await get(http, SERVICES, limit="1")
    token = first["metadata"]["continue"]
    if expire == "fault":
        fake_api.faults.expire_continue_next()
    elif expire == "compact":
        fake_api.faults.compact()
    else:
        for i in range(fake_api.continue_tokens):  # newer lists, each with a token
            seed_services(fake_api, f"z{i}")
            await get(http, SERVICES, limit="1")
    status, body = await get(http, SERVICES, limit="1", **{"continue": token})
    assert status == 410
    assert body["kind"] == "Status" and body["reason"] == "Expired" and body["code"] == 410
    assert "continue parameter is too old" in body["message"]
    # A new list (no token) is served as ever.
    status, again = await get(http, SERVICES, limit="1")
    assert status == 200 and names(again) == ["a"]


async def test_a_continue_token_is_good_only_for_its_query(
    fake_api: FakeApiServer, http: aiohttp.ClientSession
) -> None:
    seed_services(fake_api, "a", "b")
    _, first = await get(http, SERVICES, limit="1")
    status, body = await get(
        http, "/api/v1/services", limit="1", **{"continue": first["metadata"]["continue"]}
    )
    assert status == 410 and body["reason"] == "Expired"


async def test_a_malformed_continue_token_is_a_bad_request(
    fake_api: FakeApiServer, http: aiohttp.ClientSession
) -> None:
    status, body = await get(http, SERVICES, limit="1", **{"continue": "not-a-token"})
    assert status == 400 and body["reason"] == "BadRequest"
