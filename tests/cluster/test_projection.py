"""The speaker's projection keeps everything the speaker reads of Services and EndpointSlices."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.builders import bgp_advertisement, l2_advertisement, parse, pool, vip_advertisement
from teapot_lb.announce.plan import PlanOptions, plan
from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.cluster.projection import Projection, project_service, speaker_projection
from teapot_lb.model import ApiObject, EndpointSlice, Service
from teapot_lb.model.kinds import object_key
from teapot_lb.speaker.kube_reporter import _involved
from teapot_lb.speaker.vip_backend import cluster_vip_input

NODES = ("n1", "n2", "n3", "n4")
CONFIG = [
    pool("bgp", "203.0.113.0/28"),
    pool("l2", "198.51.100.0/28"),
    pool("vip", "192.0.2.128/28"),
    bgp_advertisement("bgp", "bgp"),
    l2_advertisement("l2", "l2"),
    vip_advertisement("vip", "vip", interface="eth0", vridRange={"start": 1, "end": 255}),
    {
        "apiVersion": "lb.teapot.io/v1alpha1",
        "kind": "BGPPeer",
        "metadata": {"name": "r1", "namespace": "lb-system"},
        "spec": {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"},
    },
]
IPS = ["203.0.113.1", "203.0.113.2", "198.51.100.1", "198.51.100.2", "192.0.2.129", "192.0.2.130"]


def node(name: str, excluded: bool) -> dict[str, Any]:
    labels = {"rack": name[-1]}
    if excluded:
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"addresses": [{"type": "InternalIP", "address": f"192.0.2.{len(name)}"}]},
    }


def slice_doc(name: str, service: str, endpoints: list[Any], **labels: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": service, **labels}}  # fmt: skip
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta,
            "endpoints": endpoints, "ports": [{"name": "p", "port": 8080}]}  # fmt: skip


@st.composite
def services(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Services (and their EndpointSlices) varied in every field, read or not."""
    docs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 6))):
        name = f"svc-{i}"
        spec: dict[str, Any] = {
            "type": draw(st.sampled_from(["LoadBalancer", "LoadBalancer", "ClusterIP"])),
            "ports": [{"port": draw(st.integers(1, 65535)), "name": "p", "targetPort": 8080}],
            "externalTrafficPolicy": draw(st.sampled_from(["Cluster", "Local"])),
            "selector": {"app": draw(st.sampled_from(["a", "b"]))},
            "ipFamilies": ["IPv4"],
        }
        cls = draw(st.sampled_from([None, "lb.teapot.io/teapot", "other.example/lb"]))
        if cls is not None:
            spec["loadBalancerClass"] = cls
        notes = {"example.com/note": "x", "lb.teapot.io/pool": "bgp"}
        if draw(st.booleans()):
            notes["lb.teapot.io/vrids"] = f"vip={draw(st.integers(1, 255))}"
        ingress: list[dict[str, Any]] = [
            {"ip": ip, "ipMode": "VIP"} for ip in draw(st.lists(st.sampled_from(IPS), max_size=2))
        ]
        if draw(st.booleans()):
            ingress.append(draw(st.sampled_from([{"hostname": "lb.example"}, {"ip": "nonsense"}])))
        meta = {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{i}",
            "resourceVersion": str(i + 7),
            "labels": {"app": "a"},
            "annotations": notes,
        }
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta,
                "spec": spec,
                "status": {"loadBalancer": {"ingress": ingress}},
            }
        )
        for s in range(draw(st.integers(0, 2))):
            endpoints = [
                {
                    "addresses": [f"10.0.{i}.{e}"],
                    "nodeName": draw(st.sampled_from(NODES)),
                    "conditions": {
                        "ready": draw(st.sampled_from([True, False, None])),
                        "serving": draw(st.booleans()),
                    },
                    "targetRef": {"kind": "Pod", "name": f"pod-{e}"},
                }
                for e in range(draw(st.integers(0, 3)))
            ]
            docs.append(slice_doc(f"{name}-{s}", name, endpoints, app="a"))
    return docs


def view_of(docs: list[dict[str, Any]], project: Projection | None) -> ClusterView:
    store = Store(project)
    for doc in docs:
        store.put_object(parse(doc))
    return store.view()


