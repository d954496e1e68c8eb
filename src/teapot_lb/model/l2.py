"""L2Advertisement: one elected node answers ARP / NDP for each address."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from teapot_lb.model.common import (
    ConditionsStatus,
    Identified,
    InterfaceName,
    KubeModel,
    ObjectMeta,
    none_as_empty,
)
from teapot_lb.model.pool import PoolSelection


class L2AdvertisementSpec(PoolSelection):
    """Which pools are announced by ARP (IPv4) / NDP (IPv6), from which nodes and interfaces."""

    interfaces: list[InterfaceName] = []
    """Answer only on these interfaces; empty means the interface whose subnet holds the IP."""


class L2Advertisement(Identified, KubeModel):
    """Announce pools' addresses on the local link (active/standby per address)."""

    api_version: Literal["lb.teapot.io/v1alpha1"] = Field(
        default="lb.teapot.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["L2Advertisement"] = "L2Advertisement"
    metadata: ObjectMeta
    spec: Annotated[L2AdvertisementSpec, BeforeValidator(none_as_empty)] = Field(
        default_factory=L2AdvertisementSpec
    )
    status: ConditionsStatus | None = None
