"""The fake API server's token -> namespace authorization subset, through our client."""

from __future__ import annotations

from pathlib import Path

import pytest

from teapot_lb.kube.client import connect
from teapot_lb.kube.errors import ApiStatusError
from teapot_lb.kube.resources import NODES, SERVICES
from teapot_lb.lab.fakeapi import FakeApiServer


def service(name: str, namespace: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"ports": [{"port": 80}]}}


async def test_a_namespace_token_works_in_its_namespace_only(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    fake_api.add_token("fake-token")
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mine"}})
    fake_api.add_token("narrow", ["mine"])
    path = fake_api.write_kubeconfig(tmp_path / "narrow", namespace="mine", token="narrow")
    async with await connect(path, request_timeout_s=5.0) as narrow:
        await narrow.create(SERVICES, service("web", "mine"))
        assert [
            s["metadata"]["name"] for s in (await narrow.list(SERVICES, namespace="mine")).items
        ] == ["web"]
        for attempt in (
            narrow.create(SERVICES, service("web", "default")),
            narrow.list(SERVICES),
            narrow.list(NODES),
            narrow.get(SERVICES, "kubernetes", "default"),
        ):
            with pytest.raises(ApiStatusError) as refused:
                await attempt
            assert refused.value.code == 403
    async with await connect(fake_api.kubeconfig_path, request_timeout_s=5.0) as admin:
        assert len((await admin.list(SERVICES)).items) == 1


async def test_an_unknown_token_is_unauthorized_once_tokens_are_on(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    fake_api.add_token("fake-token")
    path = fake_api.write_kubeconfig(tmp_path / "other", token="guess")
    async with await connect(path, request_timeout_s=5.0) as guess:
        with pytest.raises(ApiStatusError) as refused:
            await guess.list(SERVICES, namespace="default")
    assert refused.value.code == 401
