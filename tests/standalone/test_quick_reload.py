"""A reload of changed Service files only patches the last one (issue 19): it must give
exactly what reading everything gives — the objects, the problems, the assignments and
the speaker's Store — and be taken only when that is provable."""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teapot_lb.cluster import Kind, Store
from teapot_lb.lab.standalone_lab import endpoints, node, ours, service, write, write_text
from teapot_lb.model import parse_object
from teapot_lb.model.kinds import KINDS
from teapot_lb.standalone.first_seen import FILE_NAME, JOURNAL_NAME, FirstSeen
from teapot_lb.standalone.runner import ManifestSource, Reloaded

FILES = ("f0.yaml", "f1.yaml", "sub/f2.yaml")
NAMES = tuple(f"s{i}" for i in range(6))
HOWS = ("plain", "plain", "ip", "ip2", "pool-b", "c-ip", "c-status", "bad-ip", "other-class")
HOWS += ("status", "dated")


def config(small: bool) -> list[dict[str, Any]]:
    return [
        ours("AddressPool", "a", {"addresses": ["203.0.113.0/30" if small else "203.0.113.0/28"]}),
        ours("AddressPool", "b", {"addresses": ["198.51.100.0/31"], "autoAssign": False}),
        ours("L2Advertisement", "l2", {}),
        node("n1"),
    ]


