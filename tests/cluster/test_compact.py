"""Compaction: a cached object holds shared parts but stays the object it was."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from teapot_lb.cluster import Kind, Store
from teapot_lb.cluster.compact import compact
from teapot_lb.model import ApiObject, Service, parse_object

_names = st.sampled_from(["a", "b", "web", "db", "n1", "n2", "kubernetes.io/hostname"])
_labels = st.dictionaries(_names, st.sampled_from(["", "x", "y", "web"]), max_size=3)
_ports = st.lists(
    st.fixed_dictionaries(
        {"port": st.sampled_from([80, 443, 1])},
        optional={
            "protocol": st.sampled_from(["TCP", "UDP"]),
            "name": st.sampled_from(["http", "https"]),
            "targetPort": st.one_of(st.sampled_from([1, 8080]), st.just("http")),
        },
    ),
    max_size=3,
)


def _service(i: int, labels: dict[str, str], ports: list[dict[str, Any]], ips: list[str]) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"s{i}", "namespace": "default", "labels": labels,
                     "annotations": {"lb.teapot.io/pool": "p"}, "resourceVersion": str(i)},
        "spec": {"type": "LoadBalancer", "ports": ports},
        "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ips]}},
    }  # fmt: skip


def _slice(i: int, ready: list[bool | None]) -> Any:
    endpoints = [
        {"addresses": [f"10.0.0.{j}"], "nodeName": f"n{j % 2}"}
        | ({} if r is None else {"conditions": {"ready": r}})
        for j, r in enumerate(ready)
    ]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"s{i}-x", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": f"s{i}"}},
        "endpoints": endpoints,
    }  # fmt: skip


_docs = st.lists(
    st.one_of(
        st.builds(
            _service,
            st.integers(0, 5),
            _labels,
            _ports,
            st.lists(st.sampled_from(["192.0.2.1", "2001:db8::1", "not-an-ip"]), max_size=2),
        ),
        st.builds(_slice, st.integers(0, 5), st.lists(st.sampled_from([True, False, None]))),
    ),
    min_size=1,
    max_size=6,
)


def _parsed(doc: Any) -> ApiObject:
    obj, problems = parse_object(doc)
    assert obj is not None and not problems, problems
    return obj


def _fields_sets(obj: object) -> list[object]:
    """Every model's given fields, depth first (compared by value)."""
    if isinstance(obj, BaseModel):
        out: list[object] = [(type(obj).__name__, sorted(obj.model_fields_set))]
        for value in obj.__dict__.values():
            out += _fields_sets(value)
        return out
    if isinstance(obj, list):
        return [s for item in obj for s in _fields_sets(item)]
    if isinstance(obj, dict):
        return [s for item in obj.values() for s in _fields_sets(item)]
    return []


@settings(max_examples=60, deadline=None)
@given(_docs)
def test_compacted_objects_equal_what_was_parsed_and_dump_the_same(docs: list[Any]) -> None:
    compacted = [compact(_parsed(doc)) for doc in docs]
    for doc, obj in zip(docs, compacted, strict=True):
        fresh = _parsed(doc)
        assert obj == fresh
        assert type(obj) is type(fresh)
        assert obj.model_dump(by_alias=True, exclude_unset=True) == fresh.model_dump(
            by_alias=True, exclude_unset=True
        )
        assert _fields_sets(obj) == _fields_sets(fresh)


@settings(max_examples=30, deadline=None)
@given(_docs)
def test_a_store_view_holds_what_was_put(docs: list[Any]) -> None:
    store = Store()
    expected: dict[Kind, dict[str, ApiObject]] = {}
    for doc in docs:
        key = store.put_object(_parsed(doc))
        expected.setdefault(Kind(doc["kind"]), {})[key] = _parsed(doc)
    view = store.view()
    for kind, objects in expected.items():
        assert dict(view.of_kind(kind)) == objects


