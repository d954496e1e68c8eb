"""The re-list diff: the events it emits turn the old cache into the new list."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.kube.informer import EventType, cache_diff, version_diff
from teapot_lb.kube.resources import KubeObject


def obj(name: str, rv: int) -> KubeObject:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


caches = st.dictionaries(st.sampled_from([f"ns/o{i}" for i in range(8)]), st.integers(1, 4)).map(
    lambda d: {k: obj(k.split("/")[1], rv) for k, rv in d.items()}
)


@given(caches, caches)
def test_applying_the_diff_to_the_old_cache_gives_the_new_one(
    old: dict[str, KubeObject], new: dict[str, KubeObject]
) -> None:
    cache = dict(old)
    for type_, key, value in cache_diff(old, new):
        if type_ is EventType.DELETED:
            assert key in cache
            del cache[key]
        else:
            assert (key in cache) == (type_ is EventType.MODIFIED)
            cache[key] = value
    assert cache == new


@given(caches)
def test_an_unchanged_list_produces_no_events(old: dict[str, KubeObject]) -> None:
    assert cache_diff(old, dict(old)) == []


def test_deleted_objects_carry_their_last_known_state() -> None:
    last = obj("a", 7)
    assert cache_diff({"ns/a": last}, {}) == [(EventType.DELETED, "ns/a", last)]


@given(caches, caches)
def test_a_cache_of_versions_only_gives_the_same_events_with_stubs_for_deletions(
    old: dict[str, KubeObject], new: dict[str, KubeObject]
) -> None:
    versions = {key: o["metadata"]["resourceVersion"] for key, o in old.items()}
    # A deleted object is named by a stub: its namespace, name and last version, which
    # here is the whole of the test's objects.
    assert version_diff(versions, new) == cache_diff(old, new)