def differences(docs: list[dict[str, Any]], project: Projection) -> list[str]:
    """What the speaker decides or reports differently from projected objects."""
    full, kept = view_of(docs, None), view_of(docs, project)
    found: list[str] = []
    for options in (PlanOptions(), PlanOptions(handle_unclassed=False)):
        for name in NODES:
            if plan(full, name, options) != plan(kept, name, options):
                found.append(f"plan of {name} ({options.handle_unclassed=})")
    if cluster_vip_input(full) != cluster_vip_input(kept):
        found.append("VIP input")
    for key, svc in full.services.items():
        if _involved(svc.metadata) != _involved(kept.services[key].metadata):
            found.append(f"Events' object of {key}")
    return found


def the_cluster(excluded: bool, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [node(n, excluded and n == "n2") for n in NODES] + CONFIG + docs


@settings(max_examples=60, deadline=None)
@given(services(), st.booleans())
def test_the_speaker_decides_the_same_from_projected_objects(
    docs: list[dict[str, Any]], excluded: bool
) -> None:
    assert differences(the_cluster(excluded, docs), speaker_projection) == []


def _without(field: str) -> Projection:
    """The speaker's projection, with one thing it keeps dropped."""

    def project(obj: ApiObject) -> ApiObject:
        kept = speaker_projection(obj)
        if field == "policy" and isinstance(kept, Service):
            spec = kept.spec.model_copy(update={"external_traffic_policy": "Cluster"})
            return kept.model_copy(update={"spec": spec})
        if field == "vrids" and isinstance(kept, Service):
            meta = kept.metadata.model_copy(update={"annotations": {}})
            return kept.model_copy(update={"metadata": meta})
        if field == "readiness" and isinstance(kept, EndpointSlice):
            ready = [
                e.model_copy(update={"conditions": e.conditions.model_copy(update={"ready": True})})
                for e in kept.endpoints
            ]
            return kept.model_copy(update={"endpoints": ready})
        return kept

    return project


def _local(vrids: bool) -> list[dict[str, Any]]:
    """One Local VIP Service with a ready endpoint on n1 and a not-ready one on n3."""
    notes = {"lb.teapot.io/vrids": "vip=9"} if vrids else {}
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1", "annotations": notes},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.129"}, {"ip": "203.0.113.1"}]}},
    }
    endpoints = [
        {"nodeName": "n1", "conditions": {"ready": True}},
        {"nodeName": "n3", "conditions": {"ready": False}},
    ]
    eps = slice_doc("web-1", "web", endpoints)
    return the_cluster(False, [svc, eps])


@pytest.mark.parametrize("field", ["policy", "vrids", "readiness"])
def test_a_projection_that_drops_what_the_speaker_reads_is_caught(field: str) -> None:
    docs = _local(vrids=True)
    assert differences(docs, speaker_projection) == []
    assert differences(docs, _without(field)) != []


def test_a_projected_service_keeps_only_what_the_speaker_reads() -> None:
    svc = parse(_local(vrids=True)[-2])
    assert isinstance(svc, Service)
    kept = project_service(svc)
    assert kept.spec.ports == [] and kept.spec.selector == {}
    assert kept.metadata.annotations == {"lb.teapot.io/vrids": "vip=9"}
    assert kept.ingress_ips() == svc.ingress_ips()
    # The strings it keeps are copies: nothing of the parsed response stays referenced.
    assert kept.metadata.name == svc.metadata.name
    assert kept.metadata.name is not svc.metadata.name
    assert kept.status.load_balancer.ingress[0].ip is not svc.status.load_balancer.ingress[0].ip


def test_a_store_with_a_projection_keeps_the_projected_objects() -> None:
    docs = _local(vrids=False)
    store = Store(speaker_projection)
    for doc in docs:
        store.put_object(parse(doc))
    store.put(Kind.SECRET, "lb-system/pw", {"password": b"x"})
    view = store.view()
    eps = view.endpoint_slices["default/web-1"]
    assert [(e.node_name, e.addresses) for e in eps.endpoints] == [("n1", []), ("n3", [])]
    assert view.ready_endpoint_nodes(object_key("default", "web")) == {"n1"}
    assert view.secrets["lb-system/pw"] == {"password": b"x"}
    # Kinds the projection does not cut are kept whole (a Node's addresses and labels).
    assert view.nodes["n1"] == parse(docs[0])
    # A re-list (replace) projects too.
    store.replace(Kind.SERVICE, {"default/web": parse(docs[-2])})
    assert store.view().services["default/web"].spec.ports == []


def test_other_kinds_pass_through_unchanged() -> None:
    for doc in [*CONFIG, node("n1", excluded=True)]:
        obj = parse(doc)
        assert speaker_projection(obj) is obj
