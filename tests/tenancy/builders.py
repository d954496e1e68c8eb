"""Builders for Teapot tenancy tests: two tenants, acme and bolt, on shared pools.

acme: namespace tenant-acme, 198.51.100.0/28 of pool shared-v4, 2001:db8:100::/124 of
shared-v6, nodes in 192.0.2.0/26 and 2001:db8:a::/64. bolt: namespace tenant-bolt,
198.51.100.16/28 and 2001:db8:100::10/124, nodes in 192.0.2.64/26 and 2001:db8:b::/64.
"""

from __future__ import annotations

from typing import Any

from teapot_lb.model.kinds import ApiObject
from teapot_lb.model.manifest import parse_object
from teapot_lb.model.pool import AddressPool
from teapot_lb.model.tenancy import Tenant, TenantLoadBalancer

API = "lb.teapot.io/v1alpha1"
CONFIG_NS = "teapot-lb-system"

TENANTS: dict[str, dict[str, Any]] = {
    "acme": {
        "namespace": "tenant-acme",
        "v4": "198.51.100.0/28",
        "v6": "2001:db8:100::/124",
        "nodes": ["192.0.2.0/26", "2001:db8:a::/64"],
        "node_ips": ["192.0.2.11", "192.0.2.12", "192.0.2.13"],
    },
    "bolt": {
        "namespace": "tenant-bolt",
        "v4": "198.51.100.16/28",
        "v6": "2001:db8:100::10/124",
        "nodes": ["192.0.2.64/26", "2001:db8:b::/64"],
        "node_ips": ["192.0.2.71", "192.0.2.72"],
    },
}


def parsed(body: dict[str, Any]) -> ApiObject:
    obj, problems = parse_object(body)
    assert obj is not None and not problems, problems
    return obj


def pool_body(name: str, addresses: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AddressPool",
        "metadata": {"name": name, "namespace": CONFIG_NS},
        "spec": {"addresses": addresses, "autoAssign": False},
    }


def pools() -> dict[str, AddressPool]:
    out = {}
    for name, addresses in (
        ("shared-v4", ["198.51.100.0/26"]),
        ("shared-v6", ["2001:db8:100::/120"]),
    ):
        pool = parsed(pool_body(name, addresses))
        assert isinstance(pool, AddressPool)
        out[name] = pool
    return out


def tenant_body(name: str, **spec: Any) -> dict[str, Any]:
    facts = TENANTS[name]
    body: dict[str, Any] = {
        "namespace": facts["namespace"],
        "allocations": [
            {"addressPool": "shared-v4", "cidrs": [facts["v4"]]},
            {"addressPool": "shared-v6", "cidrs": [facts["v6"]]},
        ],
        "quotas": {"addresses": 6, "loadBalancers": 5, "ports": 12},
        "nodeNetworks": facts["nodes"],
        "asn": 64512 + len(name),
        "modes": ["Route"],
    }
    body.update(spec)
    return {"apiVersion": API, "kind": "Tenant", "metadata": {"name": name}, "spec": body}


def tenant(name: str, **spec: Any) -> Tenant:
    obj = parsed(tenant_body(name, **spec))
    assert isinstance(obj, Tenant)
    return obj


def tlb_body(
    tenant_name: str,
    name: str,
    *,
    cluster: str = "c1",
    namespace: str | None = None,
    ready: bool = True,
    **spec: Any,
) -> dict[str, Any]:
    facts = TENANTS[tenant_name]
    body: dict[str, Any] = {
        "source": {"cluster": cluster, "namespace": "default", "name": name, "uid": f"uid-{name}"},
        "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}],
        "backends": [
            {"node": f"n{i}", "addresses": [ip], "ready": ready}
            for i, ip in enumerate(facts["node_ips"])
        ],
    }
    body.update(spec)
    return {
        "apiVersion": API,
        "kind": "TenantLoadBalancer",
        "metadata": {"name": name, "namespace": namespace or facts["namespace"]},
        "spec": body,
    }


def tlb(tenant_name: str, name: str, **kwargs: Any) -> TenantLoadBalancer:
    obj = parsed(tlb_body(tenant_name, name, **kwargs))
    assert isinstance(obj, TenantLoadBalancer)
    return obj


def gateway_service_body(ip: str, name: str = "teapot-lb-gateway") -> dict[str, Any]:
    """The shared gateway's LoadBalancer Service (`deploy/teapot/gateway-node.yaml`), the
    template of the Services announcing the other gateway addresses."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": CONFIG_NS, "annotations": {"lb.teapot.io/ips": ip}},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": "lb.teapot.io/teapot",
            "externalTrafficPolicy": "Local",
            "selector": {"app.kubernetes.io/component": "gateway"},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        },
    }
