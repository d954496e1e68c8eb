"""Rules for LoadBalancer Services: requested IPs, pool annotation, families, IP sharing.

Pool-dependent rules only run when the set holds at least one AddressPool, so that a
directory of Services alone can still be checked for what it says by itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from teapot_lb.model.common import IPAddress, creation_order
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem, problem
from teapot_lb.model.service import (
    ANNOTATION_IPS,
    ANNOTATION_POOL,
    IPFamilyPolicy,
    Service,
    sharing_conflict,
)
from teapot_lb.validation.config import ConfigSet, OwnChecks

IPS_FIELD = f"metadata.annotations[{ANNOTATION_IPS}]"
POOL_FIELD = f"metadata.annotations[{ANNOTATION_POOL}]"


def _ips_field(svc: Service) -> str:
    return IPS_FIELD if ANNOTATION_IPS in svc.metadata.annotations else "spec.loadBalancerIP"


def service_problems(config: ConfigSet) -> Iterator[Problem]:
    requests: dict[IPAddress, list[Service]] = {}
    kept = config.kept
    if kept is not None:
        kept.begin(config.pools, config.namespaces, sorted(config.unparsed))
    for svc in config.services:
        if not svc.is_handled():
            continue
        found = kept.get(svc) if kept is not None else None
        if found is None:
            found = _own_problems(config, svc)
            if kept is not None:
                kept.put(svc, found)
        ips, problems = found
        yield from problems
        for ip in set(ips or ()):
            requests.setdefault(ip, []).append(svc)
    if kept is not None:
        kept.end()
    yield from _sharing(requests)


def _own_problems(config: ConfigSet, svc: Service) -> OwnChecks:
    """The Service's requested IPs (None: they do not parse) and its own problems."""
    try:
        ips = svc.requested_ips()
    except ValueError as err:
        return None, [problem(svc.ref, _ips_field(svc), str(err))]
    problems = list(_request_shape(svc, ips))
    if config.pools:
        problems.extend(_pool_fit(config, svc, ips))
    if not ips and not problems:
        return _NOTHING  # (kept per Service: most ask for no IP and have no problem)
    return ips, problems


# A Service's checks when it requests no IP and has no problem: one value for all of them
# (read only).
_NOTHING: OwnChecks = ([], [])


def _request_shape(svc: Service, ips: list[IPAddress]) -> Iterator[Problem]:
    ref, spec = svc.ref, svc.spec
    if ANNOTATION_IPS in svc.metadata.annotations and spec.load_balancer_ip:
        yield problem(
            ref, "spec.loadBalancerIP", f"set either loadBalancerIP or {ANNOTATION_IPS}, not both"
        )
    for version in (4, 6):
        same = [str(ip) for ip in ips if ip.version == version]
        if len(same) > 1:
            yield problem(
                ref,
                _ips_field(svc),
                f"requests {len(same)} IPv{version} addresses ({', '.join(same)});"
                " at most one per family",
            )
    families = [f.version for f in spec.ip_families]
    for f in set(families):
        if families.count(f) > 1:
            yield problem(ref, "spec.ipFamilies", f"IPv{f} is listed twice")
    if spec.ip_family_policy is IPFamilyPolicy.SINGLE_STACK and len(set(families)) > 1:
        yield problem(
            ref, "spec.ipFamilies", "lists two families but ipFamilyPolicy is SingleStack"
        )
    versions = {ip.version for ip in ips}
    if spec.ip_family_policy is IPFamilyPolicy.SINGLE_STACK and len(versions) > 1:
        yield problem(
            ref,
            _ips_field(svc),
            "requests IPv4 and IPv6 addresses but ipFamilyPolicy is SingleStack",
        )
    if families:
        for ip in ips:
            if ip.version not in families:
                yield problem(
                    ref,
                    _ips_field(svc),
                    f"requests {ip} but ipFamilies is [{', '.join(spec.ip_families)}]",
                )


def _pool_fit(config: ConfigSet, svc: Service, ips: list[IPAddress]) -> Iterator[Problem]:
    ref = svc.ref
    ns_labels = config.namespace_labels(svc.namespace)
    labels = svc.metadata.labels

    def serves(pool: AddressPool) -> bool:
        return pool.serves(svc.namespace, labels, ns_labels)

    wanted: AddressPool | None = None
    if svc.requested_pool is not None:
        named = [p for p in config.pools if p.name == svc.requested_pool]
        if not named:
            if not any(
                r.kind == "AddressPool" and r.name == svc.requested_pool for r in config.unparsed
            ):
                known = ", ".join(sorted(p.name for p in config.pools))
                yield problem(
                    ref, POOL_FIELD, f"no AddressPool named {svc.requested_pool!r} (known: {known})"
                )
            return
        wanted = named[0]
        if not serves(wanted):
            yield problem(
                ref,
                POOL_FIELD,
                f"AddressPool {wanted.name!r} does not serve Services in namespace"
                f" {svc.namespace!r} with these labels (see its serviceAllocation)",
                wanted.ref,
            )
            return
    for ip in ips:
        holders = config.pools_holding(ip)
        if not holders:
            yield problem(ref, _ips_field(svc), f"{ip} is in no AddressPool")
            continue
        pool = holders[0]
        if wanted is not None and pool is not wanted:
            yield problem(
                ref,
                _ips_field(svc),
                f"{ip} is in AddressPool {pool.name!r}, not in the requested pool {wanted.name!r}",
                pool.ref,
            )
        elif not pool.contains(ip):
            yield problem(
                ref,
                _ips_field(svc),
                f"{ip} is avoided by AddressPool {pool.name!r} (avoidBuggyIPs: no .0 or .255)",
                pool.ref,
            )
        elif not serves(pool):
            yield problem(
                ref,
                _ips_field(svc),
                f"{ip} is in AddressPool {pool.name!r}, which does not serve Services in"
                f" namespace {svc.namespace!r} with these labels (see its serviceAllocation)",
                pool.ref,
            )
    if svc.spec.ip_family_policy is IPFamilyPolicy.REQUIRE_DUAL_STACK and not ips:
        eligible = (
            [wanted] if wanted else [p for p in config.pools if p.spec.auto_assign and serves(p)]
        )
        have = set().union(*(p.families() for p in eligible)) if eligible else set()
        for version in (4, 6):
            if version not in have:
                yield problem(
                    ref,
                    "spec.ipFamilyPolicy",
                    f"RequireDualStack, but no eligible AddressPool has IPv{version} addresses",
                )


def _sharing(requests: dict[IPAddress, list[Service]]) -> Iterator[Problem]:
    """Of two Services that request one IP and cannot share it, the newer is reported."""
    for ip, requesters in requests.items():
        services = sorted(requesters, key=creation_order)
        for i, svc in enumerate(services):
            for other in services[:i]:
                why = sharing_conflict(svc, other)
                if why is not None:
                    yield problem(
                        svc.ref,
                        _ips_field(svc),
                        f"{ip} is also requested by Service {other.namespace}/{other.name},"
                        f" and they cannot share it: {why}",
                        other.ref,
                    )
                    break
