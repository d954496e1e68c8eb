"""Octavia flavors for the teapot provider (pure): one key, `mode`.

An operator makes a flavor profile with ``--provider teapot --flavor-data
'{"mode": "proxy"}'``; Octavia asks the driver to validate the metadata when the profile
is made and again when a load balancer is created with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teapot_lb.octavia.tree import Mode

MODE = "mode"

SUPPORTED: dict[str, str] = {
    MODE: (
        "How teapot-lb serves the load balancer: 'route' (default: the VIP is announced "
        "by BGP with the members as next hops; members accept the VIP as their own) or "
        "'proxy' (the shared gateway proxies to the members' ports)."
    ),
}


class FlavorError(ValueError):
    """Flavor metadata the teapot provider cannot use (the message names the key)."""


def flavor_mode(metadata: Mapping[str, Any] | None) -> Mode:
    """The mode a flavor's metadata asks for (route without one); FlavorError names
    an unknown key or a bad value."""
    metadata = metadata or {}
    unknown = sorted(set(metadata) - set(SUPPORTED))
    if unknown:
        raise FlavorError(
            f"flavor metadata key(s) {', '.join(unknown)} not supported by the teapot "
            f"provider (supported: {', '.join(SUPPORTED)})"
        )
    value = metadata.get(MODE, Mode.ROUTE.value)
    try:
        return Mode(value)
    except ValueError:
        choices = ", ".join(m.value for m in Mode)
        raise FlavorError(f"flavor metadata mode={value!r}: must be one of {choices}") from None


__all__ = ["MODE", "SUPPORTED", "FlavorError", "flavor_mode"]
