"""The manager drives the external providers it runs (docs/teapot.md, "Providers").

Level-triggered, per request key: once the book has accepted a request and assigned its
addresses, its provider is asked to `ensure` the load balancer (:mod:`..providers.plan`
builds the spec), and its answer becomes the request's `Programmed` condition (the book
asks :meth:`Providers.progress` when it decides). A request deleted, refused, or moved to
another provider has what was built for it deleted, until the provider says nothing is
left. Nothing here is written to the API server: what was built is known by the ownership
tags the provider finds (a restarted manager ensures every request again, which creates
nothing twice, and sweeps what no request wants), so no finalizer holds a request.

The built-in providers (`route`, `proxy`) are not driven here: the book and the speakers
and the gateway are their work, as before providers. `proxy` vets here (what the gateway
can never serve), and its `Programmed` is what the gateway's control last said of the
request (:meth:`Providers.gateway_translated`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from teapot_lb import log
from teapot_lb.gateway.translate import Translation
from teapot_lb.manager.metrics import ManagerMetrics
from teapot_lb.model.tenancy import PROXY_PROVIDER, Tenant, TenantLoadBalancer
from teapot_lb.providers.base import LoadBalancerSpec, Phase, Provider, ProviderStatus
from teapot_lb.providers.plan import load_balancer_spec, programmed, retry_delay
from teapot_lb.providers.proxy import ProxyProvider
from teapot_lb.providers.table import BUILTIN
from teapot_lb.tenancy.book import ManagementView, Programmed, TenantBook, unavailable
from teapot_lb.tenancy.vet import Refusal, Rule


@dataclass(frozen=True)
class Built:
    """What a provider was last asked to build for a request key."""

    provider: str
    uid: str


@dataclass(frozen=True)
class Turn:
    """What one reconcile of a request's provider key did: when to come back (None: at
    the resync) and whether the request's `Programmed` changed (its status is written)."""

    delay: float | None
    changed: bool


@dataclass(frozen=True)
class _Word:
    built: Built
    spec: LoadBalancerSpec | None
    status: ProviderStatus | None


