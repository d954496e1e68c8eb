"""The provider agent finds the gateways by their Service's EndpointSlices in the
management cluster (teapot_lb.octavia.gateways): the pure mapping, and the list following
the slices through the fake management API."""

from __future__ import annotations

from typing import Any

import pytest

from teapot_lb.kube.client import connect
from teapot_lb.lab.fakeapi import FakeApiServer
from teapot_lb.model.service import EndpointSlice
from teapot_lb.octavia.gateways import GatewayFinder, parse_port, parse_service, status_urls

NS = "teapot-lb-system"
SERVICE = "teapot-lb-gateway"


def eps_doc(
    name: str,
    *endpoints: tuple[str, bool | None],
    ports: list[dict[str, Any]] | None = None,
    service: str = SERVICE,
    family: str = "IPv4",
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": family,
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}
                      for ip, ready in endpoints],
        "ports": ports if ports is not None else [{"name": "http", "port": 80}],
    }  # fmt: skip


def eps(*args: Any, **kwargs: Any) -> EndpointSlice:
    return EndpointSlice.model_validate(eps_doc(*args, **kwargs))


def test_ready_endpoints_of_every_slice_on_the_numbered_port_sorted_once() -> None:
    slices = [
        eps("a", ("198.51.100.12", True), ("198.51.100.11", None), ("198.51.100.13", False)),
        eps("b", ("198.51.100.11", True)),
        eps("c", ("2001:db8::5", True), family="IPv6"),
    ]
    assert status_urls(slices, 7475) == [
        "http://198.51.100.11:7475",
        "http://198.51.100.12:7475",
        "http://[2001:db8::5]:7475",
    ]


def test_a_named_port_is_the_slice_s_port_of_that_name_and_a_slice_without_it_adds_nothing() -> (
    None
):
    slices = [
        eps("a", ("198.51.100.11", True), ports=[{"name": "metrics", "port": 9100}]),
        eps("b", ("198.51.100.12", True), ports=[{"name": "http", "port": 80}]),
    ]
    assert status_urls(slices, "metrics") == ["http://198.51.100.11:9100"]


def test_a_terminating_endpoint_and_an_fqdn_are_not_gateways() -> None:
    slice_ = eps("a", ("198.51.100.11", True), ("gw.example", True))
    doc = eps_doc("b", ("198.51.100.12", True))
    doc["endpoints"][0]["conditions"]["terminating"] = True
    assert status_urls([slice_, EndpointSlice.model_validate(doc)], 7475) == [
        "http://198.51.100.11:7475"
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [("teapot-lb-gateway", "<namespace>/<name>"), ("a/b/c", "<namespace>/<name>"),
     ("/x", "<namespace>/<name>")],
)  # fmt: skip
def test_a_malformed_service_setting_is_refused_by_name(text: str, why: str) -> None:
    with pytest.raises(ValueError, match="gateway_service") as err:
        parse_service(text)
    assert why in str(err.value)


def test_the_port_setting_is_a_number_or_a_name() -> None:
    assert parse_port("7475") == 7475
    assert parse_port("metrics") == "metrics"
    with pytest.raises(ValueError, match="gateway_status_port: 70000"):
        parse_port("70000")


async def test_the_explicit_list_wins_over_the_service() -> None:
    finder = GatewayFinder(["http://198.51.100.9:7475"], f"{NS}/{SERVICE}")
    assert await finder.urls(None) == ["http://198.51.100.9:7475"]


async def test_the_url_list_follows_the_service_s_endpoint_slices(fake_api: FakeApiServer) -> None:
    fake_api.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    fake_api.seed(eps_doc("gw-1", ("198.51.100.11", True), ("198.51.100.12", False)))
    fake_api.seed(eps_doc("other", ("198.51.100.99", True), service="not-the-gateway"))
    finder = GatewayFinder([], f"{NS}/{SERVICE}", "7475")
    async with await connect(fake_api.kubeconfig_path) as client:
        assert await finder.urls(client) == ["http://198.51.100.11:7475"]

        # A gateway pod becomes ready, another slice of the Service appears.
        fake_api.put(eps_doc("gw-1", ("198.51.100.11", True), ("198.51.100.12", True)))
        fake_api.seed(eps_doc("gw-2", ("198.51.100.13", True)))
        assert await finder.urls(client) == [
            "http://198.51.100.11:7475",
            "http://198.51.100.12:7475",
            "http://198.51.100.13:7475",
        ]

        # A gateway node leaves: its slice is deleted.
        fake_api.remove("endpointslices", "gw-2", NS)
        assert await finder.urls(client) == [
            "http://198.51.100.11:7475",
            "http://198.51.100.12:7475",
        ]

        # The management API fails: the last list is kept (and logged), then followed again.
        fake_api.faults.fail_next(1, code=500, path_contains="endpointslices")
        assert await finder.urls(client) == [
            "http://198.51.100.11:7475",
            "http://198.51.100.12:7475",
        ]
        fake_api.remove("endpointslices", "gw-1", NS)
        assert await finder.urls(client) == []
