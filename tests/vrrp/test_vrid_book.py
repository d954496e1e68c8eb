"""VRIDs as cluster state: the controller core allocates them once and writes them on the
Service; every node reads the same number, whatever it saw before (pure)."""

from __future__ import annotations

from typing import Any

from speaker.builders import lb_service, node, ours, store_of
from teapot_lb.controller import rebuild, reconcile_service
from teapot_lb.vrrp.vrid_book import Need, VridBook, VridOwner, format_vrids, parse_vrids


def docs(*services: dict[str, Any], vrid_range: tuple[int, int] = (10, 20)) -> list[Any]:
    lo, hi = vrid_range
    return [
        node("n1", "192.0.2.11"),
        node("n2", "192.0.2.12"),
        ours("AddressPool", "vip", {"addresses": ["192.0.2.224/28"]}),
        ours(
            "VIPAdvertisement",
            "vip",
            {"addressPools": ["vip"], "vridRange": {"start": lo, "end": hi}},
        ),
        *services,
    ]


def annotated(doc: dict[str, Any], vrids: str) -> dict[str, Any]:
    doc["metadata"]["annotations"] = {"lb.teapot.io/vrids": vrids}
    return doc


def test_the_annotation_round_trips_and_ignores_garbage() -> None:
    assert parse_vrids("b=7, a=300,c=x,=3,d=12") == {"b": 7, "d": 12}
    assert format_vrids({"b": 7, "a": 12}) == "a=12,b=7"
    assert format_vrids({}) is None


def test_cluster_services_of_one_advertisement_share_a_vrid_local_ones_get_their_own() -> None:
    view = store_of(
        *docs(
            lb_service("a", "192.0.2.225"),
            lb_service("b", "192.0.2.226"),
            lb_service("l", "192.0.2.227", externalTrafficPolicy="Local"),
        )
    ).view()
    state = rebuild(view)
    got = {k: reconcile_service(view, state, k).vrids for k in sorted(view.services)}
    assert got["default/a"] == got["default/b"]
    assert got["default/l"] != got["default/a"]
    assert all(10 <= v <= 20 for text in got.values() for v in parse_vrids(text).values())


def test_a_vrid_written_on_the_service_is_kept_and_the_older_service_wins_a_clash() -> None:
    old = annotated(lb_service("old", "192.0.2.225", externalTrafficPolicy="Local"), "vip=15")
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    new = annotated(lb_service("aaa", "192.0.2.226", externalTrafficPolicy="Local"), "vip=15")
    new["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    view = store_of(*docs(old, new)).view()
    state = rebuild(view)
    assert reconcile_service(view, state, "default/old").vrids == "vip=15"
    moved = reconcile_service(view, state, "default/aaa")
    assert moved.vrids != "vip=15" and moved.annotate


def test_no_free_vrid_is_refused_with_a_reason_and_reported_once() -> None:
    one = lb_service("one", "192.0.2.225", externalTrafficPolicy="Local")
    two = lb_service("two", "192.0.2.226", externalTrafficPolicy="Local")
    view = store_of(*docs(one, two, vrid_range=(10, 10))).view()
    state = rebuild(view)
    assert reconcile_service(view, state, "default/one").vrids == "vip=10"
    refused = reconcile_service(view, state, "default/two")
    assert refused.vrids is None
    (event,) = [e for e in refused.events if e.reason == "VRIDAllocationFailed"]
    assert "no free virtual router ID in 10-10" in event.message
    assert "widen vridRange" in event.message
    again = reconcile_service(view, state, "default/two")
    assert not [e for e in again.events if e.reason == "VRIDAllocationFailed"]


def test_a_vrid_is_given_back_when_its_last_service_goes() -> None:
    book = VridBook()
    shared = Need(VridOwner("vip"), (10, 10))
    assert book.assign("default/a", [shared], {}).vrids == {"vip": 10}
    assert book.assign("default/b", [shared], {}).vrids == {"vip": 10}
    book.release("default/a")
    assert book.holders == {10: VridOwner("vip")}
    book.release("default/b")
    assert book.holders == {}
    local = Need(VridOwner("vip", "default/l"), (10, 10))
    assert book.assign("default/l", [local], {}).vrids == {"vip": 10}


def test_a_node_joining_changes_no_vrid() -> None:
    svc = lb_service("a", "192.0.2.225")
    before = store_of(*docs(svc)).view()
    after = store_of(*docs(svc), node("n3", "192.0.2.13")).view()
    vrids = [reconcile_service(v, rebuild(v), "default/a").vrids for v in (before, after)]
    assert vrids[0] is not None and vrids[0] == vrids[1]
