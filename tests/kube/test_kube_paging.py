"""Lists in pages: the client follows the continue tokens (the informer's pages:
test_kube_informer)."""

from __future__ import annotations

from teapot_lb.kube.client import KubeClient, ObjectList
from teapot_lb.kube.resources import SERVICES, key_of
from teapot_lb.lab.fakeapi import FakeApiServer

NAMES = [f"s{i}" for i in range(8)]  # three pages of three at most


def seed(fake_api: FakeApiServer, *names: str) -> None:
    for name in names:
        fake_api.seed(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"port": 80}]},
            }
        )


async def pages_of(kube: KubeClient, limit: int) -> list[ObjectList]:
    return [page async for page in kube.list_pages(SERVICES, limit=limit)]


def keys(pages: list[ObjectList]) -> list[list[str]]:
    return [[key_of(obj) for obj in page.items] for page in pages]


async def test_list_pages_follows_the_continue_tokens(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    pages = await pages_of(kube, 3)
    assert keys(pages) == [
        ["default/s0", "default/s1", "default/s2"],
        ["default/s3", "default/s4", "default/s5"],
        ["default/s6", "default/s7"],
    ]
    assert [page.first for page in pages] == [True, False, False]
    assert len({page.resource_version for page in pages}) == 1
    assert fake_api.count_requests("GET", "/services") == 3
    assert all(obj["kind"] == "Service" for page in pages for obj in page.items)


async def test_list_collects_every_page(fake_api: FakeApiServer, kube: KubeClient) -> None:
    seed(fake_api, *NAMES)
    listed = await kube.list(SERVICES, limit=3)
    assert [key_of(obj) for obj in listed.items] == [f"default/{n}" for n in NAMES]
    assert listed.resource_version == (await kube.list(SERVICES, limit=0)).resource_version


async def test_an_expired_continue_token_starts_the_list_over(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    fake_api.faults.expire_continue_next()
    pages = await pages_of(kube, 3)
    # The first page, the 410, then the list again from its start, paged.
    assert [page.first for page in pages] == [True, True, False, False]
    assert keys(pages)[1:] == keys(await pages_of(kube, 3))
    listed = await kube.list(SERVICES, limit=3)
    assert len(listed.items) == len(NAMES)


async def test_a_second_expiry_reads_the_list_whole(
    fake_api: FakeApiServer, kube: KubeClient
) -> None:
    seed(fake_api, *NAMES)
    fake_api.faults.expire_continue_next(2)
    pages = await pages_of(kube, 3)
    assert [page.first for page in pages] == [True, True, True]
    assert [len(page.items) for page in pages] == [3, 3, len(NAMES)]
    assert "limit" not in fake_api.requests[-1].query
