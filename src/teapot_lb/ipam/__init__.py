"""IP address management: which LoadBalancer Service gets which IPs (pure, no I/O).

Build an :class:`Allocator` from :class:`Pool` objects, feed it :class:`ServiceRequest`
objects and act on the typed results. See docs/ipam.md for the rules.
"""

from teapot_lb.ipam.allocator import Allocator
from teapot_lb.ipam.outcome import (
    Assigned,
    Change,
    ChangeReason,
    FamilyUsage,
    RefusalReason,
    Refused,
    Result,
)
from teapot_lb.ipam.pool import AddressRange, LabelMatcher, Pool
from teapot_lb.ipam.request import (
    Holding,
    IPAddress,
    IPFamily,
    IPFamilyPolicy,
    Port,
    ServiceRequest,
    TrafficPolicy,
)

__all__ = [
    "AddressRange",
    "Allocator",
    "Assigned",
    "Change",
    "ChangeReason",
    "FamilyUsage",
    "Holding",
    "IPAddress",
    "IPFamily",
    "IPFamilyPolicy",
    "LabelMatcher",
    "Pool",
    "Port",
    "RefusalReason",
    "Refused",
    "Result",
    "ServiceRequest",
    "TrafficPolicy",
]
