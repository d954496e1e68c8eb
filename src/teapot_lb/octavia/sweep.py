"""The VIP orphan sweep: TenantLoadBalancers the driver wrote for load balancers Octavia
does not have (pure core, plus the run over the management API and Octavia's database).

`create_vip_port` writes the request (which holds the VIP address) before Octavia commits
the load balancer. When Octavia fails after that call (a graph it refuses, a database
error, any exception in its create), it rolls back its transaction and calls nothing on
the driver (Octavia 19's load balancer controller): the request would hold its address
forever. The sweep deletes a request (and any gateway objects of its load balancer) when

- it is older than the grace period (longer than any create call: Octavia commits right
  after the driver's `loadbalancer_create` returns), and no create of it is in flight in
  this process; and
- Octavia's database has no such load balancer (asked through the driver agent; a
  failing ask deletes nothing).

It runs in the driver, at most once per interval, when Octavia next makes a driver (one
per API call): no separate process, and a deployment with several API workers sweeps from
each (deleting twice is harmless).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from teapot_lb import log
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.octavia.l7 import LABEL_LOADBALANCER
from teapot_lb.octavia.management import Management

_log = log.get("octavia.sweep")


@dataclass(frozen=True)
class Request:
    """A TenantLoadBalancer the driver wrote: where, for which load balancer, since when."""

    namespace: str
    lb_id: str
    created: datetime | None


def due(
    requests: Iterable[Request],
    *,
    now: datetime,
    grace: timedelta,
    in_flight: Collection[str] = (),
) -> list[Request]:
    """The requests old enough to ask Octavia about (an unknown age is not old enough)."""
    return [
        r
        for r in requests
        if r.created is not None and now - r.created >= grace and r.lb_id not in in_flight
    ]


def orphans(
    due_requests: Iterable[Request], present: Callable[[str], bool | None]
) -> list[Request]:
    """Those Octavia does not have (`present` answers True, False, or None: unknown)."""
    return [r for r in due_requests if present(r.lb_id) is False]


def requests_of(items: Iterable[TenantLoadBalancer]) -> list[Request]:
    return [
        Request(
            namespace=obj.namespace,
            lb_id=obj.metadata.labels[LABEL_LOADBALANCER],
            created=obj.metadata.creation_timestamp,
        )
        for obj in items
        if LABEL_LOADBALANCER in (obj.metadata.labels or {})
    ]


async def sweep(
    management: Management,
    in_octavia: Callable[[str], Awaitable[bool | None]],
    *,
    now: datetime,
    grace: timedelta,
    in_flight: Collection[str] = (),
) -> list[Request]:
    """Delete the orphaned requests (and their gateway objects); returns them."""
    found = await management.client.list(TENANT_LOAD_BALANCERS, label_selector=LABEL_LOADBALANCER)
    parsed = [TenantLoadBalancer.model_validate(item) for item in found.items]
    candidates = due(requests_of(parsed), now=now, grace=grace, in_flight=in_flight)
    answers = {r.lb_id: await in_octavia(r.lb_id) for r in candidates}
    gone = orphans(candidates, answers.__getitem__)
    for request in gone:
        _log.warning(
            "orphaned VIP request deleted",
            lb=request.lb_id,
            namespace=request.namespace,
            age_s=round((now - request.created).total_seconds(), 1) if request.created else None,
        )
        await management.write_gateway(request.namespace, request.lb_id, [])
        await management.delete(request.namespace, request.lb_id)
    return gone


async def asked(get: Callable[[str], object], lb_id: str) -> bool | None:
    """Whether Octavia has the load balancer (`get`: DriverLibrary.get_loadbalancer);
    None when the driver agent cannot say."""
    try:
        return await asyncio.to_thread(get, lb_id) is not None
    except Exception as err:  # the driver agent down or busy: ask again next time
        _log.warning("sweep: Octavia not asked", lb=lb_id, error=repr(err))
        return None


__all__ = ["Request", "asked", "due", "orphans", "requests_of", "sweep"]