def test_equal_leaf_parts_and_fields_sets_are_shared() -> None:
    a = compact(_parsed(_service(1, {"app": "web"}, [{"port": 80}], ["192.0.2.1"])))
    b = compact(_parsed(_service(2, {"app": "web"}, [{"port": 80}], ["192.0.2.2"])))
    assert isinstance(a, Service) and isinstance(b, Service)
    assert a.spec.ports[0] is b.spec.ports[0]
    assert a.metadata.__pydantic_fields_set__ is b.metadata.__pydantic_fields_set__
    (key_a,) = a.metadata.labels
    (key_b,) = b.metadata.labels
    assert key_a is key_b
    # The ingress entries differ, so they stay apart.
    assert a.status.load_balancer.ingress[0] != b.status.load_balancer.ingress[0]


def test_a_copy_with_changes_does_not_change_the_shared_parts() -> None:
    a = compact(_parsed(_service(1, {}, [{"port": 80}], [])))
    b = compact(_parsed(_service(2, {}, [{"port": 80}], [])))
    assert isinstance(a, Service) and isinstance(b, Service)
    meta = a.metadata.model_copy(update={"uid": "u-1"})
    assert "uid" in meta.model_fields_set
    assert "uid" not in b.metadata.model_fields_set
    assert b.metadata.uid is None


def test_a_port_is_not_shared_with_an_equal_looking_one_of_another_type() -> None:
    one = compact(_parsed(_service(1, {}, [{"port": 1, "targetPort": 1}], [])))
    text = compact(_parsed(_service(2, {}, [{"port": 1, "targetPort": "1"}], [])))
    assert isinstance(one, Service) and isinstance(text, Service)
    assert one.spec.ports[0].target_port == 1
    assert text.spec.ports[0].target_port == "1"


def test_equal_parts_of_every_depth_are_shared_but_never_the_object_itself() -> None:
    """An empty status, a spec, a list of ports and a label map are shared between two
    Services parsed apart (hash-consing); each Service stays its own object, even when an
    equal one was compacted before."""
    a = compact(_parsed(_service(1, {"app": "web"}, [{"port": 80}], [])))
    b = compact(_parsed(_service(2, {"app": "web"}, [{"port": 80}], [])))
    again = _parsed(_service(1, {"app": "web"}, [{"port": 80}], []))
    assert compact(again) is again and again == a
    assert isinstance(a, Service) and isinstance(b, Service)
    assert a.status is b.status
    assert a.spec is b.spec
    assert a.spec.ports is b.spec.ports
    assert a.metadata.labels is b.metadata.labels
    assert a.metadata.annotations is b.metadata.annotations
    assert a.metadata is not b.metadata  # (their names differ)


def test_parts_that_differ_anywhere_inside_are_not_shared() -> None:
    a = compact(_parsed(_service(1, {}, [{"port": 80}], ["192.0.2.1"])))
    b = compact(_parsed(_service(2, {}, [{"port": 80}, {"port": 443}], ["192.0.2.1"])))
    c = compact(_parsed(_service(3, {}, [{"port": 80, "protocol": "UDP"}], ["192.0.2.2"])))
    assert isinstance(a, Service) and isinstance(b, Service) and isinstance(c, Service)
    assert a.status is b.status  # the same ingress
    assert a.status is not c.status and a.status != c.status
    assert a.spec is not b.spec and a.spec.ports != b.spec.ports
    assert a.spec is not c.spec and a.spec.ports != c.spec.ports
    assert [p.protocol for p in c.spec.ports] == ["UDP"]


def test_compacting_a_copy_again_keeps_the_shared_parts() -> None:
    """A cache taking a copy of a compacted object (a stamped copy, one with a status)
    compacts it again: its parts stay the very parts shared before."""
    a = compact(_parsed(_service(1, {"app": "web", "tier": "x"}, [{"port": 80}], [])))
    assert isinstance(a, Service)
    labels, spec, status = a.metadata.labels, a.spec, a.status
    copy = compact(a.model_copy(update={"metadata": a.metadata.model_copy()}))
    assert copy.metadata.labels is labels and copy.spec is spec and copy.status is status
    assert compact(a) is a and a.metadata.labels is labels
    assert dict(labels) == {"app": "web", "tier": "x"}
