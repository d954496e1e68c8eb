"""Teapot tenancy rules: Tenants that contradict each other or their pools, and
TenantLoadBalancers vetted against their Tenant (:mod:`teapot_lb.tenancy.vet`)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from teapot_lb.addresses import AddressRange, parse_address_entry
from teapot_lb.model.common import ObjectRef
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.problem import Problem, problem
from teapot_lb.model.tenancy import Tenant, TenantNode
from teapot_lb.tenancy.allocation import allocated_ranges
from teapot_lb.tenancy.nodes import refused
from teapot_lb.tenancy.vet import tenant_of, vet_all
from teapot_lb.validation.config import ConfigSet


def _pools_by_name(config: ConfigSet) -> dict[str, AddressPool]:
    """AddressPools by name (the manager reads one configuration namespace)."""
    out: dict[str, AddressPool] = {}
    for pool in config.pools:
        out.setdefault(pool.name, pool)
    return out


def _overlap(a: AddressRange, b: AddressRange) -> bool:
    return a.version == b.version and int(a.first) <= int(b.last) and int(b.first) <= int(a.last)


def tenant_problems(config: ConfigSet) -> list[Problem]:
    """Each Tenant against its pools, and every pair of Tenants against each other."""
    pools = _pools_by_name(config)
    out: list[Problem] = []
    for tenant in config.tenants:
        out += _own_problems(tenant, pools)
    for a, b in combinations(config.tenants, 2):
        if a.spec.namespace == b.spec.namespace:
            out.append(
                problem(
                    b.ref,
                    "spec.namespace",
                    f"namespace {b.spec.namespace!r} already belongs to Tenant {a.name}",
                    a.ref,
                )
            )
        mine, theirs = allocated_ranges(a, pools), allocated_ranges(b, pools)
        for pool in sorted(set(mine) & set(theirs)):
            if any(_overlap(x, y) for x in mine[pool] for y in theirs[pool]):
                out.append(
                    problem(
                        b.ref,
                        "spec.allocations",
                        f"overlaps the allocation of Tenant {a.name} in AddressPool {pool}",
                        a.ref,
                    )
                )
        for net in b.node_networks():
            for other in a.node_networks():
                if net.version == other.version and net.overlaps(other):
                    out.append(
                        problem(
                            b.ref,
                            "spec.nodeNetworks",
                            f"{net} overlaps {other} of Tenant {a.name}: a tenant could "
                            "steer traffic to the other's nodes",
                            a.ref,
                        )
                    )
    return out


def _namespace_problem(tenant: Tenant) -> Problem | None:
    """A namespace no tenant may be given: its agent reads its whole namespace (Events and
    all), and `default` and `kube-*` hold the cluster's own objects (`default` also the
    Events about cluster-scoped objects: the operator's detail about each Tenant)."""
    namespace = tenant.spec.namespace
    if namespace != "default" and not namespace.startswith("kube-"):
        return None
    return problem(
        tenant.ref,
        "spec.namespace",
        f"{namespace!r} is a namespace of the cluster's own, which the tenant's agent would "
        "read whole (the Events about every Tenant are in 'default'); give the Tenant a "
        "namespace of its own",
    )


def _own_problems(tenant: Tenant, pools: dict[str, AddressPool]) -> list[Problem]:
    out = node_problems(tenant)
    reserved = _namespace_problem(tenant)
    out += [reserved] if reserved is not None else []
    for i, entry in enumerate(tenant.spec.allocations):
        pool = pools.get(entry.address_pool)
        if pool is None:
            out.append(
                problem(
                    tenant.ref,
                    f"spec.allocations[{i}].addressPool",
                    f"no AddressPool named {entry.address_pool!r}",
                )
            )
            continue
        for j, text in enumerate(entry.cidrs):
            part = parse_address_entry(text)
            inside = any(
                r.version == part.version
                and int(r.first) <= int(part.first)
                and int(part.last) <= int(r.last)
                for r in pool.address_ranges()
            )
            if not inside:
                out.append(
                    problem(
                        tenant.ref,
                        f"spec.allocations[{i}].cidrs[{j}]",
                        f"{text} is not inside AddressPool {pool.name}",
                    )
                )
    return out


def node_problems(tenant: Tenant) -> list[Problem]:
    """The Tenant's ``spec.nodes``: see :func:`_registered_problems`."""
    return _registered_problems(tenant.ref, tenant, tenant.spec.nodes)


def tenant_nodes_problems(config: ConfigSet) -> list[Problem]:
    """Each published TenantNodes against the Tenant of its namespace (the manager writes
    the same verdict in its status; the webhook does not see this kind, so that one bad
    address never keeps a cluster's other nodes from registering)."""
    out: list[Problem] = []
    for nodes in config.tenant_nodes:
        owner = tenant_of(nodes.namespace, config.tenants)
        if isinstance(owner, Tenant):
            out += _registered_problems(nodes.ref, owner, nodes.spec.nodes)
    return out


def _registered_problems(
    ref: ObjectRef, tenant: Tenant, nodes: Sequence[TenantNode]
) -> list[Problem]:
    """Registered node addresses outside the Tenant's node networks (the relay never
    counts them), and an address given to two nodes."""
    out: list[Problem] = []
    owner: dict[str, str] = {}
    for i, node in enumerate(nodes):
        for r in refused(tenant, [node]):
            where = f"spec.nodes[{i}].addresses[{node.addresses.index(r.address)}]"
            out.append(problem(ref, where, r.message))
        for j, address in enumerate(node.addresses):
            other = owner.setdefault(str(address), node.name)
            if other != node.name:
                where = f"spec.nodes[{i}].addresses[{j}]"
                out.append(problem(ref, where, f"{address} is node {other}'s already"))
    return out


def tenant_load_balancer_problems(config: ConfigSet) -> list[Problem]:
    """Every request vetted against its Tenant, quotas filled in the order given."""
    if not config.tenant_load_balancers:
        return []
    vetted = vet_all(config.tenant_load_balancers, config.tenants, _pools_by_name(config))
    return [refusal.problem(ref) for ref, refusals in vetted.items() for refusal in refusals]
