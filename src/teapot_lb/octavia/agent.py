"""The teapot provider agent: keeps Octavia's operating statuses and listener statistics
current (adapter, asyncio; the decisions are :mod:`.health`'s).

``octavia-driver-agent`` starts it in a process of its own when ``[driver_agent]
enabled_provider_agents`` names ``teapot`` (entry point
``octavia.driver_agent.provider_agents: teapot``), calls :func:`run` with the agent's
exit event and calls it again if it raises. Every ``[teapot] status_interval`` seconds,
level-triggered, it reads:

- the driver's TenantLoadBalancers from the management API (each carries its Octavia
  tree and the manager's answer);
- each gateway's backend report (:mod:`teapot_lb.gateway.report`) on its metrics port:
  the ready endpoints of the gateway's Service (``[teapot] gateway_service``, its
  EndpointSlices read again every round; :mod:`.gateways`), or the explicit
  ``[teapot] gateway_status_urls``;

and sends Octavia the operating statuses that changed (octavia-lib's
``update_loadbalancer_status``, operating statuses only) and the listener statistics
that changed (``update_listener_statistics``). A request the manager accepted whose
statuses the driver never delivered (no ``octavia.lb.teapot.io/reported`` mark for its
generation for longer than the driver takes to report a change: the API process went
away mid-report) is sent whole, provisioning statuses included, so no load balancer
stays ``PENDING_*``.
With the agent enabled the driver leaves operating statuses to it: one writer. A
gateway that does not answer is logged by name and its members keep their statuses;
the agent never stops over a failed read or send.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from octavia_lib.api.drivers import driver_lib
from oslo_config import cfg

from teapot_lb import log
from teapot_lb.gateway.report import PATH, BackendsReport
from teapot_lb.kube.client import KubeClient, connect
from teapot_lb.kube.errors import KubeError
from teapot_lb.kube.resources import TENANT_LOAD_BALANCERS
from teapot_lb.model.tenancy import TenantLoadBalancer
from teapot_lb.octavia.gateways import DEFAULT_PORT, GatewayFinder
from teapot_lb.octavia.health import (
    CounterTotals,
    Key,
    operating_statuses,
    resent,
    status_changes,
)
from teapot_lb.octavia.l7 import LABEL_LOADBALANCER
from teapot_lb.octavia.management import Management
from teapot_lb.octavia.mapping import Answer, answer_to, tree_of, unreported
from teapot_lb.octavia.tree import LoadBalancer

_log = log.get("octavia.agent")

NAME = "teapot"
"""The agent's name in ``enabled_provider_agents`` (and its entry point)."""
GROUP = "teapot"
AGENT_OPTIONS = [
    cfg.ListOpt("gateway_status_urls", default=[],
                help="Base URLs of the gateways' metrics ports (http://HOST:7475), whose "
                     f"{PATH} reports the provider agent reads; when set, gateway_service "
                     "is not used"),
    cfg.StrOpt("gateway_service", default="",
               help="<namespace>/<name> of the gateway's Service in the management cluster "
                    "(teapot-lb-system/teapot-lb-gateway): the agent reads the reports of "
                    "its ready endpoints, found by its EndpointSlices every round"),
    cfg.StrOpt("gateway_status_port", default=DEFAULT_PORT,
               help="The gateways' metrics port with gateway_service: a number (on each "
                    "endpoint's address) or the name of a port of the Service"),
    cfg.FloatOpt("status_interval", default=5.0, min=0.2,
                 help="Seconds between the provider agent's rounds"),
    cfg.FloatOpt("resync_interval", default=300.0, min=1.0,
                 help="Seconds after which the provider agent sends every operating status "
                      "again (it otherwise sends changes only)"),
]  # fmt: skip


def enabled(conf: Any) -> bool:
    """Whether octavia-driver-agent runs this agent (then operating statuses are its)."""
    return NAME in (conf.driver_agent.enabled_provider_agents or [])


def _register(conf: Any) -> Any:
    from teapot_lb.octavia.driver_runtime import OPTIONS  # the management API's settings

    for opts in (OPTIONS, AGENT_OPTIONS):
        with contextlib.suppress(cfg.DuplicateOptError):
            conf.register_opts(opts, group=GROUP)
    return getattr(conf, GROUP)


