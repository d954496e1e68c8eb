"""Typed views of Service, EndpointSlice and Node read real objects and ignore the rest."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

import pytest

from model.builders import parse, service
from teapot_lb.model import EndpointSlice, Node, Service, sharing_conflict

REAL_SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "uid": "5d1c",
        "resourceVersion": "812",
        "annotations": {"lb.teapot.io/ips": "192.0.2.5, 2001:db8::5"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "type": "LoadBalancer",
        "clusterIP": "10.96.0.10",
        "clusterIPs": ["10.96.0.10", "fd00::10"],
        "ipFamilies": ["IPv4", "IPv6"],
        "ipFamilyPolicy": "PreferDualStack",
        "externalTrafficPolicy": "Local",
        "healthCheckNodePort": 31000,
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080}],
        "sessionAffinity": "None",
    },
    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.5", "ipMode": "VIP"}]}},
}


def test_a_service_from_the_api_server_parses_with_its_extra_fields() -> None:
    svc: Service = parse(REAL_SERVICE)
    assert svc.spec.external_traffic_policy == "Local"
    assert svc.requested_ips() == [ip_address("192.0.2.5"), ip_address("2001:db8::5")]
    assert svc.ingress_ips() == [ip_address("192.0.2.5")]
    assert svc.spec.ports[0].target_port == "http"


@pytest.mark.parametrize(
    ("spec", "handled"),
    [
        ({}, True),
        ({"loadBalancerClass": "lb.teapot.io/teapot"}, True),
        ({"loadBalancerClass": "example.com/other"}, False),
        ({"type": "NodePort"}, False),
    ],
)
def test_which_services_are_ours(spec: dict[str, str], handled: bool) -> None:
    assert parse(service("s", **spec)).is_handled() is handled


def test_unclassed_services_can_be_left_alone() -> None:
    assert not parse(service("s")).is_handled(unclassed=False)


def test_load_balancer_ip_is_honoured_when_no_annotation() -> None:
    assert parse(service("s", loadBalancerIP="192.0.2.9")).requested_ips() == [
        ip_address("192.0.2.9")
    ]


def test_annotations_pool_and_sharing_key() -> None:
    svc = parse(service("s", pool="gold", sharing_key="dns"))
    assert (svc.requested_pool, svc.sharing_key) == ("gold", "dns")


def test_sharing_needs_same_key_distinct_ports_and_compatible_policy() -> None:
    a = parse(service("a", "53/UDP", sharing_key="k"))
    assert sharing_conflict(a, parse(service("b", "53/TCP", sharing_key="k"))) is None
    assert "53/UDP" in (sharing_conflict(a, parse(service("b", "53/UDP", sharing_key="k"))) or "")
    assert "sharing-key" in (sharing_conflict(a, parse(service("b", "54/UDP"))) or "")


def test_endpoint_slice_lists_nodes_with_ready_endpoints() -> None:
    eps: EndpointSlice = parse(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "web-x", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "nodeName": "n1", "conditions": {"ready": True}},
                {"addresses": ["10.0.0.2"], "nodeName": "n2", "conditions": {"ready": False}},
                {"addresses": ["10.0.0.3"], "nodeName": "n3", "conditions": {}},
            ],
            "ports": [{"port": 8080}],
        }
    )
    assert eps.service_name == "web"
    assert eps.ready_nodes() == {"n1", "n3"}


def test_an_endpoint_slice_without_endpoints_parses_as_the_apiserver_serves_it() -> None:
    """kube-controller-manager writes `endpoints: null` when a Service has no endpoints
    (seen on kube-apiserver v1.36): the slice says "no node is ready", it is not invalid."""
    eps: EndpointSlice = parse(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "web-x", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": None,
            "ports": None,
        }
    )
    assert eps.ready_nodes() == set()


def test_node_labels_and_network_condition() -> None:
    node: Node = parse(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "NetworkUnavailable", "status": "True", "reason": "NoRoute"},
                ],
                "addresses": [{"type": "InternalIP", "address": "192.0.2.11"}],
            },
        }
    )
    assert node.labels == {"zone": "a"}
    assert node.network_unavailable
    assert node.addresses() == [ip_address("192.0.2.11")]
