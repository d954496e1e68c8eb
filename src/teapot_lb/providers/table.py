"""Every provider by name: the one table the manager, the CLI and the docs read.

A vendor adds a provider with one module exposing `load(config) -> Provider` and one line
here. Modules are imported only when an operator runs their provider (an SDK a provider
needs is not a dependency of every manager).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import cast

from teapot_lb.model.tenancy import PROXY_PROVIDER, ROUTE_PROVIDER
from teapot_lb.providers.base import Provider

Load = Callable[[Mapping[str, object]], Provider]

MODULES: dict[str, str] = {
    ROUTE_PROVIDER: "teapot_lb.providers.route",
    PROXY_PROVIDER: "teapot_lb.providers.proxy",
    "octavia": "teapot_lb.providers.octavia",
}
"""Provider name -> the module whose `load(config)` builds it."""

BUILTIN: frozenset[str] = frozenset({ROUTE_PROVIDER, PROXY_PROVIDER})
"""Run by every manager, built by its own speakers and gateway; configured by nothing."""


class UnknownProvider(ValueError):
    """A provider name the table does not hold, or whose module is not installed."""


def factory(name: str) -> Load:
    """The `load` of provider `name`; UnknownProvider says which names there are."""
    module_name = MODULES.get(name)
    if module_name is None:
        raise UnknownProvider(f"no provider {name!r} (providers: {', '.join(sorted(MODULES))})")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise UnknownProvider(
            f"provider {name!r} is not installed in this build ({err.msg})"
        ) from None
    return cast(Load, module.load)


def load(name: str, config: Mapping[str, object]) -> Provider:
    """Provider `name` built from its configuration (ValueError: what is wrong in it)."""
    provider = factory(name)(config)
    if provider.name != name:
        raise UnknownProvider(
            f"module {MODULES[name]} built provider {provider.name!r}, not {name!r}"
        )
    return provider


def builtin() -> dict[str, Provider]:
    """The built-in providers, by name."""
    return {name: load(name, {}) for name in sorted(BUILTIN)}


__all__ = ["BUILTIN", "MODULES", "UnknownProvider", "builtin", "factory", "load"]
