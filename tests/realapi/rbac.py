"""What an identity used (from the apiserver's audit log) against what its roles grant
(from the rendered chart): the least-privilege check of tests/realapi/test_rbac.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Permission = tuple[str, str, str]
"""(apiGroup, resource[/subresource], verb), apiGroup "" for the core group."""


def used(events: Iterable[dict[str, Any]]) -> set[Permission]:
    """The permissions exercised by these audit events (allowed or not)."""
    out: set[Permission] = set()
    for event in events:
        ref = event.get("objectRef")
        if not ref:
            continue  # a non-resource URL (/version, /api)
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        out.add((ref.get("apiGroup", ""), resource, event["verb"]))
    return out


def granted(objects: Iterable[dict[str, Any]], *roles: tuple[str, str]) -> set[Permission]:
    """The permissions of these (kind, name) roles in the rendered objects."""
    out: set[Permission] = set()
    for obj in objects:
        if (obj["kind"], obj["metadata"]["name"]) not in roles:
            continue
        for rule in obj["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    out.update((group, resource, verb) for verb in rule["verbs"])
    return out


def table(permissions: Iterable[Permission]) -> str:
    """Markdown rows `| group | resource | verbs |`, one per (group, resource)."""
    rows: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb in permissions:
        rows.setdefault((group or "core", resource), set()).add(verb)
    return "\n".join(
        f"| {g} | {r} | {', '.join(sorted(v))} |" for (g, r), v in sorted(rows.items())
    )
