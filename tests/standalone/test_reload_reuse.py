"""A manifest reload costs what changed: the kept assignment gives assign_all's result, and
what did not change reaches the speaker's Store as the same objects (issue 19)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.announce.announcement import Plan
from teapot_lb.cluster import Kind, Store, object_key
from teapot_lb.lab.standalone_lab import endpoints, ours, service, write
from teapot_lb.lab.wait import wait_for_async
from teapot_lb.model import parse_object
from teapot_lb.speaker.node import StepResult
from teapot_lb.standalone.assign import Assigner, assign_all
from teapot_lb.standalone.directory import PRETTY_MAX
from teapot_lb.standalone.runner import ManifestSource, StatusWriter

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
NAMES = tuple(f"s{i}" for i in range(8))
FEW = NAMES[:4]  # (changes meet the same Services more often)


def put(store: Store, doc: dict[str, Any]) -> None:
    obj, problems = parse_object(doc)
    assert obj is not None and not problems, problems
    store.put_object(obj)


def pools(small: bool, by_label: bool = False) -> list[dict[str, Any]]:
    """Pool a (4 or 8 IPs; `by_label`: only for Services labelled tier=web), pool b (2 IPs,
    asked for by name) with a VIPAdvertisement (VRIDs for its IPs, one per Local Service)."""
    a: dict[str, Any] = {"addresses": ["203.0.113.0/30" if small else "203.0.113.0/29"]}
    if by_label:
        a["serviceAllocation"] = {"serviceSelectors": [{"matchLabels": {"tier": "web"}}]}
    return [
        ours("AddressPool", "a", a),
        ours("AddressPool", "b", {"addresses": ["198.51.100.0/31"], "autoAssign": False}),
        ours(
            "VIPAdvertisement", "vip", {"addressPools": ["b"], "vridRange": {"start": 1, "end": 2}}
        ),
    ]


# How a Service is made: the first ones decide its IPs; the last ones decide nothing unless
# a pool selects by label (`label`), or its IPs are in pool b (`local`: a VRID of its own).
HOWS = (
    "vrids",
    "plain",
    "ip",
    "pool-b",
    "local",
    "status",
    "bad-ip",
    "other-class",
    "label",
    "note",
    "target",
)
KEEPING = ("plain", "label", "note", "target", "local", "vrids")


def service_doc(name: str, minute: int, how: str) -> dict[str, Any]:
    """A Service created at T0 + `minute`, made as `how` says (see HOWS)."""
    ip = {"ip": "203.0.113.2", "bad-ip": "203.0.113.999"}.get(how)
    doc = service(name, ip)
    meta, spec = doc["metadata"], doc["spec"]
    meta["creationTimestamp"] = (T0 + timedelta(minutes=minute)).isoformat()
    notes = meta.setdefault("annotations", {})
    if how in ("pool-b", "local", "vrids"):
        notes["lb.teapot.io/pool"] = "b"
    if how in ("local", "vrids"):
        spec["externalTrafficPolicy"] = "Local"
    if how == "vrids":
        notes["lb.teapot.io/vrids"] = "vip=2"  # as a status write would have left it
    if how == "status":
        doc["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}
    if how == "other-class":
        spec["loadBalancerClass"] = "example.org/other"
    if how == "label":
        meta["labels"] = {"tier": "web"}
    if how == "note":
        notes["example.org/owner"] = f"team-{minute}"
    if how == "target":
        spec["ports"][0]["targetPort"] = 8080
    return doc


changes = st.one_of(
    # Mostly the usual edit: a new Service, newer than the others.
    st.tuples(st.just("add"), st.sampled_from(FEW), st.sampled_from(["plain", "plain", "ip"])),
    st.tuples(st.just("add"), st.sampled_from(FEW), st.sampled_from(HOWS)),
    st.tuples(st.just("older"), st.sampled_from(FEW)),  # created before the others
    st.tuples(st.just("delete"), st.sampled_from(FEW)),
    # Edited, keeping its creation time: the newest one (only it is reconciled again), or
    # any one in what decides nothing (none is; unless a pool selects by label).
    st.tuples(st.just("edit"), st.sampled_from(FEW), st.sampled_from(HOWS)),
    st.tuples(st.just("edit"), st.sampled_from(FEW), st.sampled_from(KEEPING)),
    st.tuples(st.just("newest"), st.sampled_from([*HOWS, "delete"])),
    st.tuples(st.just("pools"), st.booleans(), st.booleans()),
    st.tuples(st.just("slice"), st.sampled_from(FEW)),  # the assignment reads none
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(changes, min_size=1, max_size=3), min_size=1, max_size=15))
def test_the_kept_assignment_equals_assigning_from_scratch(
    batches: list[list[tuple[Any, ...]]],
) -> None:
    """After each batch of one to three changes (a reload sees what changed since the
    last one, together), the kept assignment is assign_all's."""
    store = Store()
    for doc in pools(small=True):
        put(store, doc)
    assigner = Assigner()
    created: dict[str, int] = {}
    minute = 0
    for batch in batches:
        for what, *args in batch:
            minute += 1
            change(store, created, minute, what, args)
        view = store.view()
        assert assigner.assign(view) == assign_all(view)


