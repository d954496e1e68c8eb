"""Standalone Teapot (no Kubernetes): the manager and the tenant agents on manifest
directories, with the same core as in a cluster.

    ROOT/management/          AddressPools and Tenants (the operator's)
    ROOT/tenants/NAME/        tenant NAME's requests (TenantLoadBalancers). The directory is
                              the tenant's identity: a request in it belongs to Tenant NAME
                              whatever namespace its file claims (a claim of another is
                              refused), so a tenant that can write only its own directory
                              cannot speak for another.
    ROOT/status/NAME.json     written by the manager: each request's status, the Tenant's
                              usage, and the routes route mode wants.
    ROOT/announce/            the standalone announcer's manifest directory (route mode,
                              `teapot-lb run --manifests ROOT/announce`): the manager writes
                              `tenants.yaml` there (the AddressPools, the Tenants and every
                              Programmed request with its status); the operator puts the
                              BGPPeers, BGPAdvertisements and Nodes beside it.

An agent reads its cluster's manifests (Services, Nodes, EndpointSlices) and writes its
requests as ROOT/tenants/NAME/CLUSTER.yaml, then reads the Services' IPs back from
ROOT/status/NAME.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from teapot_lb import log
from teapot_lb.cluster import Store
from teapot_lb.model.common import dump
from teapot_lb.model.manifest import load
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer, TenantLoadBalancerStatus
from teapot_lb.standalone.watch import SETTLE_S, ManifestWatch, WatchUnavailable
from teapot_lb.tenancy.book import ManagementView, TenantBook, tenant_status
from teapot_lb.tenancy.programmed import is_programmed
from teapot_lb.tenancy.request import TEAPOT_CLOUD_CLASS, desired_request, request_name
from teapot_lb.tenancy.vet import Refusal, Rule


@dataclass
class ManagerRun:
    """One pass of the standalone manager: per tenant, its requests' statuses (by name),
    its Tenant status, and its routes; problems found reading the directories."""

    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _previous(root: Path, tenant: str) -> Mapping[str, Any]:
    try:
        data = json.loads((root / "status" / f"{tenant}.json").read_text())
    except (OSError, ValueError):
        return {}
    requests = data.get("requests") if isinstance(data, dict) else None
    return requests if isinstance(requests, dict) else {}


def _with_status(request: TenantLoadBalancer, status: object) -> TenantLoadBalancer:
    try:
        parsed = TenantLoadBalancerStatus.model_validate(status)
    except ValueError:
        return request
    return request.model_copy(update={"status": parsed})


def manage(root: Path, now: datetime, book: TenantBook | None = None) -> ManagerRun:
    """Read ROOT, vet and allocate every request, write ROOT/status/*.json; the book
    starts from the statuses written last time (IPs stay where they were)."""
    run = ManagerRun()
    management = load([root / "management"])
    run.problems += management.problems
    pools = {o.name: o for o in management.objects if isinstance(o, AddressPool)}
    tenants = {o.name: o for o in management.objects if isinstance(o, Tenant)}
    requests: dict[str, TenantLoadBalancer] = {}
    owner_of: dict[str, str] = {}
    refused: dict[str, tuple[str, Refusal[Rule]]] = {}
    tenants_dir = root / "tenants"
    for directory in sorted(p for p in tenants_dir.glob("*") if p.is_dir()):
        name = directory.name
        manifest = load([directory])
        run.problems += manifest.problems
        tenant = tenants.get(name)
        previous = _previous(root, name)
        for obj in manifest.objects:
            if not isinstance(obj, TenantLoadBalancer):
                continue
            if tenant is None:
                continue  # no Tenant of that name: its directory is nobody's
            claimed = obj.metadata.namespace
            own = tenant.spec.namespace
            obj = obj.model_copy(update={"metadata": obj.metadata.model_copy(update={
                "namespace": own})})  # fmt: skip
            key = f"{own}/{obj.name}"
            if claimed not in (None, own):
                refused[key] = (name, Refusal(
                    Rule.INVALID_REQUEST, "metadata.namespace",
                    f"a request in tenants/{name}/ belongs to Tenant {name} (namespace "
                    f"{own}), not to namespace {claimed!r}"))  # fmt: skip
            if obj.name in previous:
                obj = _with_status(obj, previous[obj.name])
            requests[key] = obj
            owner_of[key] = name
    view = ManagementView(tenants, {k: v for k, v in requests.items() if k not in refused}, pools)
    book = book or TenantBook()
    book.rebuild(view)
    per_tenant: dict[str, dict[str, Any]] = {
        name: {"requests": {}, "routes": []} for name in tenants
    }
    for key in sorted(requests):
        tenant_name = owner_of[key]
        name = key.split("/", 1)[1]
        if key in refused:
            outcome = book.refuse(key, requests[key], tenant_name, [refused[key][1]], now)
        else:
            outcome = book.decide(view, key, now)
        per_tenant[tenant_name]["requests"][name] = outcome.status
        per_tenant[tenant_name]["routes"] += [
            {"prefix": r.prefix, "nextHops": [str(h) for h in r.next_hops], "request": name}
            for r in outcome.routes
        ]
    for name, tenant in tenants.items():
        not_held = sum(
            1 for k, owner in owner_of.items() if owner == name and book.holder_tenant(k) is None
        )
        per_tenant[name]["tenant"] = tenant_status(tenant, book.usage(name), not_held, now)
        _write_if_changed(root / "status" / f"{name}.json", json.dumps(per_tenant[name], indent=2))
    run.statuses = per_tenant
    announced: list[BaseModel] = [*pools.values(), *tenants.values()]
    for key in sorted(requests):
        tenant_name, name = owner_of[key], key.split("/", 1)[1]
        decided = _with_status(requests[key], per_tenant[tenant_name]["requests"][name])
        if key not in refused and is_programmed(decided):
            announced.append(decided)
    _write_if_changed(root / "announce" / ANNOUNCED, announcer_input(announced))
    return run


ANNOUNCED = "tenants.yaml"


def announcer_input(objects: list[BaseModel]) -> str:
    """The announcer's manifests: the pools and Tenants (the bounds it checks the statuses
    against once more) and the vetted requests with the statuses the manager decided; the
    announcer announces the Programmed ones (:mod:`teapot_lb.tenancy.programmed`)."""
    return yaml.safe_dump_all([dump(o) for o in objects], sort_keys=False)


def _write_if_changed(path: Path, text: str) -> None:
    """A pass that changes nothing leaves the file alone (an announcer watching it does
    not reload for nothing)."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return
    _atomic_write(path, text)


def agent_sync(
    cluster_dir: Path,
    root: Path,
    tenant: str,
    cluster: str,
    *,
    load_balancer_class: str = TEAPOT_CLOUD_CLASS,
    unclassed: bool = False,
) -> dict[str, list[str]]:
    """One pass of a standalone agent: the cluster's Services as requests in
    ROOT/tenants/TENANT/CLUSTER.yaml; returns each Service's IPs from the last status."""
    manifest = load([cluster_dir], ignore_unknown_kinds=True)
    store = Store()
    for obj in manifest.objects:
        if obj.kind in ("Service", "Node", "EndpointSlice"):
            store.put_object(obj)
    view = store.view()
    previous = _previous(root, tenant)
    bodies = []
    ips: dict[str, list[str]] = {}
    for key, service in sorted(view.services.items()):
        if not service.is_handled(load_balancer_class, unclassed):
            continue
        try:
            body = desired_request(service, view, cluster, "")
        except ValueError:
            continue
        del body["metadata"]["namespace"]  # the directory says whose it is
        bodies.append(body)
        name = request_name(cluster, service.namespace, service.name)
        status = previous.get(name) or {}
        ips[key] = list(status.get("addresses") or []) if isinstance(status, dict) else []
    text = yaml.safe_dump_all(bodies, sort_keys=False) if bodies else ""
    _write_if_changed(root / "tenants" / tenant / f"{cluster}.yaml", text)
    return ips


def _stamp(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for base in paths:
        for path in sorted(base.rglob("*")) if base.is_dir() else [base]:
            with contextlib.suppress(OSError):
                st = path.stat()
                out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


class DirectoryWake:
    """Wakes a standalone loop when one of some directories changes (inotify, through the
    manifest watch of :mod:`teapot_lb.standalone.watch`), or after ``interval_s`` anyway
    (and only then where inotify is unavailable). Waking is a hint: the caller compares
    what it reads, so a spurious wake costs one look."""

    def __init__(self, paths: list[Path]) -> None:
        self._woken = asyncio.Event()
        self._watches: list[ManifestWatch] = []
        loop = asyncio.get_running_loop()
        for path in paths:
            path.mkdir(parents=True, exist_ok=True)
            try:
                watch = ManifestWatch(path, self._woken.set)
                watch.start(loop)
            except WatchUnavailable:
                continue  # the interval alone, then
            self._watches.append(watch)

    async def next(self, interval_s: float) -> None:
        for watch in self._watches:
            if watch.rescan_needed:
                with contextlib.suppress(WatchUnavailable):
                    watch.rescan()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval_s):
                await self._woken.wait()
        await asyncio.sleep(SETTLE_S)  # the rest of a burst of writes
        self._woken.clear()

    def close(self) -> None:
        for watch in self._watches:
            watch.close()


async def run_manager(root: Path, *, interval_s: float = 1.0, once: bool = False) -> None:
    """`teapot-lb manager --manifests ROOT`: a pass whenever ROOT's inputs change."""
    book = TenantBook()
    inputs = [root / "management", root / "tenants"]
    wake = None if once else DirectoryWake(inputs)
    try:
        await _manager_loop(root, book, inputs, wake, interval_s)
    finally:
        if wake is not None:
            wake.close()


async def _manager_loop(
    root: Path,
    book: TenantBook,
    inputs: list[Path],
    wake: DirectoryWake | None,
    interval_s: float,
) -> None:
    logger = log.get("manager.standalone")
    seen: tuple[tuple[str, int, int], ...] | None = None
    while True:
        stamp = _stamp(inputs)
        if stamp != seen:
            run = manage(root, datetime.now(UTC), book)
            for problem in run.problems:
                logger.warning("problem", problem=str(problem))
            requests = sum(len(t["requests"]) for t in run.statuses.values())
            logger.info("pass", tenants=len(run.statuses), requests=requests)
            seen = stamp  # read before the pass: a change during it makes another
        if wake is None:
            return
        await wake.next(interval_s)


async def run_agent(
    cluster_dir: Path,
    root: Path,
    tenant: str,
    cluster: str,
    *,
    interval_s: float = 1.0,
    once: bool = False,
    load_balancer_class: str = TEAPOT_CLOUD_CLASS,
    unclassed: bool = False,
) -> None:
    """`teapot-lb tenant-agent --manifests DIR`: requests out, IPs back into
    ROOT/status/TENANT.CLUSTER.services.json (the standalone Service status)."""
    out = root / "status" / f"{tenant}.{cluster}.services.json"
    wake = None if once else DirectoryWake([cluster_dir, root / "status"])
    try:
        await _agent_loop(cluster_dir, root, tenant, cluster, out, wake, interval_s,
                          load_balancer_class, unclassed)  # fmt: skip
    finally:
        if wake is not None:
            wake.close()


async def _agent_loop(
    cluster_dir: Path,
    root: Path,
    tenant: str,
    cluster: str,
    out: Path,
    wake: DirectoryWake | None,
    interval_s: float,
    load_balancer_class: str,
    unclassed: bool,
) -> None:
    while True:
        ips = agent_sync(
            cluster_dir,
            root,
            tenant,
            cluster,
            load_balancer_class=load_balancer_class,
            unclassed=unclassed,
        )
        _write_if_changed(out, json.dumps(ips, indent=2, sort_keys=True))
        if wake is None:
            return
        await wake.next(interval_s)


__all__ = [
    "ANNOUNCED",
    "ManagerRun",
    "agent_sync",
    "announcer_input",
    "manage",
    "run_agent",
    "run_manager",
]
