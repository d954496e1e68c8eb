"""Builders for IPAM tests: pools and Services in one line each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import ip_address

from teapot_lb.addresses import parse_address_entry
from teapot_lb.ipam import (
    Assigned,
    IPAddress,
    IPFamily,
    IPFamilyPolicy,
    Pool,
    Result,
    ServiceRequest,
    TrafficPolicy,
)


@dataclass(frozen=True)
class MatchLabels:
    """A label selector with matchLabels only: every listed label must be present and equal."""

    labels: Mapping[str, str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.labels.items())


def pool(name: str, *specs: str, **kwargs: object) -> Pool:
    """`pool("a", "192.0.2.0/28", "2001:db8::/64", priority=1)`."""
    return Pool(name, tuple(parse_address_entry(s) for s in specs), **kwargs)  # type: ignore[arg-type]


def ip(text: str) -> IPAddress:
    return ip_address(text)


def svc(
    name: str,
    namespace: str = "default",
    *,
    ips: str = "",
    pool: str | None = None,
    key: str | None = None,
    ports: str = "",
    policy: str = "SingleStack",
    families: str = "IPv4",
    local: bool = False,
    selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    namespace_labels: Mapping[str, str] | None = None,
) -> ServiceRequest:
    """`svc("web", ips="192.0.2.5", key="k", ports="TCP/80,UDP/53", local=True)`."""
    port_set = set()
    for item in filter(None, (p.strip() for p in ports.split(","))):
        proto, number = item.split("/")
        port_set.add((proto, int(number)))
    return ServiceRequest(
        namespace,
        name,
        labels=labels or {},
        namespace_labels=namespace_labels or {},
        ip_family_policy=IPFamilyPolicy(policy),
        ip_families=tuple(IPFamily(f.strip()) for f in families.split(",")),
        requested_ips=tuple(ip_address(s.strip()) for s in ips.split(",") if s.strip()),
        requested_pool=pool,
        sharing_key=key,
        ports=frozenset(port_set),
        external_traffic_policy=TrafficPolicy.LOCAL if local else TrafficPolicy.CLUSTER,
        selector=selector or {"app": name},
    )


def ips_of(result: Result) -> list[str]:
    """The IPs of an Assigned result as strings (fails the test with the refusal otherwise)."""
    assert isinstance(result, Assigned), result
    return [str(a) for a in result.ips]