def service_doc(name: str, how: str) -> dict[str, Any]:
    ips = {"ip": "203.0.113.2", "ip2": "203.0.113.3", "bad-ip": "not-an-ip"}
    doc = service(name, ips.get(how))
    meta, spec = doc["metadata"], doc["spec"]
    if how == "pool-b":
        meta["annotations"] = {"lb.teapot.io/pool": "b"}
    if how == "c-ip":  # pool c holds a Service IP: it keeps the range it shares with b
        meta["annotations"] = {"lb.teapot.io/pool": "c", "lb.teapot.io/ips": "198.51.100.1"}
    if how == "c-status":
        meta["annotations"] = {"lb.teapot.io/pool": "c"}
        doc["status"] = {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}]}}
    if how == "other-class":
        spec["loadBalancerClass"] = "example.com/other"
    if how == "status":
        doc["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}}
    if how == "dated":
        meta["creationTimestamp"] = "2026-01-01T00:00:00+00:00"
    return doc


files_, names_ = st.sampled_from(FILES), st.sampled_from(NAMES)
steps = st.one_of(
    st.tuples(st.just("put"), files_, names_, st.sampled_from(HOWS)),
    st.tuples(st.just("put"), files_, names_, st.just("plain")),
    st.tuples(st.just("drop"), st.sampled_from(FILES), st.sampled_from(NAMES)),
    st.tuples(st.just("slice"), st.sampled_from(FILES), st.sampled_from(NAMES)),
    st.tuples(st.just("rm"), st.sampled_from(FILES)),
    st.tuples(st.just("touch"), st.sampled_from(FILES)),
    st.tuples(st.just("pool-in"), st.sampled_from(FILES)),
    st.tuples(st.just("broken"), st.sampled_from(FILES)),
    st.tuples(st.just("config"), st.booleans()),
)


def _name(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def apply_step(root: Path, files: dict[str, list[dict[str, Any]]], step: tuple[Any, ...]) -> None:
    what, *args = step
    if what == "config":
        write(root / "config.yaml", config(small=args[0]))
        return
    name = args[0]
    docs = files.setdefault(name, [])
    if what in ("put", "slice", "drop", "pool-in"):
        if what == "put":
            new = service_doc(args[1], args[2])
        elif what == "slice":
            new = endpoints(args[1], "n1")
        elif what == "pool-in":
            new = ours("AddressPool", "c", {"addresses": ["198.51.100.0/30"]})  # overlaps b
        else:
            new = None
        kept = [d for d in docs if new is None or _name(d) != _name(new)]
        if what == "drop":
            kept = [d for d in docs if _name(d) != ("Service", args[1])]
        docs[:] = kept + ([new] if new is not None else [])
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if what == "rm":
        files.pop(name, None)
        path.unlink(missing_ok=True)
    elif what == "broken":
        write_text(path, "kind: [unclosed\n")
    else:
        write(path, docs)


def contents(source: ManifestSource) -> dict[str, Any]:
    loaded = source.loaded
    assert loaded is not None
    snap = loaded.snapshot
    store = source.store
    return {
        "objects": snap.objects,
        "problems": [str(p) for p in snap.problems],
        "unparsed": sorted(snap.unparsed_pools),
        "files": snap.files,
        "assignments": loaded.assignments,
        "store": {
            info.kind: {k: store.get(info.kind, k) for k in store.keys(info.kind)} for info in KINDS
        },
        "store assigned": dict(store.view().assigned),
    }


class ReadsEverything(ManifestSource):
    """The source with the quick path off: what reading everything gives."""

    def _quick(self) -> Reloaded | None:
        return None


def everything_read(mirror: ManifestSource, state: Path, scratch: Path) -> dict[str, Any]:
    """What `mirror` (a :class:`ReadsEverything` that saw every step) makes of the
    directory, with the first-seen times the quick source wrote to `state` (copied: the
    mirror must not write the source's state)."""
    copy = scratch / "mirror-state"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(state, copy)
    mirror._first_seen = FirstSeen(copy)
    mirror.reload()
    return contents(mirror)


@settings(max_examples=200, deadline=None)
@given(st.lists(steps, min_size=1, max_size=14))
def test_a_quick_reload_equals_reading_everything(plan: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        root, state = scratch / "manifests", scratch / "state"
        root.mkdir()
        write(root / "config.yaml", config(small=False))
        files: dict[str, list[dict[str, Any]]] = {}
        source = ManifestSource(root, Store(), state_dir=state)
        source.reload()
        mirror = ReadsEverything(root, Store(), state_dir=scratch / "mirror-state")
        everything_read(mirror, state, scratch)
        for step in plan:
            apply_step(root, files, step)
            source.reload()
            assert contents(source) == everything_read(mirror, state, scratch), step


def started(
    tmp_path: Path, files: dict[str, list[dict[str, Any]]], store: Store | None = None
) -> tuple[Path, Path, ManifestSource]:
    """A manifest directory (the configuration and `files`), and a source that read it."""
    root, state = tmp_path / "manifests", tmp_path / "state"
    root.mkdir()
    write(root / "config.yaml", config(small=False))
    for name, docs in files.items():
        write(root / name, docs)
    source = ManifestSource(root, store or Store(), state_dir=state)
    source.reload()
    return root, state, source


def test_a_new_service_file_is_read_alone(tmp_path: Path) -> None:
    store = Store()
    root, _state, source = started(
        tmp_path, {"services.yaml": [service(f"svc{i}") for i in range(3)]}, store
    )
    write(root / "new.yaml", [service("new", "203.0.113.9"), endpoints("new", "n1")])
    source.reload()
    assert source.quick_reloads == 1
    view = store.view()
    new = view.services.get("default/new")
    assert new is not None
    assert [str(ip) for ip in view.ingress_ips("default/new", new)] == ["203.0.113.9"]
    assert store.get(Kind.ENDPOINT_SLICE, "default/new-eps") is not None
    # Edited and removed: patched too (the assignment itself starts over).
    write(root / "new.yaml", [service("new")])
    source.reload()
    assert store.get(Kind.ENDPOINT_SLICE, "default/new-eps") is None
    (root / "new.yaml").unlink()
    source.reload()
    assert source.quick_reloads == 3
    assert store.get(Kind.SERVICE, "default/new") is None


def test_a_reload_says_what_it_read_and_what_it_assigned(tmp_path: Path) -> None:
    """`manifests loaded … read=… assigned=…`: an older Service annotated reads its file
    and assigns nothing; asking for an IP reads its file and assigns everything; a pool
    changed reads everything."""
    services = [service(f"svc{i}") for i in range(3)]
    root, _state, source = started(tmp_path, {"services.yaml": services})

    def reloaded() -> tuple[bool, bool]:
        done = source._compute()
        source._apply(done)
        return done.read_all, done.assigned_all

    services[0]["metadata"]["annotations"] = {"example.org/owner": "team-a"}
    write(root / "services.yaml", services)
    assert reloaded() == (False, False)
    services[0]["metadata"]["annotations"]["lb.teapot.io/ips"] = "203.0.113.7"
    write(root / "services.yaml", services)
    assert reloaded() == (False, True)
    write(root / "config.yaml", config(small=True))
    assert reloaded() == (True, True)


def test_what_a_quick_reload_cannot_prove_reads_everything(tmp_path: Path) -> None:
    root, _state, source = started(tmp_path, {"services.yaml": [service("svc0", "203.0.113.2")]})
    # A pool beside Services; a Service requesting a taken IP (a sharing problem); a
    # Service defined in a second file; a file that does not parse.
    cases = [
        [service("x"), ours("AddressPool", "c", {"addresses": ["192.0.2.0/30"]})],
        [service("y", "203.0.113.2")],
        [service("svc0")],
    ]
    for docs in cases:
        write(root / "new.yaml", docs)
        source.reload()
        (root / "new.yaml").unlink()
        source.reload()
    write_text(root / "new.yaml", "kind: [unclosed\n")
    source.reload()
    assert source.quick_reloads == 0
    loaded = source.loaded
    assert loaded is not None and any("not valid YAML" in str(p) for p in loaded.snapshot.problems)


def test_first_seen_times_of_quick_reloads_survive_a_restart(tmp_path: Path) -> None:
    root, state, source = started(tmp_path, {})
    for i in range(3):
        write(root / f"new{i}.yaml", [service(f"new{i}")])
        source.reload()
    (root / "new0.yaml").unlink()
    source.reload()
    assert source.quick_reloads == 4
    lines = [json.loads(line) for line in (state / JOURNAL_NAME).read_text().splitlines()]
    assert [line["ref"] for line in lines] == [
        "Service/default/new0",
        "Service/default/new1",
        "Service/default/new2",
        "Service/default/new0",
    ]
    assert lines[-1]["time"] is None
    assert set(FirstSeen(state).seen) == set(source._first_seen.seen)
    assert FirstSeen(state).seen == source._first_seen.seen
    assert "Service/default/new0" not in FirstSeen(state).seen


def test_the_journal_is_folded_into_the_file_when_it_grows(tmp_path: Path) -> None:
    objs = []
    for i in range(600):
        obj, _ = parse_object(service(f"s{i}"))
        assert obj is not None
        objs.append(obj)
    now = datetime(2026, 12, 4, tzinfo=UTC)
    seen = FirstSeen(tmp_path)
    seen.stamp_changed(objs, [], now)
    assert seen.journal_lines == 600 and not (tmp_path / FILE_NAME).exists()
    assert len(FirstSeen(tmp_path).seen) == 600  # read back from the journal alone
    # 500 forgotten: 1,100 lines, past max(1,000, the 100 entries left): one file again.
    seen.stamp_changed([], [f"Service/default/s{i}" for i in range(500)], now)
    assert seen.journal_lines == 0 and not (tmp_path / JOURNAL_NAME).exists()
    assert len(json.loads((tmp_path / FILE_NAME).read_text())) == 100
    # A line cut short by a crash is skipped; the rest is read.
    seen.stamp_changed([], ["Service/default/s599"], now)
    with (tmp_path / JOURNAL_NAME).open("a") as fh:
        fh.write('{"ref": "Service/def')
    again = FirstSeen(tmp_path)
    assert len(again.seen) == 99 and "Service/default/s599" not in again.seen


def _cached(source: ManifestSource) -> dict[str, Any]:
    """The objects the source's file cache holds, by `str(ref)`."""
    return {
        str(doc.obj.ref): doc.obj
        for _, docs, _ in source._files.entries.values()
        for doc in docs
        if doc.obj is not None
    }


def test_the_file_cache_keeps_each_object_stamped_once(tmp_path: Path) -> None:
    """The file cache holds each object as stamped when parsed — the very object the
    snapshot, the checks and the assignment use — and the time it carries is the one
    recorded in first-seen (so a restart and the next reload give it the same time)."""
    root, state, source = started(
        tmp_path, {"f0.yaml": [service("s0"), service("s1", "203.0.113.2")]}
    )
    write(root / "f1.yaml", [service("s2")])  # a quick reload
    source.reload()
    write(root / "config.yaml", [*config(small=False), node("n2")])  # a full one
    source.reload()
    assert source.quick_reloads == 1
    assert source.loaded is not None
    services = source.loaded.snapshot.objects[Kind.SERVICE]
    cached = _cached(source)
    recorded = json.loads((state / FILE_NAME).read_text())
    for key in ("default/s0", "default/s1", "default/s2"):
        obj = services[key]
        assert cached[str(obj.ref)] is obj
        when = obj.metadata.creation_timestamp
        assert when is not None and datetime.fromisoformat(recorded[str(obj.ref)]) == when
    again = ManifestSource(root, Store(), state_dir=state).reload()
    restarted = again.snapshot.objects[Kind.SERVICE]
    assert {k: s.metadata.creation_timestamp for k, s in restarted.items()} == {
        k: s.metadata.creation_timestamp for k, s in services.items()
    }


def test_a_time_written_in_the_manifest_is_not_taken_for_a_stamp(tmp_path: Path) -> None:
    """A manifest's own creationTimestamp is used and not recorded; once it is removed
    from the manifest, the object is a newcomer (stamped now), not still of that time."""
    root, _state, source = started(tmp_path, {"f0.yaml": [service_doc("s0", "dated")]})
    assert source.loaded is not None
    dated = source.loaded.snapshot.objects[Kind.SERVICE]["default/s0"]
    assert dated.metadata.creation_timestamp == datetime(2026, 1, 1, tzinfo=UTC)
    assert "Service/default/s0" not in source._first_seen.seen
    before = datetime.now(UTC)
    write(root / "f0.yaml", [service_doc("s0", "plain")])
    source.reload()
    assert source.loaded is not None
    plain = source.loaded.snapshot.objects[Kind.SERVICE]["default/s0"]
    when = plain.metadata.creation_timestamp
    assert when is not None and when >= before
    assert source._first_seen.seen["Service/default/s0"] == when
    assert _cached(source)["Service/default/s0"] is plain


def test_a_second_definition_left_alone_keeps_the_time_it_was_stamped_with(tmp_path: Path) -> None:
    """A Service defined in two files (the first kept, with its manifest's own time): the
    file cache keeps the second stamped as parsed, so that time is recorded; when the first
    file goes, the second is the Service, with that time — as a read from the state gives
    it (the property test above found it taken for the manifest's own time, unrecorded)."""
    root, state, source = started(tmp_path, {"f0.yaml": [service_doc("s0", "dated")]})
    write(root / "f1.yaml", [service_doc("s0", "plain")])
    source.reload()
    assert source.loaded is not None
    assert any("defined twice" in str(p) for p in source.loaded.snapshot.problems)
    when = source._first_seen.seen["Service/default/s0"]  # the second's, as parsed
    (root / "f0.yaml").unlink()
    source.reload()
    assert source.loaded is not None
    left = source.loaded.snapshot.objects[Kind.SERVICE]["default/s0"]
    assert left.metadata.creation_timestamp == when
    assert source._first_seen.seen["Service/default/s0"] == when
    restarted = ManifestSource(root, Store(), state_dir=state).reload()
    again = restarted.snapshot.objects[Kind.SERVICE]["default/s0"]
    assert again.metadata.creation_timestamp == when


def test_a_service_added_to_a_file_leaves_the_others_of_the_file_alone(tmp_path: Path) -> None:
    """The file's other Services parse again equal to what the cache holds (stamped with
    the same time): they stay the same objects, so only the new one is assigned."""
    root, _state, source = started(tmp_path, {"f0.yaml": [service("s0"), service("s1")]})
    assert source.loaded is not None
    before = dict(source.loaded.snapshot.objects[Kind.SERVICE])
    write(root / "f0.yaml", [service("s0"), service("s1"), service("s2")])
    source.reload()
    assert source.quick_reloads == 1
    assert source._assigner.reconciled == 1 and source._assigner.added == ("default/s2",)
    after = source.loaded.snapshot.objects[Kind.SERVICE]
    assert all(after[k] is before[k] for k in ("default/s0", "default/s1"))
