"""Validation with kept per-Service results gives what validation from nothing gives."""

from __future__ import annotations

from typing import Any

from model.builders import parse, pool
from teapot_lb.kept import Kept
from teapot_lb.model import ApiObject
from teapot_lb.validation import validate
from teapot_lb.validation.config import OwnChecks


def svc(name: str, **notes: str) -> ApiObject:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": notes},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    return parse(doc)


def messages(objects: list[ApiObject], kept: Kept[OwnChecks] | None = None) -> list[str]:
    return sorted(str(p) for p in validate(objects, kept=kept))


def test_kept_results_follow_the_services_and_the_pools() -> None:
    kept: Kept[OwnChecks] = Kept()
    small = parse(pool("p1", "203.0.113.0/30"))
    asks = svc("a", **{"lb.teapot.io/ips": "203.0.113.9"})  # outside p1
    both = svc("b", **{"lb.teapot.io/ips": "203.0.113.1"})
    objects = [small, asks, both]
    first = messages(objects, kept)
    assert first == messages(objects) and any("203.0.113.9" in m for m in first)
    # The same objects again: the same answer (from the kept results).
    assert messages(objects, kept) == first
    # A Service replaced: its new problems, not its old ones.
    objects[1] = svc("a", **{"lb.teapot.io/ips": "203.0.113.2"})
    assert messages(objects, kept) == messages(objects) == []
    # The pool replaced by one that no longer holds b's IP: checked again.
    objects[0] = parse(pool("p1", "203.0.113.8/30"))
    again = messages(objects, kept)
    assert again == messages(objects) and any("203.0.113.1" in m for m in again)


def test_a_result_is_held_only_for_its_own_object() -> None:
    kept: Kept[str] = Kept()
    a = svc("a")
    kept.begin()
    kept.put(a, "a's")
    kept.end()
    kept.begin()
    assert kept.get(a) == "a's" and kept.get(svc("a")) is None  # (an equal object: no)
    kept.end()
    kept.begin()  # a pass that does not ask for a: its result is let go, and a with it
    kept.end()
    del a
    b = svc("b")  # (may well be where a was)
    kept.begin()
    assert kept.get(b) is None
    kept.end()