class Agent:
    """One round at a time: read, decide (:mod:`.health`), send what changed."""

    def __init__(self, options: Any, lib: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.clock = clock
        self.lib = lib
        self.sent: dict[Key, str] = {}
        self.sent_stats: dict[str, dict[str, int | str]] = {}
        self.totals = CounterTotals()
        self.unreachable: set[str] = set()
        # request name -> (generation, when first seen unreported)
        self.unreported: dict[str, tuple[int, float]] = {}
        # A live driver reports a change within its own deadlines (write, answer, report):
        # only a generation unreported for longer is the agent's to send.
        self.resend_after = options.answer_timeout + 2 * options.request_timeout
        self.client: KubeClient | None = None
        o = options
        self.gateways = GatewayFinder(
            o.gateway_status_urls or [], o.gateway_service, o.gateway_status_port
        )
        self.resynced = time.monotonic()

    async def reports(self, session: aiohttp.ClientSession) -> list[BackendsReport]:
        out = []
        timeout = aiohttp.ClientTimeout(total=min(self.options.status_interval, 5.0) + 1.0)
        for url in await self.gateways.urls(self.client):
            try:
                async with session.get(url.rstrip("/") + PATH, timeout=timeout) as response:
                    response.raise_for_status()
                    report = BackendsReport.model_validate_json(await response.read())
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
                if url not in self.unreachable:
                    _log.warning("gateway unreachable", url=url, error=str(err) or repr(err))
                self.unreachable.add(url)
                self.totals.forget(url)
                continue
            if url in self.unreachable:
                _log.info("gateway reachable again", url=url)
                self.unreachable.discard(url)
            self.totals.observe(url, report)
            out.append(report)
        return out

    async def connected(self) -> KubeClient:
        if self.client is None:
            o = self.options
            self.client = await connect(o.kubeconfig, context=o.context,
                                        user_agent="teapot-lb-octavia-agent",
                                        request_timeout_s=o.request_timeout)  # fmt: skip
        return self.client

    async def requests(self) -> list[TenantLoadBalancer]:
        client = await self.connected()
        found = await client.list(TENANT_LOAD_BALANCERS, label_selector=LABEL_LOADBALANCER)
        return [TenantLoadBalancer.model_validate(obj) for obj in found.items]

    async def round(self, session: aiohttp.ClientSession) -> None:
        if time.monotonic() - self.resynced > self.options.resync_interval:
            self.sent.clear()
            self.sent_stats.clear()
            self.resynced = time.monotonic()
        try:
            requests = await self.requests()
        except (KubeError, OSError, ValueError, TimeoutError) as err:
            _log.warning("management API unreadable", error=str(err) or repr(err))
            return
        reports = await self.reports(session)
        seen: set[str] = set()
        unreported_now: dict[str, tuple[int, float]] = {}
        for request in requests:
            lb = tree_of(request)
            answer = Answer.of(request.status)
            if lb is None or answer is None:
                continue
            namespace = request.metadata.namespace or ""
            statuses = operating_statuses(lb, answer, namespace, reports, last=self.sent)
            seen.update(ident for _, ident in statuses)
            pending = unreported(request)
            if pending is not None:
                seen_at = self.unreported.get(request.name)
                since = seen_at[1] if seen_at and seen_at[0] == pending else self.clock()
                due = self.clock() - since >= self.resend_after
                if not due or not await self._resend(request, lb, statuses, pending):
                    unreported_now[request.name] = (pending, since)
            changes = status_changes(statuses, self.sent)
            if changes and await self._send(
                "statuses", lb.id, self.lib.update_loadbalancer_status, changes
            ):
                self.sent.update(statuses)
            stats = [
                s
                for s in self.totals.listener_statistics(lb, namespace)
                if self.sent_stats.get(str(s["id"])) != s
            ]
            if stats and await self._send(
                "statistics", lb.id, self.lib.update_listener_statistics, {"listeners": stats}
            ):
                self.sent_stats.update({str(s["id"]): s for s in stats})
        self.unreported = unreported_now
        # Objects gone from every tree are forgotten (bounded memory).
        self.sent = {k: v for k, v in self.sent.items() if k[1] in seen}
        self.sent_stats = {k: v for k, v in self.sent_stats.items() if k in seen}

    async def _resend(
        self,
        request: TenantLoadBalancer,
        lb: LoadBalancer,
        statuses: dict[Key, str],
        generation: int,
    ) -> bool:
        """Send the whole tree of a generation the driver never reported, and mark it."""
        answer = answer_to(request)
        if answer is None or self.client is None:
            return False
        update = resent(lb, answer, statuses)
        if not await self._send("unreported statuses", lb.id,
                                self.lib.update_loadbalancer_status, update):  # fmt: skip
            return False
        _log.info("unreported statuses sent", lb=lb.id, generation=generation)
        self.sent.update(statuses)
        namespace = request.metadata.namespace or ""
        try:
            await Management(self.client).mark_reported(namespace, lb.id, generation)
        except (KubeError, OSError, TimeoutError) as err:  # sent again next round: harmless
            _log.warning("reported mark not written", lb=lb.id, error=str(err) or repr(err))
        return True

    async def _send(self, what: str, lb_id: str, call: Any, body: dict[str, Any]) -> bool:
        try:
            await asyncio.to_thread(call, body)
        except Exception as err:  # the driver agent's sockets: busy, restarting, refusing
            _log.warning("octavia update failed", what=what, lb=lb_id, error=repr(err))
            return False
        _log.debug("octavia updated", what=what, lb=lb_id, body=body)
        return True

    async def run(self, exit_event: Any) -> None:
        async with aiohttp.ClientSession() as session:
            try:
                while True:
                    started = time.monotonic()
                    try:
                        await self.round(session)
                    except Exception as err:  # never leave Octavia without the agent
                        _log.error("agent round failed", error=repr(err))
                    wait = max(0.0, self.options.status_interval - (time.monotonic() - started))
                    if await asyncio.to_thread(exit_event.wait, wait):
                        return
            finally:
                if self.client is not None:
                    with contextlib.suppress(Exception):
                        await self.client.close()


def run(exit_event: Any) -> None:
    """The entry point octavia-driver-agent calls (until `exit_event` is set)."""
    conf = cfg.CONF
    options = _register(conf)
    agent = conf.driver_agent
    lib = driver_lib.DriverLibrary(
        status_socket=agent.status_socket_path,
        stats_socket=agent.stats_socket_path,
        get_socket=agent.get_socket_path,
    )
    try:
        the_agent = Agent(options, lib)
    except ValueError as err:  # a malformed [teapot] setting: named, not a traceback
        _log.error("provider agent not started", error=str(err))
        raise
    _log.info("provider agent started", gateways=list(options.gateway_status_urls),
              gateway_service=options.gateway_service or None,
              interval=options.status_interval)  # fmt: skip
    asyncio.run(the_agent.run(exit_event))
    _log.info("provider agent stopped")


__all__ = ["AGENT_OPTIONS", "NAME", "Agent", "enabled", "run"]
