"""What the controller's reconcile loop reconciles: one key type per kind of work."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceKey:
    """One Service (`namespace/name`): assign, keep or release its IPs and write them."""

    key: str

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class PoolsKey:
    """The AddressPools together (they are checked against each other): re-read them into
    the allocator, then reconcile the Services a change moved."""

    def __str__(self) -> str:
        return "AddressPools"


@dataclass(frozen=True)
class PoolStatusKey:
    """Every AddressPool's status (usage, conditions), written after a short delay so that
    many Service changes make one write per pool."""

    def __str__(self) -> str:
        return "AddressPool statuses"


ControllerKey = ServiceKey | PoolsKey | PoolStatusKey

POOLS = PoolsKey()
POOL_STATUS = PoolStatusKey()


def metric_kind(key: ControllerKey) -> str:
    """The `kind` label of the reconcile metrics."""
    return "service" if isinstance(key, ServiceKey) else "pools"
