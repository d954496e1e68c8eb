"""What the gateway writes back on the tenants' mirrored objects (pure): Gateway API
status in its own style (Gateway: Accepted, Programmed, addresses, listeners with
attachedRoutes; routes: one entry per parentRef under our controllerName with Accepted
and ResolvedRefs), and for an Ingress its `status.loadBalancer` — or, refused, no
address and the reason in an annotation the tenant agent turns into an Event (an Ingress
has no conditions).

A condition keeps its lastTransitionTime while its status and reason stay the same, so
writing the same decision twice changes nothing (the reconcile then skips the write).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teapot_lb.addresses import IPAddress
from teapot_lb.gateway.control.l7mirror import ANNOTATION_REFUSED
from teapot_lb.gateway.translate import Condition, ObjectResult
from teapot_lb.model.common import dump
from teapot_lb.model.gateway_api import GATEWAY_GROUP, ROUTE_KINDS_OF_PROTOCOL, Gateway
from teapot_lb.model.ingress import GATEWAY_CONTROLLER, Ingress
from teapot_lb.tenancy.l7vet import L7Rule


def _conditions(
    wanted: Sequence[Condition],
    previous: Sequence[dict[str, Any]],
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    before = {c.get("type"): c for c in previous}
    out = []
    for c in wanted:
        status = "True" if c.status else "False"
        old = before.get(c.type) or {}
        same = old.get("status") == status and old.get("reason") == c.reason
        entry: dict[str, Any] = {
            "type": c.type,
            "status": status,
            "reason": c.reason,
            "message": c.message[:32768],
            "lastTransitionTime": old.get("lastTransitionTime", now) if same else now,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        out.append(entry)
    return out


def refusal_text(result: ObjectResult) -> str:
    """`Reason: field: message; ...` of a refused object (reason: the first rule broken),
    or of the parts an accepted one has left out."""
    refusals = result.refusals or result.dropped
    return f"{refusals[0].rule.value}: " + "; ".join(str(r) for r in refusals)


def _refused(result: ObjectResult) -> Condition:
    return Condition("Accepted", False, result.refusals[0].rule.value, refusal_text(result))


# A dedicated address that cannot be had: the Gateway is accepted, not programmed
# (Gateway API's Programmed reasons).
_NOT_PROGRAMMED = (L7Rule.ADDRESS_NOT_USABLE, L7Rule.ADDRESS_NOT_ASSIGNED)


def served_addresses(result: ObjectResult, addresses: Sequence[IPAddress]) -> tuple[IPAddress, ...]:
    """Where an object is served: its dedicated address, the shared `addresses`, or
    nowhere (refused)."""
    if not result.accepted:
        return ()
    return (result.address,) if result.address is not None else tuple(addresses)


def ingress_status(result: ObjectResult, addresses: Sequence[IPAddress]) -> dict[str, Any]:
    ips = [{"ip": str(a)} for a in served_addresses(result, addresses)]
    return {"loadBalancer": {"ingress": ips}}


def ingress_refusal(result: ObjectResult) -> str | None:
    """The annotation's value: None when the Ingress is served whole; what was refused
    otherwise (the Ingress, or its rules without host while the others are served)."""
    return None if result.accepted and not result.dropped else refusal_text(result)


def gateway_status(
    result: ObjectResult, addresses: Sequence[IPAddress], now: str
) -> dict[str, Any]:
    obj = result.obj
    assert isinstance(obj, Gateway)
    previous = obj.status
    generation = obj.metadata.generation
    addresses = served_addresses(result, addresses)
    first = result.refusals[0] if result.refusals else None
    if first is not None and all(r.rule in _NOT_PROGRAMMED for r in result.refusals):
        wanted = [
            Condition("Accepted", True, "Accepted"),
            Condition("Programmed", False, first.rule.value, refusal_text(result)),
        ]
    elif not result.accepted:
        wanted = [_refused(result), Condition("Programmed", False, "Invalid", "not accepted")]
    else:
        wanted = [
            Condition("Accepted", True, "Accepted"),
            Condition(
                "Programmed", bool(addresses), "Programmed" if addresses else "AddressNotAssigned"
            ),
        ]
    old_listeners = {x.name: x.conditions for x in previous.listeners}
    listeners = []
    for listener in obj.spec.listeners:
        lr = result.listeners.get(listener.name)
        kinds = ROUTE_KINDS_OF_PROTOCOL.get(listener.protocol, ())
        conditions = (
            lr.conditions if lr is not None else [_refused(result)] if result.refusals else []
        )
        listeners.append(
            {
                "name": listener.name,
                "attachedRoutes": lr.attached if lr is not None else 0,
                "supportedKinds": [{"group": GATEWAY_GROUP, "kind": k} for k in kinds],
                "conditions": _conditions(
                    conditions, old_listeners.get(listener.name, []), now, generation
                ),
            }
        )
    return {
        "addresses": [{"type": "IPAddress", "value": str(a)} for a in addresses],
        "conditions": _conditions(wanted, previous.conditions, now, generation),
        "listeners": listeners,
    }


def route_status(result: ObjectResult, now: str) -> dict[str, Any]:
    """status.parents: other controllers' entries kept, ours one per parentRef."""
    obj = result.obj
    assert not isinstance(obj, Ingress | Gateway)
    generation = obj.metadata.generation
    previous = {
        _ref_key(p.parent_ref.model_dump(by_alias=True, exclude_none=True)): p.conditions
        for p in obj.status.parents
        if p.controller_name == GATEWAY_CONTROLLER
    }
    others = [dump(p) for p in obj.status.parents if p.controller_name != GATEWAY_CONTROLLER]
    not_permitted = [r for r in result.refusals if r.rule is L7Rule.BACKEND_NOT_ALLOWED]
    if not_permitted:
        why = "; ".join(f"{r.field}: {r.message}" for r in not_permitted)
        resolved = Condition("ResolvedRefs", False, "RefNotPermitted", why)
    elif result.unresolved:
        why = "; ".join([*(f"{r.field}: {r.message}" for r in result.unresolved), *result.notes])
        resolved = Condition("ResolvedRefs", False, result.unresolved[0].rule.value, why)
    elif result.notes:
        resolved = Condition("ResolvedRefs", False, "BackendNotFound", "; ".join(result.notes))
    else:
        resolved = Condition("ResolvedRefs", True, "ResolvedRefs")
    parents = []
    refs = [pr.parent for pr in result.parents] if result.accepted else obj.spec.parent_refs
    for i, parent in enumerate(refs):
        if result.accepted:
            wanted = [*result.parents[i].conditions, resolved]
        else:
            wanted = [_refused(result), resolved]
        ref = parent.model_dump(by_alias=True, exclude_none=True)
        parents.append(
            {
                "parentRef": ref,
                "controllerName": GATEWAY_CONTROLLER,
                "conditions": _conditions(wanted, previous.get(_ref_key(ref), []), now, generation),
            }
        )
    return {"parents": others + parents}


