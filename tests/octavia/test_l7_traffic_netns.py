"""An Octavia HTTP listener with an L7 policy, through the gateway's data plane: the
objects the driver writes, translated as the gateway's control plane does, applied to a
real HAProxy in a lab namespace; requests reach the members Octavia's policy names.
(`teapot-lb gateway` wired to a cluster runs the same translation from the management
API's objects; this test feeds it the driver's objects directly.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from needs import require_binary, require_root
from octavia.builders import load_balancer, member, pool
from octavia.test_l7 import API_POOL, HOST, NAMESPACE, policy, rule, through_gateway
from teapot_lb.gateway.haproxy import HAProxy
from teapot_lb.lab.gateway_lab import GATEWAY, GatewayLab, gateway_lab
from teapot_lb.octavia import l7
from teapot_lb.octavia.tree import Mode, load_balancer_from_provider

pytestmark = [pytest.mark.root, pytest.mark.daemon, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lab(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[GatewayLab, Path]]:
    require_root()
    require_binary("haproxy", "curl")
    work = tmp_path_factory.mktemp("octl7")
    with gateway_lab(work, "octl7") as lab:
        backends = lab.start_backends(
            "http:web-a:198.51.100.2:8080",
            "http:web-b:198.51.100.3:8080",
            "http:api:198.51.100.4:9090",
        )
        try:
            yield lab, work
        finally:
            backends.terminate()
            backends.wait(timeout=10)


async def test_requests_reach_the_members_the_l7_policy_names(
    lab: tuple[GatewayLab, Path],
) -> None:
    net, work = lab
    d = load_balancer(
        pools=[
            pool([member(0, "198.51.100.2", 8080), member(1, "198.51.100.3", 8080)],
                 protocol="HTTP", hm=False),
            pool([member(2, "198.51.100.4", 9090)], pool_id=API_POOL, protocol="HTTP",
                 hm=False),
        ]
    )  # fmt: skip
    d["listeners"][0].update(
        protocol="HTTP",
        l7policies=[
            policy(1, "REDIRECT_TO_POOL", [rule(1, "HOST_NAME", "EQUAL_TO", HOST),
                                           rule(2, "PATH", "STARTS_WITH", "/api")],
                   redirect_pool_id=API_POOL),
        ],
    )  # fmt: skip
    lb = load_balancer_from_provider(d, Mode.ROUTE)
    assert l7.l7_refusals(lb) == []
    config = through_gateway(
        l7.gateway_objects(lb, NAMESPACE), gateway_ip=GATEWAY, nodeNetworks=["198.51.100.0/24"]
    ).config
    haproxy = HAProxy(work / "haproxy", wrap=net.gateway.exec_argv([]))
    try:
        applied = await haproxy.apply(config)
        assert applied.error is None, applied.error
        assert net.served_by("/api/v1", HOST) == "api"
        # the default pool: both members take requests (one random pick per request)
        seen = {net.served_by("/", HOST) for _ in range(20)}
        assert seen == {"web-a", "web-b"}
        assert net.curl("http://other.acme.example/", host="other.acme.example").code == 404
    finally:
        await haproxy.stop()
