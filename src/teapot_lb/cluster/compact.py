"""Hold a parsed object in less memory, without changing what it is (issue 19).

A pydantic model instance carries, besides its fields, a set of the fields that were given
(``__pydantic_fields_set__``, 216 to 728 bytes), and parsing gives every object its own copy
of every string, empty dict and small leaf part (a port, an endpoint's conditions). At
100,000 Services that is most of a cache's memory. :func:`compact` walks a parsed object
once, when the cache takes it, and

* shares one fields-set per distinct set of given fields (pydantic only reads it, or copies
  it before adding to it);
* shares equal leaf parts — models whose fields are all scalars (``ServicePort(80/TCP)``,
  ``EndpointConditions(ready)``) — through a table of the most recently used ones (bounded:
  a leaf seen once, such as an ingress IP, costs a table slot only until it is pushed out);
* interns the strings of label, annotation and selector maps (keys and values) and short
  string fields (namespaces, node names).

The object compares equal, dumps the same JSON and has the same type before and after; only
the identity of its inner parts changes. Objects are frozen models, so nobody mutates a
shared part (a dict or list inside one is never changed in place in this code base).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from datetime import datetime
from enum import Enum
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Final, TypeVar

from pydantic import BaseModel

# Values a leaf part may hold (hashable, and equal only when they mean the same).
_SCALARS: Final = (str, int, float, bool, type(None), Enum, IPv4Address, IPv6Address, datetime)
# Strings longer than this (annotations such as a last-applied configuration) are not
# interned: they are rarely repeated and the intern table would only grow.
_INTERN_MAX: Final = 253
# Distinct fields-sets kept; past this, new ones are left unshared (bounded memory).
_FIELDS_SETS_MAX: Final = 4096
# Leaf parts kept for sharing (least recently used dropped first).
_LEAVES_MAX: Final = 4096

T = TypeVar("T")

# (type, given fields) -> (that frozenset, kept once, and the shared set)
_fields_sets: dict[tuple[type[BaseModel], frozenset[str]], tuple[frozenset[str], set[str]]] = {}
_leaves: OrderedDict[tuple[Any, ...], BaseModel] = OrderedDict()


def compact(obj: T) -> T:
    """`obj` with its inner parts shared and its strings interned (see the module's
    docstring); any other object is returned as it is."""
    if isinstance(obj, BaseModel):
        _compact_model(obj)
    return obj


def detached(text: str) -> str:
    """A copy of `text` in memory of its own. A cache that keeps a string taken from a parsed
    API response (a name, an IP, a resourceVersion) keeps alive the allocator's whole block
    (pymalloc arena) that the response's JSON was parsed into: a few such strings per
    object pin nearly all of a 100,000-object list after it is freed (issue 19)."""
    return text.encode().decode() if text else text


def _intern(value: object) -> object:
    if type(value) is str and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def _compact_model(model: BaseModel) -> BaseModel:
    """Compact `model`'s parts in place; return the shared equal leaf, or `model`."""
    fields = model.__dict__
    leaf = True
    for name, value in fields.items():
        if isinstance(value, BaseModel):
            shared = _compact_model(value)
            if shared is not value:
                fields[name] = shared
            leaf = False
        elif type(value) is dict:
            _compact_dict(value)
            leaf = False
        elif type(value) is list:
            _compact_list(value)
            leaf = False
        elif type(value) is str:
            fields[name] = _intern(value)
        elif not isinstance(value, _SCALARS):
            leaf = False
    given = model.__pydantic_fields_set__
    key = (type(model), frozenset(given))
    known = _fields_sets.get(key)
    if known is None and len(_fields_sets) < _FIELDS_SETS_MAX:
        known = _fields_sets[key] = (key[1], set(given))
    if known is not None and known[1] is not given:
        object.__setattr__(model, "__pydantic_fields_set__", known[1])
    if not leaf or model.__pydantic_extra__ or model.__pydantic_private__:
        return model
    # Types too: 1 == True == 1.0 in a tuple, and a port's `1` is not a flag's `True`.
    values = tuple((type(v), v) for v in fields.values())
    leaf_key = (type(model), known[0] if known is not None else key[1], values)
    existing = _leaves.get(leaf_key)
    if existing is not None:
        _leaves.move_to_end(leaf_key)
        return existing
    _leaves[leaf_key] = model
    if len(_leaves) > _LEAVES_MAX:
        _leaves.popitem(last=False)
    return model


def _shared(value: object) -> object:
    """An item of a dict or list, compacted (a model or a string), or `value` itself."""
    if isinstance(value, BaseModel):
        return _compact_model(value)
    return _intern(value)


def _compact_dict(mapping: dict[Any, Any]) -> None:
    if not mapping:
        return
    # Re-inserted under interned keys (same order), so equal keys share one string.
    items = [(_intern(k), _shared(v)) for k, v in mapping.items()]
    mapping.clear()
    mapping.update(items)


def _compact_list(items: list[Any]) -> None:
    items[:] = [_shared(v) for v in items]
