"""The controller's live view reads what the store holds now, as a snapshot would."""

from __future__ import annotations

from teapot_lb.cluster import Kind, Store
from teapot_lb.controller.kube_cache import live_view
from teapot_lb.model import Namespace, Service


def _service(name: str) -> Service:
    return Service.model_validate(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"type": "LoadBalancer"}}
    )


def test_the_live_view_holds_what_the_snapshot_holds_and_follows_changes() -> None:
    store = Store()
    store.put_object(_service("b"))
    store.put_object(_service("a"))
    store.put_object(Namespace.model_validate({"metadata": {"name": "default"}}))
    view = live_view(store)
    snapshot = store.view()
    assert dict(view.services) == dict(snapshot.services)
    assert list(view.services) == ["default/a", "default/b"]
    assert len(view.services) == 2
    assert view.namespace_labels("default") == snapshot.namespace_labels("default")
    assert view.services.get("default/c") is None and "default/c" not in view.services
    assert not view.pools and not view.vip_advertisements
    store.put_object(_service("c"))
    store.delete(Kind.SERVICE, "default/a")
    assert sorted(view.services) == ["default/b", "default/c"]