def denied_status(
    kind: str, raw: dict[str, Any], reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """The status of a tenant's Gateway or route whose mirror the management API server
    refused (the webhook): `Accepted=False` with the rule and its message (a route: one
    entry of our controller per parentRef, other controllers' kept). None for other kinds
    (an Ingress has no conditions: its Event says it)."""
    generation = (raw.get("metadata") or {}).get("generation")
    status = raw.get("status") or {}
    refused = Condition("Accepted", False, reason, message)
    if kind == "Gateway":
        wanted = [refused, Condition("Programmed", False, "Invalid", "not accepted")]
        return {
            "addresses": [],
            "conditions": _conditions(wanted, status.get("conditions") or [], now, generation),
        }
    if not kind.endswith("Route"):
        return None
    ours = {
        _ref_key(p.get("parentRef") or {}): p.get("conditions") or []
        for p in status.get("parents") or []
        if p.get("controllerName") == GATEWAY_CONTROLLER
    }
    others = [
        p for p in status.get("parents") or [] if p.get("controllerName") != GATEWAY_CONTROLLER
    ]
    parents = [
        {
            "parentRef": ref,
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": _conditions([refused], ours.get(_ref_key(ref), []), now, generation),
        }
        for ref in (raw.get("spec") or {}).get("parentRefs") or []
    ]
    return {"parents": others + parents}


def _ref_key(ref: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(ref.get(k, "")) for k in ("group", "kind", "namespace", "name", "sectionName", "port")
    )


__all__ = [
    "ANNOTATION_REFUSED",
    "denied_status",
    "gateway_status",
    "ingress_refusal",
    "ingress_status",
    "refusal_text",
    "route_status",
    "served_addresses",
]
