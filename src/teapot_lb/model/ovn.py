"""OVNAdvertisement: the OVN Northbound database load-balances the selected pools' addresses.

No node announces anything for it: one writer per cluster (``teapot-lb ovn``, elected on a
Lease) keeps one OVN ``Load_Balancer`` row per Service IP and protocol, attached to the
gateway routers (north-south) and logical switches (east-west) named here. See docs/ovn.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from teapot_lb.model.common import (
    ConditionsStatus,
    Identified,
    IPAddressField,
    KubeModel,
    ObjectMeta,
    none_as_empty,
)
from teapot_lb.model.pool import PoolSelection

# OVN's defaults for a Load_Balancer_Health_Check (ovn-nb(5)); ours when a field is unset.
DEFAULT_HEALTH_INTERVAL_S = 5
DEFAULT_HEALTH_TIMEOUT_S = 20
DEFAULT_HEALTH_SUCCESS_COUNT = 3
DEFAULT_HEALTH_FAILURE_COUNT = 3
# ovn-kubernetes names a Pod's logical switch port `namespace_name`.
DEFAULT_LOGICAL_PORT_FORMAT = "{namespace}_{name}"

OVNName = Annotated[str, Field(min_length=1, max_length=253)]


def _check_port_format(text: str) -> str:
    try:
        text.format(namespace="ns", name="pod")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"{text!r} is not a port name format: only {{namespace}} and {{name}} may appear"
        ) from exc
    return text


PortFormat = Annotated[str, Field(min_length=1), AfterValidator(_check_port_format)]


class OVNGatewayRouter(KubeModel):
    """A gateway router the Service IPs are load-balanced on (north-south traffic)."""

    name: OVNName
    """The Logical_Router's name in the Northbound database."""
    node: str | None = None
    """The Kubernetes node this router is the gateway of (ovn-kubernetes: `GR_<node>`).
    With externalTrafficPolicy Local the router load-balances to that node's ready
    endpoints only; a router without a node serves no Local Service."""


class OVNHealthCheck(KubeModel):
    """OVN service monitors for the backends (ovn-nb(5) Load_Balancer_Health_Check); IPv4
    backends that have a Pod (`targetRef`) only: OVN probes a logical port from an address."""

    source_ip: IPAddressField = Field(alias="sourceIP")
    """The address the probes come from (unused, in the backends' logical switch subnet)."""
    interval: int = Field(default=DEFAULT_HEALTH_INTERVAL_S, ge=1, le=3600)
    """Seconds between probes."""
    timeout: int = Field(default=DEFAULT_HEALTH_TIMEOUT_S, ge=1, le=3600)
    """Seconds before a probe counts as failed."""
    success_count: int = Field(default=DEFAULT_HEALTH_SUCCESS_COUNT, ge=1, le=100)
    """Successful probes before a backend is online again."""
    failure_count: int = Field(default=DEFAULT_HEALTH_FAILURE_COUNT, ge=1, le=100)
    """Failed probes before a backend is taken offline."""
    logical_port_format: PortFormat = DEFAULT_LOGICAL_PORT_FORMAT
    """A backend Pod's logical switch port name, from `{namespace}` and `{name}` of the
    endpoint's targetRef."""


class OVNAdvertisementSpec(PoolSelection):
    """Where OVN load-balances the selected pools' addresses. `nodeSelectors` do not apply:
    OVN, not the nodes, carries the traffic (validation refuses them)."""

    gateway_routers: list[OVNGatewayRouter] = []
    """Gateway routers that answer for the Service IPs on their external ports."""
    logical_switches: list[OVNName] = []
    """Logical switches whose ports reach the Service IPs directly (east-west)."""
    health_check: OVNHealthCheck | None = None
    """Probe the backends; a failing backend gets no new connections. Default: none."""


class OVNAdvertisement(Identified, KubeModel):
    """Load-balance pools' addresses in OVN (the cluster's network is OVN)."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["OVNAdvertisement"] = "OVNAdvertisement"
    metadata: ObjectMeta
    spec: Annotated[OVNAdvertisementSpec, BeforeValidator(none_as_empty)] = Field(
        default_factory=OVNAdvertisementSpec
    )
    status: ConditionsStatus | None = None
