"""The real control plane harness itself: our client against kube-apiserver v1.36, RBAC
identities, 410 after a compaction, paged lists, and the forwarder into a node's
namespace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator

import pytest

from needs import require_kube, require_root
from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.informer import Informer
from teapot_lb.kube.resources import LEASES, NAMESPACES
from teapot_lb.lab.kubeplane import ControlPlane, forward_into
from teapot_lb.lab.netns import in_netns
from teapot_lb.lab.wait import wait_for
from teapot_lb.netlab import Topology


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def test_admin_client_lists_and_writes(kube_plane: ControlPlane) -> None:
    ns = _name("smoke")
    kube_plane.kubectl("create", "namespace", ns)
    async with await connect(kube_plane.admin_kubeconfig) as client:
        names = {o["metadata"]["name"] for o in (await client.list(NAMESPACES)).items}
    assert ns in names


async def test_a_user_without_rbac_is_refused(kube_plane: ControlPlane) -> None:
    kubeconfig = kube_plane.user_kubeconfig("nobody")
    async with await connect(kubeconfig) as client:
        with pytest.raises(ApiStatusError) as refused:
            await client.list(NAMESPACES)
    assert refused.value.code == 403


def test_service_account_token_authenticates(kube_plane: ControlPlane) -> None:
    ns = _name("sa")
    kube_plane.kubectl("create", "namespace", ns)
    kube_plane.kubectl("create", "serviceaccount", "probe", "-n", ns)
    token = kube_plane.service_account_token(ns, "probe")
    kubeconfig = kube_plane.token_kubeconfig(token, f"probe-{ns}", namespace=ns)

    async def whoami() -> str:
        async with await connect(kubeconfig) as client:
            with pytest.raises(ApiStatusError) as refused:
                await client.list(NAMESPACES)
            return str(refused.value)

    message = asyncio.run(whoami())
    assert f"system:serviceaccount:{ns}:probe" in message


@pytest.fixture(scope="module")
def uncached_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of this module's own, without the watch cache: watches and the
    pages of a list are then served by etcd, so a compaction expires them (each test
    compacts it, in a namespace of its own)."""
    require_kube()
    with ControlPlane(
        tmp_path_factory.mktemp("uncached"),
        controller_manager=False,
        apiserver_args=["--watch-cache=false"],
    ) as plane:
        yield plane


def test_compaction_expires_a_watch_with_410(uncached_plane: ControlPlane) -> None:
    plane = uncached_plane
    ns = _name("compact")
    plane.kubectl("create", "namespace", ns)
    doc = json.loads(plane.kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/configmaps"))
    old = doc["metadata"]["resourceVersion"]
    for i in range(3):
        plane.kubectl("create", "configmap", f"c{i}", "-n", ns)
    assert plane.etcd.compact() > int(old)
    watch = plane.kubectl(
        "get", "--raw",
        f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={old}&timeoutSeconds=2",
        check=False,
    )  # fmt: skip
    assert '"code":410' in watch.replace(" ", "")


def _lease(ns: str, name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {}}


async def test_an_informer_lists_the_real_apiserver_in_pages(kube_plane: ControlPlane) -> None:
    ns = _name("paged")
    kube_plane.kubectl("create", "namespace", ns)
    names = sorted(f"l{i}" for i in range(7))
    async with await connect(kube_plane.admin_kubeconfig) as client:
        for name in names:
            await client.create(LEASES, _lease(ns, name))
        # What the real server says of a page: a continue token and the count left.
        first = json.loads(kube_plane.kubectl(
            "get", "--raw", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases?limit=3"
        ))  # fmt: skip
        assert first["metadata"]["continue"] and first["metadata"]["remainingItemCount"] == 4
        pages = [p async for p in client.list_pages(LEASES, namespace=ns, limit=3)]
        assert [len(p.items) for p in pages] == [3, 3, 1]
        assert [p.first for p in pages] == [True, False, False]
        assert len({p.resource_version for p in pages}) == 1
        informer = Informer(client, LEASES, namespace=ns, page_size=3)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.wait_synced(), 30)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert sorted(informer.list_keys()) == [f"{ns}/{name}" for name in names]
    assert informer.lists == 1 and informer.errors == 0


async def test_a_compacted_continue_token_starts_the_list_over(
    uncached_plane: ControlPlane,
) -> None:
    # Pages are read from etcd at the first page's revision: a compaction past it expires
    # the token (410 Expired).
    plane = uncached_plane
    ns = _name("expire")
    plane.kubectl("create", "namespace", ns)
    async with await connect(plane.admin_kubeconfig) as client:
        for name in ("a", "b", "c"):
            await client.create(LEASES, _lease(ns, name))
        pages = client.list_pages(LEASES, namespace=ns, limit=2)
        seen = [await anext(pages)]
        await client.create(LEASES, _lease(ns, "d"))
        plane.etcd.compact()
        seen += [page async for page in pages]
    got = [(p.first, [o["metadata"]["name"] for o in p.items]) for p in seen]
    # The first page, then the list again from a new snapshot (with the Lease made since).
    assert got == [(True, ["a", "b"]), (True, ["a", "b"]), (False, ["c", "d"])]


def test_forwarder_reaches_the_apiserver_from_a_namespace_and_cuts_it_off(
    kube_plane: ControlPlane,
) -> None:
    require_root()
    topo = Topology("kpf")
    try:
        host = topo.add_host("node")
        forwarder = forward_into(kube_plane, host.ns)
        kubeconfig = kube_plane.user_kubeconfig("teapot-admin", groups=["system:masters"],
                                                server=forwarder.server)  # fmt: skip

        def list_from_node(timeout: float) -> int:
            async def go() -> int:
                async with await connect(kubeconfig, request_timeout_s=timeout) as client:
                    return len((await client.list(NAMESPACES)).items)

            return in_netns(host.ns, lambda: asyncio.run(go()))

        assert list_from_node(10.0) > 0
        forwarder.set_mode("refuse")
        wait_for(
            lambda: _fails(lambda: list_from_node(2.0)),
            timeout=10.0,
            what="the node cut off from the apiserver",
        )
        forwarder.set_mode("pass")
        wait_for(lambda: not _fails(lambda: list_from_node(2.0)), timeout=10.0,
                 what="the node reaching the apiserver again")  # fmt: skip
    finally:
        topo.close()
        if "forwarder" in locals():
            forwarder.stop()


def _fails(fn: object) -> bool:
    try:
        fn()  # type: ignore[operator]
    except Exception:
        return True
    return False