def change(store: Store, created: dict[str, int], minute: int, what: str, args: list[Any]) -> None:
    """One change of the property test above (`created`: each Service's minute)."""
    if what == "add":
        put(store, service_doc(args[0], minute, args[1]))
        created[args[0]] = minute
    elif what == "older":
        put(store, service_doc(args[0], -minute, "plain"))
        created[args[0]] = -minute
    elif what == "edit":
        if args[0] in created:
            put(store, service_doc(args[0], created[args[0]], args[1]))
    elif what == "newest" and created:  # edited (same creation time) or removed
        name = max(created, key=lambda n: (created[n], n))
        if args[0] == "delete":
            store.delete(Kind.SERVICE, object_key("default", name))
            del created[name]
        else:
            put(store, service_doc(name, created[name], args[0]))
    elif what == "delete":
        store.delete(Kind.SERVICE, object_key("default", args[0]))
        created.pop(args[0], None)
    elif what == "slice":
        put(store, endpoints(args[0], f"n{minute}"))
    elif what == "pools":
        for doc in pools(small=args[0], by_label=args[1]):
            put(store, doc)


def test_a_new_service_is_the_only_one_reconciled() -> None:
    store = Store()
    for doc in pools(small=False):
        put(store, doc)
    for i, name in enumerate(NAMES[:5]):
        put(store, service_doc(name, i, "plain"))
    assigner = Assigner()
    assigner.assign(store.view())
    assert assigner.reconciled == 5
    put(store, service_doc("new", 10, "plain"))
    got = assigner.assign(store.view())
    assert assigner.reconciled == 1 and got == assign_all(store.view())
    # An EndpointSlice changed: nothing to assign again.
    put(store, endpoints("new", "n1"))
    got = assigner.assign(store.view())
    assert assigner.reconciled == 0 and got == assign_all(store.view())
    # The newest Service edited (same creation time) or removed: only it.
    put(store, service_doc("new", 10, "pool-b"))
    got = assigner.assign(store.view())
    assert assigner.reconciled == 1 and got == assign_all(store.view())
    store.delete(Kind.SERVICE, "default/new")
    got = assigner.assign(store.view())
    assert assigner.reconciled == 1 and got == assign_all(store.view())
    assert "default/new" not in got
    # An older Service removed: from scratch (a younger one may take its IP).
    store.delete(Kind.SERVICE, "default/s0")
    got = assigner.assign(store.view())
    assert assigner.reconciled == 4 and got == assign_all(store.view())


