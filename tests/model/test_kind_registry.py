"""The kind registry: one entry per kind, read by the store, informers, plan cache and loader."""

from __future__ import annotations

import dataclasses

import pytest

from teapot_lb.cluster import ClusterView, Kind, Store
from teapot_lb.model import parse_object
from teapot_lb.model.kinds import KINDS, REGISTRY
from teapot_lb.model.manifest import MODELS


def test_every_kind_has_one_entry_and_its_own_view_field() -> None:
    assert set(REGISTRY) == set(Kind)
    assert len(KINDS) == len(Kind)
    # Besides one field per kind, a view carries where it stands in the store's change log
    # and the store's EndpointSlice index (what the plan cache reads to skip the unchanged),
    # and what a controller in the same process assigned to its Services (standalone).
    bookkeeping = {"changes", "slice_index", "assigned"}
    view_fields = {f.name for f in dataclasses.fields(ClusterView) if f.init} - bookkeeping
    assert {info.view_field for info in KINDS} == view_fields
    assert bookkeeping <= {f.name for f in dataclasses.fields(ClusterView)}


def test_each_entry_names_its_own_kind_in_model_and_resource() -> None:
    for info in KINDS:
        assert info.resource.kind == info.kind.value
        if info.model is not None:
            assert info.model.model_fields["kind"].default == info.kind.value


def test_the_manifest_loader_reads_every_kind_with_a_model() -> None:
    assert {kind for _, kind in MODELS} == {i.kind.value for i in KINDS if i.in_manifests}


def test_the_store_fills_the_view_field_the_registry_names() -> None:
    obj, _ = parse_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert obj is not None
    store = Store()
    store.put_object(obj)
    assert getattr(store.view(), REGISTRY[Kind.NODE].view_field) == {"n1": obj}


def test_the_store_refuses_an_object_under_another_kind() -> None:
    obj, _ = parse_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert obj is not None
    with pytest.raises(TypeError, match="not a Service"):
        Store().put(Kind.SERVICE, "n1", obj)


def test_every_custom_resource_is_a_configuration_kind_of_the_registry() -> None:
    from teapot_lb.model.crd import CUSTOM_RESOURCES

    # Gateway API kinds are custom resources too, but their CRDs are upstream's.
    custom = {info.kind.value for info in KINDS if info.resource.custom and not info.gateway}
    assert {crd.name for crd in CUSTOM_RESOURCES} == custom
    assert all(
        REGISTRY[Kind(crd.name)].config or REGISTRY[Kind(crd.name)].management
        for crd in CUSTOM_RESOURCES
    )


def test_a_config_set_has_one_list_per_kind_of_the_manifests_named_as_its_view_field() -> None:
    from teapot_lb.validation import ConfigSet

    others = ("unparsed", "secrets", "kept")
    lists = {f.name for f in dataclasses.fields(ConfigSet) if f.name not in others}
    assert lists == {info.view_field for info in KINDS if info.in_manifests}
