"""Builders of the providers' tests: a spec in one line, a provider's config as data."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from teapot_lb.model.service import Protocol
from teapot_lb.providers.base import Listener, LoadBalancerSpec, Member

TENANT = "acme"


def member(node: str, address: str, port: int = 8080) -> Member:
    return Member(node=node, address=ip_address(address), port=port)


def spec(
    uid: str,
    vip: str,
    *members: Member,
    port: int = 80,
    protocol: Protocol = Protocol.TCP,
    tenant: str = TENANT,
    extra: tuple[Listener, ...] = (),
) -> LoadBalancerSpec:
    """The request `uid` (key "<tenant>/<uid>") wanting `vip`:`port` to reach `members`."""
    listener = Listener(protocol=protocol, port=port, members=tuple(members))
    return LoadBalancerSpec(
        key=f"{tenant}/{uid}",
        uid=uid,
        tenant=tenant,
        addresses=(ip_address(vip),),
        listeners=(listener, *extra),
    )


def noauth_config(endpoint: str, subnet: str, project: str, **more: Any) -> dict[str, Any]:
    """The provider's config file's content for a noauth Octavia at `endpoint`."""
    return {
        "auth": {"type": "noauth", "endpoint": endpoint},
        "provider": "ovn",
        "vipSubnet": subnet,
        "tenants": {TENANT: {"project": project}},
        **more,
    }