def test_an_older_service_edited_in_what_decides_nothing_is_not_assigned_again() -> None:
    store = Store()
    for doc in pools(small=True):
        put(store, doc)
    for i, name in enumerate(NAMES[:5]):  # pool a has 4 IPs: s4 is refused
        put(store, service_doc(name, i, "plain"))
    put(store, service_doc("other", 5, "other-class"))
    assigner = Assigner()

    def step() -> tuple[int, tuple[str, ...] | None]:
        got = assigner.assign(store.view())
        assert got == assign_all(store.view())
        return assigner.reconciled, assigner.added

    assert step() == (6, None)
    # The oldest labelled (no pool selects by label), annotated, its port's target changed:
    # nothing to assign.
    for how in ("label", "note", "target"):
        put(store, service_doc("s0", 0, how))
        assert step() == (0, ())
    # A refused Service and one not ours removed: they held nothing, only they go.
    store.delete(Kind.SERVICE, "default/s4")
    assert step() == (1, ("default/s4",))
    store.delete(Kind.SERVICE, "default/other")
    assert step() == (1, ("default/other",))
    # One of them removed while the newest is edited: both go alone, in one call.
    put(store, service_doc("late", 9, "bad-ip"))  # refused: its IP does not parse
    put(store, service_doc("newest", 10, "plain"))
    assert step() == (2, ("default/late", "default/newest"))
    store.delete(Kind.SERVICE, "default/late")
    put(store, service_doc("newest", 10, "pool-b"))
    assert step() == (2, ("default/late", "default/newest"))
    store.delete(Kind.SERVICE, "default/newest")
    assert step() == (1, ("default/newest",))
    # What decides an IP changed (its request, its class): everything again.
    put(store, service_doc("s1", 1, "ip"))
    assert step() == (4, None)
    put(store, service_doc("s1", 1, "other-class"))
    assert step() == (4, None)
    put(store, service_doc("s2", 2, "local"))  # pool b, a VRID of its own
    assert step() == (4, None)
    put(store, service_doc("s2", 2, "vrids"))  # the VRID it shows
    assert step() == (4, None)
    # Once a pool selects Services by label, a label decides.
    for doc in pools(small=True, by_label=True):
        put(store, doc)
    assert step() == (4, None)
    put(store, service_doc("s2", 2, "label"))
    assert step() == (4, None)
    assert assigner.assign(store.view())[0]["default/s2"].pool == "a"


def test_a_reload_hands_the_speaker_only_what_changed(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests / "config.yaml", pools(small=False))
    write(manifests / "services.yaml", [service(f"svc{i}") for i in range(4)])
    store = Store()
    source = ManifestSource(manifests, store, state_dir=tmp_path / "state")
    source.reload()
    before = {key: store.get(Kind.SERVICE, key) for key in store.view().services}
    mark = store.changes.mark
    write(manifests / "new.yaml", [service("new")])
    source.reload()
    changes = store.changes.between(mark, store.changes.mark)
    assert changes is not None
    # (the new Service, then its assignment)
    assert {(c.kind, c.key) for c in changes} == {(Kind.SERVICE, "default/new")}
    for key, obj in before.items():
        assert store.get(Kind.SERVICE, key) is obj, f"{key} was replaced by an equal copy"
    view = store.view()
    new = view.services.get("default/new")
    assert new is not None
    assert [str(ip) for ip in view.ingress_ips("default/new", new)] == ["203.0.113.4"]
    # An unchanged directory read again changes nothing at all.
    mark = store.changes.mark
    source.reload()
    assert store.changes.mark == mark


async def test_a_large_status_file_is_rewritten_at_most_every_interval(tmp_path: Path) -> None:
    manifests, state = tmp_path / "manifests", tmp_path / "state"
    manifests.mkdir()
    big = [ours("AddressPool", "v6", {"addresses": ["2001:db8::/112"]})]
    write(manifests / "all.yaml", big + [service(f"svc{i}") for i in range(PRETTY_MAX + 1)])
    source = ManifestSource(manifests, Store(), state_dir=state)
    source.reload()
    writer = StatusWriter("n1", state, source, large_interval_s=0.3)
    written: list[StepResult | None] = []
    document, large_text = writer.document, writer.large_text

    def recording(result: StepResult | None) -> dict[str, Any]:
        written.append(result)
        return document(result)

    def recording_large(result: StepResult | None, base: dict[str, Any] | None = None) -> str:
        written.append(result)
        return large_text(result, base)

    writer.document = recording  # type: ignore[method-assign]
    writer.large_text = recording_large  # type: ignore[method-assign]
    plan = Plan("n1", frozenset(), ())
    steps = [StepResult(plan, Store().view(), {}, {}, (), float(i)) for i in range(3)]
    for step in steps:
        await writer(step)
    assert written == [steps[0]]  # the first at once, the others held back
    await wait_for_async(lambda: len(written) == 2, within=10, what="the held-back write")
    assert written[1] is steps[2], "the latest step's state is written"
    assert json.loads((state / "status.json").read_text())["generation"] == 1
    # At or under PRETTY_MAX Services, every step is written at once.
    write(manifests / "all.yaml", [*big, service("svc0")])
    source.reload()
    await writer(steps[0])
    await writer(steps[1])
    assert written[2:] == steps[:2]