class Providers:
    """The external providers this manager runs, and what it asked each to build.
    `gateway_services`: its gateway control writes the Services that announce the `proxy`
    requests' addresses (`--gateway-service`; without, their `Programmed` says nothing
    announces them)."""

    def __init__(
        self,
        running: Mapping[str, Provider],
        metrics: ManagerMetrics,
        *,
        call_timeout_s: float = 120.0,
        retry_base_s: float = 1.0,
        retry_cap_s: float = 60.0,
        gateway_services: bool = False,
    ) -> None:
        builtin = sorted(set(running) & BUILTIN)
        if builtin:
            raise ValueError(f"{', '.join(builtin)}: built in, not run as an external provider")
        self.running = dict(running)
        self.metrics = metrics
        self.call_timeout_s = call_timeout_s
        self.retry_base_s = retry_base_s
        self.retry_cap_s = retry_cap_s
        self._built: dict[str, Built] = {}  # what exists (or may) per request key
        self._words: dict[str, _Word] = {}  # the last spec ensured and its answer
        self._failures: dict[str, int] = {}
        self._cleared: set[Built] = set()  # refused requests whose objects are deleted
        self.proxy = ProxyProvider(announced=gateway_services)
        self._log = log.get("manager.providers")

    def names(self) -> list[str]:
        return sorted(BUILTIN | set(self.running))

    def new_term(self) -> None:
        """A new lease term: ask every provider again (what was built is still known)."""
        self._words.clear()
        self._failures.clear()

    # ------------------------------------------------------------ the book's hooks

    def vet(self, request: TenantLoadBalancer, tenant: Tenant, name: str) -> list[Refusal[Rule]]:
        """The provider step of the book's vetting: runs here, and its own `refuse`."""
        if name in BUILTIN and name != PROXY_PROVIDER:
            return []
        provider = self.proxy if name == PROXY_PROVIDER else self.running.get(name)
        if provider is None:
            return [unavailable(name, self.names())]
        try:
            words = provider.refuse(request, tenant)
        except Exception:  # a provider's bug must not stop the manager
            # (its error, in the log, is the operator's: the request's words are the tenant's)
            self._log.exception("provider refuse failed", provider=name, key=_key(request))
            words = [f"provider {name} could not vet the request; ask the operator"]
        return [Refusal(Rule.PROVIDER_REFUSED, "", f"provider {name}: {w}") for w in words]

    def progress(self, key: str, request: TenantLoadBalancer, name: str) -> Programmed | None:
        """The provider's last word on this request as its `Programmed` condition."""
        if name == PROXY_PROVIDER:
            return programmed(self.proxy.status(key, request))
        word = self._words.get(key)
        if word is None or word.status is None or word.built != _built(name, request):
            return None
        return programmed(word.status)

    def gateway_translated(self, result: Translation) -> list[str]:
        """The gateway's control translated again: the requests of provider `proxy` whose
        result changed (their `Programmed` is decided again)."""
        return self.proxy.told(result)

    # ------------------------------------------------------------ the loop

    def building(self, key: str) -> bool:
        """A provider builds `key` now (it is ensured again at the resync)."""
        return key in self._words

    def _wanted(
        self, key: str, view: ManagementView, book: TenantBook
    ) -> tuple[Built | None, LoadBalancerSpec | None]:
        """Who should have what built for `key` now (None, None: nobody)."""
        request = view.requests.get(key)
        if request is None:
            return None, None
        tenant = view.tenant_of(request.namespace)
        if not isinstance(tenant, Tenant):
            return None, None
        name = tenant.provider_for(request)
        if name not in self.running:
            return None, None
        built = _built(name, request)
        addresses = book.assigned(key)
        if book.holder_tenant(key) != tenant.name or not addresses:
            return built, None  # refused, or not given addresses: built for nobody
        return built, load_balancer_spec(key, request, tenant.name, addresses)

    def wants_turn(self, key: str, view: ManagementView, book: TenantBook) -> bool:
        """Whether `key`'s provider must be called now (its spec or provider changed, or
        something built is no longer wanted): the book's reconcile asks, so that its own
        status write does not call the provider again."""
        built, spec = self._wanted(key, view, book)
        old = self._built.get(key)
        if old is not None and (spec is None or old != built):
            return True
        if spec is None:
            return built is not None and built not in self._cleared
        word = self._words.get(key)
        return word is None or word.built != built or word.spec != spec

    async def reconcile(self, key: str, view: ManagementView, book: TenantBook) -> Turn:
        """One level-triggered step for request `key`."""
        built, spec = self._wanted(key, view, book)
        old = self._built.get(key)
        if old is not None and (spec is None or old != built):
            status = await self._delete(key, old)
            if status is not None:
                return Turn(self._delay(key, status), False)
            del self._built[key]
            self._cleared.add(old)
        if spec is None or built is None:
            changed = self._words.pop(key, None) is not None
            self._failures.pop(key, None)
            if built is not None and built not in self._cleared:
                # refused (after a restart, what it had may still exist): nothing stays
                status = await self._delete(key, built)
                if status is not None:
                    return Turn(self._delay(key, status), changed)
                self._cleared.add(built)
            return Turn(None, changed)
        self._cleared.discard(built)
        self._built[key] = built
        status = await self._ensure(built.provider, spec)
        before = self._words.get(key)
        self._words[key] = _Word(built, spec, status)
        changed = before is None or before.status != status or before.built != built
        return Turn(self._delay(key, status), changed)

    def _delay(self, key: str, status: ProviderStatus) -> float | None:
        failures = self._failures.get(key, 0)
        if status.phase is Phase.ERROR:
            self._failures[key] = failures + 1
        else:
            self._failures.pop(key, None)
        return retry_delay(status, failures, base_s=self.retry_base_s, cap_s=self.retry_cap_s)

    async def _ensure(self, name: str, spec: LoadBalancerSpec) -> ProviderStatus:
        status = await self._call(name, "ensure", lambda p: p.ensure(spec), spec.key)
        assert status is not None  # _call only returns None for a delete
        return status

    async def _delete(self, key: str, built: Built) -> ProviderStatus | None:
        if built.provider not in self.running:
            return None  # no longer run here: the operator removed it, and its objects
        return await self._call(
            built.provider, "delete", lambda p: p.delete(key, built.uid), key, deleting=True
        )

    async def _call(
        self,
        name: str,
        call: str,
        do: Callable[[Provider], Awaitable[ProviderStatus | None]],
        key: str,
        *,
        deleting: bool = False,
    ) -> ProviderStatus | None:
        """One call of a provider, timed and counted; a raise or a timeout becomes an
        Error status (retried), never a crashed reconcile or a status left Provisioning."""
        started = time.perf_counter()
        status: ProviderStatus | None
        try:
            async with asyncio.timeout(self.call_timeout_s):
                status = await do(self.running[name])
        except TimeoutError:
            status = ProviderStatus(
                Phase.ERROR,
                "ProviderTimeout",
                f"provider {name} did not answer within {self.call_timeout_s:g} s; retrying",
            )
        except Exception as err:
            self._log.exception("provider call failed", provider=name, call=call, key=key)
            status = ProviderStatus(
                Phase.ERROR,
                "ProviderFailed",
                f"provider {name} failed to {call} ({type(err).__name__}: {err}); retrying",
            )
        seconds = time.perf_counter() - started
        self.metrics.provider_seconds.labels(name, call).observe(seconds)
        phase = "Deleted" if status is None else status.phase.value
        self.metrics.provider_calls.labels(name, call, phase).inc()
        if status is not None and status.phase is Phase.ERROR:
            self.metrics.provider_errors.labels(name, call).inc()
            self._log.warning(
                "provider error", provider=name, call=call, key=key, reason=status.reason,
                message=status.message, deleting=deleting,
            )  # fmt: skip
        return status

    async def sweep(self, name: str, view: ManagementView) -> list[str]:
        """Have provider `name` delete what it built for no request there is: every
        request whose provider it is counts as wanted (a refused one is deleted by its
        own key's reconcile)."""
        wanted: dict[str, str] = {}
        for key, request in view.requests.items():
            tenant = view.tenant_of(request.namespace)
            if isinstance(tenant, Tenant) and tenant.provider_for(request) == name:
                wanted[request.metadata.uid or ""] = key
        wanted.pop("", None)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.call_timeout_s):
                deleted = await self.running[name].sweep(wanted)
        except Exception:
            self._log.exception("provider sweep failed", provider=name)
            self.metrics.provider_errors.labels(name, "sweep").inc()
            deleted = []
        self.metrics.provider_seconds.labels(name, "sweep").observe(time.perf_counter() - started)
        self.metrics.provider_calls.labels(name, "sweep", "Active").inc()
        if deleted:
            self._log.info("provider swept", provider=name, deleted=deleted)
        return deleted


def _built(name: str, request: TenantLoadBalancer) -> Built:
    return Built(name, request.metadata.uid or "")


def _key(request: TenantLoadBalancer) -> str:
    return f"{request.namespace}/{request.name}"


__all__ = ["Built", "Providers", "Turn"]
