"""LabelSelector: Kubernetes matching semantics and the overlap test used for peers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teapot_lb.model import LabelSelector, matches_any, selector_lists_may_overlap


def selector(match_labels: dict[str, str] | None = None, *exprs: tuple[Any, ...]) -> LabelSelector:
    expressions = [{"key": k, "operator": op, "values": list(vals)} for k, op, *vals in exprs]
    return LabelSelector.model_validate(
        {"matchLabels": match_labels or {}, "matchExpressions": expressions}
    )


@pytest.mark.parametrize(
    ("sel", "labels", "matches"),
    [
        (selector(), {}, True),
        (selector({"zone": "a"}), {"zone": "a", "x": "y"}, True),
        (selector({"zone": "a"}), {"zone": "b"}, False),
        (selector(None, ("zone", "In", "a", "b")), {"zone": "b"}, True),
        (selector(None, ("zone", "In", "a", "b")), {}, False),
        (selector(None, ("zone", "NotIn", "a")), {}, True),
        (selector(None, ("zone", "NotIn", "a")), {"zone": "a"}, False),
        (selector(None, ("gpu", "Exists")), {"gpu": ""}, True),
        (selector(None, ("gpu", "DoesNotExist")), {"gpu": ""}, False),
        (selector({"zone": "a"}, ("gpu", "DoesNotExist")), {"zone": "a"}, True),
    ],
)
def test_matches_follows_kubernetes_semantics(
    sel: LabelSelector, labels: dict[str, str], matches: bool
) -> None:
    assert sel.matches(labels) is matches


def test_an_empty_selector_list_means_every_node() -> None:
    assert matches_any([], {"any": "thing"})
    assert not matches_any([selector({"zone": "a"})], {})


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (selector({"zone": "a"}), selector({"zone": "b"}), False),
        (selector({"zone": "a"}), selector({"rack": "1"}), True),
        (
            selector(None, ("zone", "In", "a", "b")),
            selector(None, ("zone", "NotIn", "a", "b")),
            False,
        ),
        (selector(None, ("zone", "In", "a", "b")), selector(None, ("zone", "NotIn", "a")), True),
        (selector(None, ("gpu", "Exists")), selector(None, ("gpu", "DoesNotExist")), False),
        (selector({"gpu": "x"}), selector(None, ("gpu", "DoesNotExist")), False),
        (selector(), selector({"zone": "a"}), True),
    ],
)
def test_may_overlap_is_false_only_for_provably_disjoint_selectors(
    a: LabelSelector, b: LabelSelector, overlap: bool
) -> None:
    assert a.may_overlap(b) is overlap
    assert b.may_overlap(a) is overlap


def test_selector_lists_overlap_if_any_pair_does() -> None:
    rack1, rack2 = selector({"zone": "1"}), selector({"zone": "2"})
    assert not selector_lists_may_overlap([rack1], [rack2])
    assert selector_lists_may_overlap([rack1, rack2], [rack2])
    assert selector_lists_may_overlap([], [rack2])


keys = st.sampled_from(["zone", "rack", "gpu"])
values = st.sampled_from(["a", "b", "c"])
requirements = st.one_of(
    st.tuples(keys, st.sampled_from(["In", "NotIn"]), values, values),
    st.tuples(keys, st.sampled_from(["Exists", "DoesNotExist"])),
)
selectors = st.builds(
    lambda labels, exprs: selector(labels, *exprs),
    st.dictionaries(keys, values, max_size=2),
    st.lists(requirements, max_size=3),
)


@given(selectors, selectors, st.dictionaries(keys, values))
def test_may_overlap_never_misses_a_label_set_both_match(
    a: LabelSelector, b: LabelSelector, labels: dict[str, str]
) -> None:
    if a.matches(labels) and b.matches(labels):
        assert a.may_overlap(b)
