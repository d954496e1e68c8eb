"""Objects in the shapes the real API server writes parse: null is read as absent."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from teapot_lb.cluster import Kind, Store
from teapot_lb.kube.client import connect
from teapot_lb.kube.resources import ENDPOINT_SLICES, SERVICES
from teapot_lb.lab.kubeplane import ControlPlane
from teapot_lb.model import EndpointSlice, Node, Service, parse_object
from teapot_lb.speaker.kube_source import put


def slice_(endpoints: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abcde",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        **extra,
    }


def parsed(obj: dict[str, Any]) -> Any:
    model, problems = parse_object(obj)
    assert not problems, problems
    return model


def test_a_slice_with_null_endpoints_and_ports_has_no_endpoints() -> None:
    es = parsed(slice_(None, ports=None))
    assert isinstance(es, EndpointSlice) and es.endpoints == [] and es.ready_nodes() == set()


def test_a_slice_without_endpoints_or_ports_has_no_endpoints() -> None:
    obj = slice_([])
    del obj["endpoints"]
    assert parsed(obj).endpoints == []


def test_an_endpoint_without_conditions_or_node_counts_as_ready_on_no_node() -> None:
    es = parsed(
        slice_([{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"], "conditions": None}])
    )
    assert all(e.is_ready for e in es.endpoints)
    assert es.ready_nodes() == set()


def test_an_endpoint_with_null_fields_keeps_what_it_has() -> None:
    es = parsed(
        slice_(
            [
                {
                    "addresses": ["10.0.0.1"],
                    "conditions": {"ready": True, "serving": None, "terminating": None},
                    "nodeName": "n1",
                    "targetRef": None,
                    "zone": None,
                    "hints": None,
                }
            ]
        )
    )
    assert es.ready_nodes() == {"n1"}


def test_a_service_and_a_node_with_null_lists_parse() -> None:
    svc = parsed(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "labels": None},
            "spec": {"type": "LoadBalancer", "ports": None, "selector": None},
            "status": {"loadBalancer": {"ingress": None}},
        }
    )
    assert isinstance(svc, Service) and svc.ingress_ips() == []
    node = parsed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": None},
            "status": {"addresses": None, "conditions": None},
        }
    )
    assert isinstance(node, Node) and node.addresses() == []


def test_the_speaker_keeps_a_slice_with_null_endpoints() -> None:
    store = Store()
    assert put(store, Kind.ENDPOINT_SLICE, "default/web-abcde", slice_(None))
    assert store.get(Kind.ENDPOINT_SLICE, "default/web-abcde") is not None


async def test_slices_written_by_the_real_controller_manager_parse(
    kube_plane: ControlPlane,
) -> None:
    """A Service whose selector matches no pod: kube-controller-manager writes a slice
    with `endpoints: null`."""
    ns = f"shapes-{uuid.uuid4().hex[:6]}"
    kube_plane.kubectl("create", "namespace", ns)
    async with await connect(kube_plane.admin_kubeconfig) as client:
        await client.create(
            SERVICES,
            {
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"selector": {"app": "none"}, "ports": [{"port": 80}]},
            },
        )

        async def slices() -> list[dict[str, Any]]:
            listed = await client.list(
                ENDPOINT_SLICES,
                namespace=ns,
                label_selector="kubernetes.io/service-name=web",
            )
            return listed.items

        # The controller manager writes it within a second or two; a loaded machine is slow.
        async with asyncio.timeout(60):
            while True:
                written = await slices()
                if written:
                    break
                await asyncio.sleep(0.1)
    assert "endpoints" not in written[0] or written[0]["endpoints"] is None
    for obj in written:
        es = parsed(obj)
        assert isinstance(es, EndpointSlice) and es.endpoints == []
