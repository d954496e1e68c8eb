"""Hold a parsed object in less memory, without changing what it is (issue 19).

A pydantic model instance carries, besides its fields, a set of the fields that were given
(``__pydantic_fields_set__``, 216 to 728 bytes), and parsing gives every object its own copy
of every string, map, list and part, equal or not to the next object's: a Service read from
a manifest has its own empty status (two models, a list: ~600 bytes), its own ports, its own
``{}`` for labels. At 100,000 Services that is most of a cache's memory. :func:`compact`
walks a parsed object once, when a cache takes it, and

* shares one fields-set per distinct set of given fields (pydantic only reads it, or copies
  it before adding to it);
* shares equal parts (hash-consing): a part whose contents are all scalars or parts
  already shared — a port, an empty status, a spec, an endpoint's conditions, a list of
  shared parts, a label map — is replaced by the equal one met before, found by a table
  of the most recently used parts (bounded: a part seen once, such as an ingress with its
  own IP, costs a table slot only until it is pushed out). A part is keyed by its type,
  its given fields and its contents, where a shared part inside it counts by its identity
  (the table keeps the outer part, so the inner one stays alive and its identity is not
  reused);
* interns the strings of maps (keys and values) and short string fields (namespaces,
  node names).

The object itself is never replaced (only its parts): it compares equal, dumps the same
JSON and has the same type before and after. Objects are frozen models, so nobody mutates
a shared part, and a map or list inside one is never changed in place in this code base.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Final, TypeVar

from pydantic import BaseModel

# Values a part may hold as they are (hashable, and equal only when they mean the same).
_SCALARS: Final = (str, int, float, bool, type(None), Enum, IPv4Address, IPv6Address, datetime)
# Strings longer than this (annotations such as a last-applied configuration) are not
# interned, and a part holding one is not shared: they are rarely repeated, and the tables
# would only grow.
_INTERN_MAX: Final = 253
# Distinct fields-sets kept; past this, new ones are left unshared (bounded memory).
_FIELDS_SETS_MAX: Final = 4096
# Parts kept for sharing (least recently used dropped first).
_PARTS_MAX: Final = 16384

T = TypeVar("T")
# A part's key: its contents (scalars as (type, value): 1 == True == 1.0 in a tuple, and a
# port's `1` is not a flag's `True`), shared parts inside it by identity. None: not shared.
Key = tuple[Any, ...]

# (type, given fields) -> (that frozenset, kept once, and the shared set)
_fields_sets: dict[tuple[type[BaseModel], frozenset[str]], tuple[frozenset[str], set[str]]] = {}
_parts: OrderedDict[Key, object] = OrderedDict()
# The key of each part in the table, by identity: an object compacted again (a copy made
# from a compacted one, taken by another cache) finds its shared parts without a walk.
_shared_keys: dict[int, Key] = {}
_CONTAINERS: Final = (list, dict)
_lock = threading.Lock()


def compact(obj: T) -> T:
    """`obj` with its parts shared and its strings interned (see the module's docstring);
    any other object is returned as it is. `obj` itself is kept (never swapped for an
    equal one met before): only what it holds is."""
    if isinstance(obj, BaseModel):
        with _lock:  # (the tables are shared by every thread's caches)
            _compact_model(obj)
    return obj


def _intern(value: object) -> object:
    if type(value) is str and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def _compact_model(model: BaseModel) -> Key | None:
    """Compact `model`'s parts in place; its key (None: it is not to be shared)."""
    keys = _compact_in(model.__dict__, model.__dict__.items())
    given = model.__pydantic_fields_set__
    fkey = (type(model), frozenset(given))
    known = _fields_sets.get(fkey)
    if known is None and len(_fields_sets) < _FIELDS_SETS_MAX:
        known = _fields_sets[fkey] = (fkey[1], set(given))
    if known is not None and known[1] is not given:
        object.__setattr__(model, "__pydantic_fields_set__", known[1])
    if keys is None or model.__pydantic_extra__ or model.__pydantic_private__:
        return None
    return (type(model), known[0] if known is not None else fkey[1], tuple(keys))


def _part(value: object) -> tuple[object, Key | None]:
    """`value` compacted — the equal part met before, if any — and its key."""
    key: Key | None
    if type(value) is str:
        if len(value) > _INTERN_MAX:
            return value, None
        text = sys.intern(value)
        return text, (str, text)
    if type(value) in _CONTAINERS or isinstance(value, BaseModel):
        shared = _shared_keys.get(id(value))
        if shared is not None and _parts.get(shared) is value:
            _parts.move_to_end(shared)
            return value, ("@", id(value))  # shared already: nothing inside to look at
    if isinstance(value, BaseModel):
        key = _compact_model(value)
    elif type(value) is list:
        key = _compact_items(value)
    elif type(value) is dict:
        key = _compact_map(value)
    elif isinstance(value, _SCALARS):
        return value, (type(value), value)
    else:
        return value, None
    if key is None:
        return value, None
    return _shared(key, value)


def _shared(key: Key, value: object) -> tuple[object, Key]:
    """The part met before under `key` (or `value`, now the one), and its key by identity."""
    existing = _parts.get(key)
    if existing is not None:
        _parts.move_to_end(key)
        return existing, ("@", id(existing))
    _parts[key] = value
    _shared_keys[id(value)] = key
    if len(_parts) > _PARTS_MAX:
        _, dropped = _parts.popitem(last=False)
        _shared_keys.pop(id(dropped), None)
    return value, ("@", id(value))


def _compact_items(items: list[Any]) -> Key | None:
    keys = _compact_in(items, enumerate(items))
    return None if keys is None else (list, tuple(keys))


def _compact_in(into: Any, places: Iterable[tuple[Any, object]]) -> list[Key] | None:
    """Each value (of a model's fields, a list's items) compacted, and put back in its place
    in `into` if it changed; their keys (None: one of them is not to be shared)."""
    keys: list[Key] | None = []
    for place, value in places:
        shared, key = _part(value)
        if shared is not value:
            into[place] = shared
        if key is None:
            keys = None
        elif keys is not None:
            keys.append(key)
    return keys


def _compact_map(mapping: dict[Any, Any]) -> Key | None:
    if not mapping:
        return (dict, ())
    keys: list[Key] | None = []
    items = []
    same = True
    for k, v in mapping.items():
        name = _intern(k)
        shared, key = _part(v)
        items.append((name, shared))
        same = same and name is k and shared is v
        if key is None or type(name) is not str:
            keys = None
        elif keys is not None:
            keys.append((name, key))
    if not same:
        # Re-inserted under interned keys (same order), so equal keys share one string. (A
        # map already compacted is left alone: it may be shared, and read meanwhile.)
        mapping.clear()
        mapping.update(items)
    return None if keys is None else (dict, tuple(keys))
