"""The patch algorithms, checked against the RFCs' own examples."""

from __future__ import annotations

from typing import Any

import pytest

from teapot_lb.lab.fakeapi.patch import PatchError, json_patch, merge_patch


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [  # RFC 7386 Appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_matches_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_json_patch_operations_follow_rfc6902() -> None:
    doc = {"foo": ["bar", "baz"], "x": {"y": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/foo/1", "value": "qux"},
            {"op": "remove", "path": "/foo/0"},
            {"op": "move", "from": "/x/y", "path": "/z"},
            {"op": "copy", "from": "/z", "path": "/w"},
            {"op": "add", "path": "/foo/-", "value": "end"},
            {"op": "test", "path": "/z", "value": 1},
        ],
    )
    assert out == {"foo": ["qux", "baz", "end"], "x": {}, "z": 1, "w": 1}
    assert doc == {"foo": ["bar", "baz"], "x": {"y": 1}}  # the input is not modified


def test_json_patch_pointer_escapes() -> None:
    assert json_patch({"a/b": 1, "m~n": 2}, [{"op": "remove", "path": "/a~1b"}]) == {"m~n": 2}
    assert json_patch({"m~n": 2}, [{"op": "replace", "path": "/m~0n", "value": 3}]) == {"m~n": 3}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "frobnicate", "path": "/a"}],
    ],
)
def test_json_patch_errors(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1}, ops)
